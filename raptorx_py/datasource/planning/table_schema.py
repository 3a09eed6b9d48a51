"""What a scan's schema is made of and carries: the table's columns a read asks for, and the
hints on the schema's first field for the JVM provider (the table's size for Spark's join
planning, the filters the reader evaluates exactly, aggregation pushdown, the table's
description for the Spark catalog).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from pyspark.sql import datasource as ds
from pyspark.sql.types import StructField, StructType

from raptorx_py import predicates as preds
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planning.column_names import (
    requested_names,
    resolve_columns,
    resolve_schema_columns,
)
from raptorx_py.errors import SchemaError
from raptorx_py.hive.column_types import spark_type
from raptorx_py.hive.model import Column, Partition, Table
from raptorx_py.hive.table_parameters import NUM_ROWS_PARAM, TOTAL_SIZE_PARAM
from raptorx_py.jvm_contract import protocol
from raptorx_py.metrics import counters


def table_column(table: Table, name: str) -> Column:
    """The column ``name`` of ``table``; the error lists the columns that exist."""
    col = table.column(name)
    if col is None:
        raise SchemaError(
            f"column '{name}' does not exist in {table.qualified_name}. "
            f"Columns: {', '.join(c.name for c in table.all_columns)}"
        )
    return col


def select_columns(
    table: Table, requested: str | None, case_sensitive: bool = False
) -> tuple[Column, ...]:
    """The columns the ``columns`` option names (all when unset), in the table's spelling."""
    if not requested:
        return table.all_columns
    return resolve_columns(
        table, requested_names(requested), case_sensitive, f"the columns option {requested!r}"
    )


def columns_for_schema(
    table: Table, schema: StructType, case_sensitive: bool = False
) -> tuple[Column | None, ...]:
    """The table columns a (user-given or derived) Spark schema asks for, in its order; None
    for a field the table does not have (read as nulls, as Spark's Parquet reader reads a
    column its files lack: ``column_names.py``)."""
    out: list[Column | None] = []
    resolved = resolve_schema_columns(
        table, [f.name for f in schema.fields], case_sensitive, "the read's schema"
    )
    for f, col in zip(schema.fields, resolved):
        if col is None:
            out.append(None)
            continue
        have = spark_type(col.type)
        if have != f.dataType:
            raise SchemaError(
                f"column '{f.name}' of {table.qualified_name} is {have.simpleString()}"
                f", but the schema asks for {f.dataType.simpleString()}"
            )
        out.append(col)
    return tuple(out)


def filter_column(f) -> str | None:
    """The one column a pushed filter is on (through ``Not``), or None (a nested field)."""
    while isinstance(f, ds.Not):
        f = f.child
    attr: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    return attr[0] if len(attr) == 1 else None


#: Metadata keys on a schema's first field carrying the table's size to the JVM provider
#: (``native/.../TableStatistics.scala``, which removes them), for Spark's join planning.
TABLE_BYTES_KEY = protocol.TABLE_BYTES_KEY
TABLE_ROWS_KEY = protocol.TABLE_ROWS_KEY


def with_table_statistics(
    schema: StructType, table: Table, partitions: Sequence[Partition] = ()
) -> StructType:
    """``schema`` with the table's ``totalSize``/``numRows`` in its first field's metadata: an
    unpartitioned table's own, a partitioned table's summed over ``partitions`` (its
    partitions, read through the metastore cache, which planning reads next anyway).

    They are an estimate for Spark's join planning only (which side to broadcast), never for
    what a scan returns; without them (a partitioned table with a partition that has no
    ``totalSize``), Spark assumes the table is too big to broadcast, as it would be without
    raptorx_py's statistics.
    """
    if not schema.fields:
        return schema
    if table.partition_keys:
        size = _summed(p.parameters.get(TOTAL_SIZE_PARAM) for p in partitions)
        rows = _summed(p.parameters.get(NUM_ROWS_PARAM) for p in partitions)
        if not partitions:
            size = rows = None  # no partition read yet: unknown, not empty
    else:
        size = _summed([table.parameters.get(TOTAL_SIZE_PARAM)])
        rows = _summed([table.parameters.get(NUM_ROWS_PARAM)])
    if size is None:
        return schema
    first = schema.fields[0]
    meta = {**(first.metadata or {}), TABLE_BYTES_KEY: size}
    if rows is not None:
        meta[TABLE_ROWS_KEY] = rows
    return StructType(
        [StructField(first.name, first.dataType, first.nullable, meta), *schema.fields[1:]]
    )


