"""The rows of partitions and statistics: the one way partitions are written to the metastore.

Every write of partitions (``Metastore.create_table`` with partitions, so table
registration; ``Metastore.add_partitions``; ``Metastore.alter_partition``) goes through
``insert_partitions`` / ``insert_partition_details``, which send one ``executemany`` per
metadata table, so adding N partitions costs a fixed number of statements (at most six)
whatever N is, instead of four per partition. They run inside the caller's write transaction
and append no event: the caller records the one event of its change.

Statistics are stored as one LOW/HIGH text pair in ``hive.column_types``' canonical form
(``encode_stats``), for partitions and unpartitioned tables alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raptorx_py.errors import AlreadyExistsError, MetastoreError
from raptorx_py.hive.column_types import encode_value
from raptorx_py.hive.model import ColumnStats, Partition, Table
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.hive.table_parameters import WRITE_ID_PARAM
from raptorx_py.metastore.sql_session import SqlSession

#: How many names of clashing partitions an error lists.
_CLASHES_NAMED = 10


def check_partition_values(table: Table, values: Sequence[str | None]) -> None:
    """``MetastoreError`` unless ``values`` has one value per partition key of ``table``."""
    if len(values) != len(table.partition_keys):
        raise MetastoreError(
            f"partition {tuple(values)} of {table.qualified_name} has {len(values)} values "
            f"for {len(table.partition_keys)} partition keys"
        )


def encode_stats(stats: ColumnStats, hive_type: str) -> tuple[int | None, str | None, str | None]:
    """``(NUM_NULLS, LOW_VALUE, HIGH_VALUE)`` as stored in PART_COL_STATS and TAB_COL_STATS."""
    return (
        stats.num_nulls,
        None if stats.low is None else encode_value(stats.low, hive_type),
        None if stats.high is None else encode_value(stats.high, hive_type),
    )


def stats_rows(
    owner_id: int, table: Table, stats: Mapping[str, ColumnStats], now: int
) -> list[tuple[Any, ...]]:
    """The rows of ``stats`` (columns of ``table``) for PART_COL_STATS or TAB_COL_STATS:
    ``(owner id, column, type, NUM_NULLS, LOW_VALUE, HIGH_VALUE, LAST_ANALYZED)``."""
    types = {c.name: c.type for c in table.columns}
    return [
        (owner_id, name, types[name], *encode_stats(s, types[name]), now)
        for name, s in stats.items()
    ]


def insert_partitions(
    sql: SqlSession,
    table: Table,
    partitions: Sequence[Partition],
    now: int,
    write_id: int | None = None,
) -> list[Partition]:
    """Inside a write transaction: insert ``partitions`` of the stored ``table`` (with its
    id) with their key values, parameters (plus ``writeId`` when ``write_id`` is given) and
    statistics, in at most six statements. Checks first, so a failure inserts nothing: one
    value per partition key, no name twice, no name the table already has
    (``AlreadyExistsError``). Returns the partitions as stored (with their ids and the
    ``writeId`` parameter), in the order given, without reading them back.
    """
    if not partitions:
        return []
    for p in partitions:
        check_partition_values(table, p.values)
    names = [partition_name(table.partition_keys, p.values) for p in partitions]
    if len(set(names)) != len(names):
        raise MetastoreError(
            f"the partitions to add to {table.qualified_name} repeat a partition name"
        )
    existing = {
        n for (n,) in sql.execute("SELECT PART_NAME FROM PARTITIONS WHERE TBL_ID = ?", (table.id,))
    }
    clash = [n for n in names if n in existing]
    if clash:
        more = f" and {len(clash) - _CLASHES_NAMED} more" if len(clash) > _CLASHES_NAMED else ""
        raise AlreadyExistsError(
            f"partition(s) {', '.join(clash[:_CLASHES_NAMED])}{more} of "
            f"{table.qualified_name} already exist"
        )
    sql.executemany(
        "INSERT INTO PARTITIONS (TBL_ID, PART_NAME, LOCATION, CREATE_TIME) VALUES (?, ?, ?, ?)",
        [(table.id, n, p.location, now) for n, p in zip(names, partitions)],
    )
    # The ids the database generated, by name: the rows of this table not there before (the
    # write transaction excludes every other writer).
    ids = {
        n: pid
        for pid, n in sql.execute(
            "SELECT PART_ID, PART_NAME FROM PARTITIONS WHERE TBL_ID = ?", (table.id,)
        )
        if n not in existing
    }
    rows = [(ids[n], p) for n, p in zip(names, partitions)]
    sql.executemany(
        "INSERT INTO PARTITION_KEY_VALS (PART_ID, PART_KEY_VAL, INTEGER_IDX) VALUES (?, ?, ?)",
        [(part_id, v, i) for part_id, p in rows for i, v in enumerate(p.values)],
    )
    insert_partition_details(sql, table, rows, now, write_id)
    return [
        Partition(
            tuple(p.values),
            p.location,
            stored_parameters(p, write_id),
            dict(p.stats),
            part_id,
            own_format(table, p),
        )
        for part_id, p in rows
    ]


def own_format(table: Table, partition: Partition) -> str | None:
    """The format ``partition`` keeps of its own: None when it is its table's."""
    fmt = partition.storage_format
    return None if fmt is None or fmt == table.storage_format else fmt


def stored_parameters(partition: Partition, write_id: int | None) -> dict[str, str]:
    """The parameters stored for ``partition``: its own, plus ``writeId`` under a write id."""
    values = dict(partition.parameters)
    if write_id is not None:
        values[WRITE_ID_PARAM] = str(write_id)
    return values


def insert_partition_details(
    sql: SqlSession,
    table: Table,
    rows: Sequence[tuple[int, Partition]],
    now: int,
    write_id: int | None = None,
) -> None:
    """Inside a write transaction: the parameters (plus ``writeId``) and statistics of the
    partitions ``(part_id, partition)``, and the format of each partition whose files are
    not in the table's (PARTITION_FORMATS), in at most three statements."""
    params = [
        (part_id, k, v) for part_id, p in rows for k, v in stored_parameters(p, write_id).items()
    ]
    if params:
        sql.executemany(
            "INSERT INTO PARTITION_PARAMS (PART_ID, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?)",
            params,
        )
    formats = [(part_id, fmt.lower()) for part_id, p in rows if (fmt := own_format(table, p))]
    if formats:
        sql.executemany(
            "INSERT INTO PARTITION_FORMATS (PART_ID, INPUT_FORMAT) VALUES (?, ?)", formats
        )
    stats = [row for part_id, p in rows for row in stats_rows(part_id, table, p.stats, now)]
    if stats:
        sql.executemany(
            "INSERT INTO PART_COL_STATS (PART_ID, COLUMN_NAME, COLUMN_TYPE, NUM_NULLS, "
            "LOW_VALUE, HIGH_VALUE, LAST_ANALYZED) VALUES (?, ?, ?, ?, ?, ?, ?)",
            stats,
        )
