"""A read's column names resolved against the table's columns, as Spark resolves them.

The names a read gives (the ``columns`` option, a user-given schema, the columns of filters
Spark pushes) are matched to the table's columns case-insensitively, unless the session sets
``spark.sql.caseSensitive=true``; then only the exact spelling matches. The Python worker has
no SparkSession, so the setting travels as the read option ``raptorx.case_sensitive``: the JVM
provider sets it from the session's ``SQLConf`` when the read is created (``load()``, or the
first scan of a user-given schema); without the jar, ``register(spark)`` carries the setting
the session had then (a later change needs ``register`` again).

What a name resolves to, and what the DataFrame calls it:

- ``columns``: a projection, like ``df.select("I")``: the column carries the table's spelling.
- a user-given schema: like Spark's Parquet reader (``spark.read.schema("I int").parquet``),
  the column carries the user's spelling; the reader reads the table's column and renames its
  batches (``output_names``).

A name that matches no column (in the ``columns`` option or a filter), or,
case-insensitively, two columns and neither exactly (``ab`` in a table of ``Ab`` and ``aB``),
or a column asked for twice, is one ``SchemaError`` naming the name and the table's columns.
A user-given schema's column that the table does not have is read as nulls, as Spark's own
Parquet reader reads a column its files lack (``spark.read.schema("x bigint").parquet``), in
every action alike (``count()``, ``collect()``, a filter on it, which Spark evaluates):
``resolve_schema_columns`` gives ``None`` for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from raptorx_py.errors import SchemaError
from raptorx_py.hive.model import Column, Table
from raptorx_py.jvm_contract import protocol

#: The read option carrying the session's ``spark.sql.caseSensitive`` ("true"/"false").
CASE_SENSITIVE_OPTION = protocol.CASE_SENSITIVE_OPTION


def parse_case_sensitive(value: str | None, default: bool = False) -> bool:
    """The ``raptorx.case_sensitive`` option's value; ``default`` when it is not set."""
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise SchemaError(f"option {CASE_SENSITIVE_OPTION} must be true or false, not {value!r}")
    return text == "true"


def _listing(table: Table) -> str:
    return ", ".join(c.name for c in table.all_columns)


def resolve_column(table: Table, name: str, case_sensitive: bool = False) -> Column:
    """The column of ``table`` that ``name`` names; the error lists the table's columns.

    The exact spelling wins: a table may hold ``a`` and ``A`` (Parquet allows both), and the
    schema the provider derives from it names each exactly."""
    col = find_column(table, name, case_sensitive)
    if col is not None:
        return col
    hint = ""
    if case_sensitive and any(c.name.lower() == name.lower() for c in table.all_columns):
        hint = " (spark.sql.caseSensitive is true, and names differ in case)"
    raise SchemaError(
        f"column '{name}' does not exist in {table.qualified_name}{hint}. "
        f"Columns: {_listing(table)}"
    )


def find_column(table: Table, name: str, case_sensitive: bool = False) -> Column | None:
    """``resolve_column``, with None for a name that matches no column (an ambiguous one is
    still an error)."""
    found = [c for c in table.all_columns if c.name == name]
    if not found and not case_sensitive:
        folded = name.lower()
        found = [c for c in table.all_columns if c.name.lower() == folded]
    if len(found) == 1:
        return found[0]
    if found:
        raise SchemaError(
            f"column '{name}' is ambiguous in {table.qualified_name}: it matches "
            f"{', '.join(repr(c.name) for c in found)} (spark.sql.caseSensitive is false). "
            f"Columns: {_listing(table)}"
        )
    return None


def resolve_columns(
    table: Table, names: Iterable[str], case_sensitive: bool, asked_by: str
) -> tuple[Column, ...]:
    """The columns ``names`` name, in their order; a column named twice (in any spelling the
    setting matches) is an error saying where (``asked_by``: "the columns option", ...)."""
    return tuple(c for c in _resolve(table, names, case_sensitive, asked_by, False) if c)


def resolve_schema_columns(
    table: Table, names: Iterable[str], case_sensitive: bool, asked_by: str
) -> tuple[Column | None, ...]:
    """``resolve_columns`` for a user-given schema: None for a name the table lacks (read as
    nulls)."""
    return _resolve(table, names, case_sensitive, asked_by, True)


def _resolve(
    table: Table,
    names: Iterable[str],
    case_sensitive: bool,
    asked_by: str,
    missing_as_none: bool,
) -> tuple[Column | None, ...]:
    out: list[Column | None] = []
    spelled: dict[str, str] = {}
    for name in names:
        if missing_as_none:
            found = find_column(table, name, case_sensitive)
            if found is None:
                out.append(None)
                continue
            col = found
        else:
            col = resolve_column(table, name, case_sensitive)
        if col.name in spelled:
            first = spelled[col.name]
            as_ = f"'{first}' and '{name}'" if first != name else f"'{name}' twice"
            raise SchemaError(
                f"column '{col.name}' of {table.qualified_name} is asked for twice ({as_}) "
                f"by {asked_by}. Columns: {_listing(table)}"
            )
        spelled[col.name] = name
        out.append(col)
    return tuple(out)


def requested_names(requested: str) -> list[str]:
    """The names of a ``columns`` option value (comma-separated); an empty name is an error."""
    names = [n.strip() for n in requested.split(",")]
    if any(not n for n in names):
        raise SchemaError(f"option columns has an empty column name: {requested!r}")
    return names


def output_names(columns: Iterable[Column], asked: Iterable[str]) -> list[str] | None:
    """The names the reader's batches must carry when they differ from the table's (a
    user-given schema in another spelling), else None (nothing to rename)."""
    have, want = [c.name for c in columns], list(asked)
    return None if have == want else want


def filter_with_table_names(f, names: dict[str, str]):
    """A pushed ``pyspark.sql.datasource`` filter with its column in the table's spelling
    (``names``: the read's spelling -> the table's); ``f`` itself when nothing changes."""
    if not names:
        return f
    child = getattr(f, "child", None)
    if child is not None:
        renamed = filter_with_table_names(child, names)
        return f if renamed is child else dataclasses.replace(f, child=renamed)
    attr = getattr(f, "attribute", None)
    if not attr or len(attr) != 1 or attr[0] not in names:
        return f
    return dataclasses.replace(f, attribute=(names[attr[0]],))