def _summed(values: Iterable[str | None]) -> int | None:
    """The sum of counts stored as metastore parameters; None if any is missing or not a
    count."""
    total = 0
    for value in values:
        if value is None or not value.isdigit():
            return None
        total += int(value)
    return total


#: Metadata keys on a schema's first field carrying what the JVM provider must know of the
#: Python reader (``native/.../SourceHints.scala``, which removes them),
#: and what the Spark catalog shows of the table (``TableDescription``, which removes it).
EXACT_FILTER_COLUMNS_KEY = protocol.EXACT_FILTER_COLUMNS_KEY
AGGREGATION_PUSHDOWN_KEY = protocol.AGGREGATION_PUSHDOWN_KEY
AGGREGATION_KEYS_KEY = protocol.AGGREGATION_KEYS_KEY
TABLE_DESCRIPTION_KEY = protocol.TABLE_DESCRIPTION_KEY


def with_source_hints(schema: StructType, table: Table, settings: Settings) -> StructType:
    """``schema`` with the columns whose filters the reader evaluates exactly (the rule of
    ``predicates.is_exact``, so the provider reports exactly those filters to Spark as
    handled), whether aggregation pushdown is on and which columns it may group by
    (``group_keys``), and the table's description for the Spark
    catalog (its partition keys, type and location: ``DESCRIBE``, ``INSERT``), in its first
    field's metadata."""
    if not schema.fields:
        return schema
    types = {c.name: c.type for c in table.all_columns}
    keys = {k.name for k in table.partition_keys}
    exact = [f.name for f in schema.fields if preds.is_exact(preds.IsNotNull(f.name), types, keys)]
    first = schema.fields[0]
    meta = {
        **(first.metadata or {}),
        EXACT_FILTER_COLUMNS_KEY: exact,
        AGGREGATION_PUSHDOWN_KEY: bool(settings.aggregation_pushdown_enabled),
        TABLE_DESCRIPTION_KEY: json.dumps(
            {
                "partition_keys": [k.name for k in table.partition_keys],
                "table_type": table.table_type,
                "location": table.location,
            }
        ),
    }
    allowed = group_keys(schema, keys, settings.parquet_reader)
    if allowed is not None:
        meta[AGGREGATION_KEYS_KEY] = allowed
    return StructType(
        [StructField(first.name, first.dataType, first.nullable, meta), *schema.fields[1:]]
    )


def record_scan(table: Table, columns) -> None:
    """Count one planned scan of ``table`` and each column it reads, so that tests and the
    benchmark can see exactly which columns Spark asked for (``scan.planned.<db.table>``,
    ``scan.column.<db.table>.<column>``)."""
    counters.add(f"scan.planned.{table.qualified_name}")
    for c in columns:
        counters.add(f"scan.column.{table.qualified_name}.{c.name}")


#: Spark types whose values repeat within a split (codes, flags, days): group keys a split's
#: partial aggregation folds into few rows.
_FEW_VALUED_TYPES = ("string", "boolean", "date")


def group_keys(schema, partition_keys: Iterable[str], reader: str) -> list[str] | None:
    """The columns of ``schema`` a pushed aggregation may group by when ``reader``
    (``hive.parquet.reader``) reads the splits; None: any column.

    A pushed aggregation is folded per split: in the executor's JVM over Spark's reader
    (``SplitAggregation``), or by the Python reader under PYTHON, where it always pays (the
    split's rows never cross into the JVM). Under AUTO and SPARK the fold pays over Spark's own
    aggregation only when each split folds into few groups: no key at all (a global aggregate),
    or keys that repeat within a split (partition keys, one value per split; strings, booleans,
    dates: codes, flags, days). A numeric key is most often an identifier (an order or a part
    key) whose values stay distinct within a split, so its groups are left to Spark's own
    aggregation. The planner cannot count a split's groups before reading it: the rule goes by
    type, and ``hive.parquet.reader=PYTHON`` pushes every aggregation it can.
    """
    if reader == "PYTHON":
        return None
    keys = set(partition_keys)
    return [
        f.name
        for f in schema.fields
        if f.name in keys or f.dataType.typeName() in _FEW_VALUED_TYPES
    ]
