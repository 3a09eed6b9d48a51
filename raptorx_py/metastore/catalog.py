"""What a metastore backend offers the layers above it: the catalogue interface and the values
it answers in.

``MetastoreCatalog`` is the contract every backend implements: ``store.Metastore`` (SQLite or
PostgreSQL, ``hive.metastore.url``; transactions, write ids and locks besides) and
``thrift_store.ThriftMetastore`` (a Hive Metastore over Thrift, ``hive.metastore.uri``).
The versioned cache (``cached_store``), the planner, registration, the TPC-H loader and the
CLI's table commands use only these methods, so they work on either;
``configured.open_catalog`` returns the configured one (mypy checks that both conform).

This module is the bottom of the metastore package: the backends, the cache and everything
else in it import from here, and it imports nothing of theirs. So the values that cross the
interface live here too: ``TableSnapshot`` (what ``table_snapshots`` answers per table),
``QuerySnapshot`` (a query's snapshot, which the reads take) with ``check_snapshot_table``,
and ``NotificationEvent`` (one event of the log).

Contract of the reads: ``get_table``/``list_partitions`` return ``hive.model``'s values, a
missing object is ``NoSuchObjectError`` naming what exists; ``table_snapshots`` gives each
table's id, type and ValidWriteIdList (``None`` without write ids);
``current_notification_id``/``notifications_after`` read the notification log;
``snapshots_from_log`` says whether a query's snapshot can be answered by polling that log
(a backend without write ids) instead of asking per table. Writes raise ``MetastoreError``
for what the backend cannot do (write ids over Thrift), before changing anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, Self

from raptorx_py.errors import MetastoreError
from raptorx_py.hive.model import Database, Partition, Table
from raptorx_py.hive.write_ids import ValidWriteIdList

__all__ = [
    "MetastoreCatalog",
    "NotificationEvent",
    "QuerySnapshot",
    "TableSnapshot",
    "check_snapshot_table",
]


@dataclass(frozen=True)
class NotificationEvent:
    """One event of a metastore's notification log (a row of NOTIFICATION_LOG, or one of a
    Hive Metastore's ``NotificationEvent``); ``message`` is the decoded JSON."""

    event_id: int
    event_time: int  # seconds since the epoch
    event_type: str
    db_name: str | None
    table_name: str | None
    txn_id: int | None
    write_id: int | None
    message: dict[str, Any]


@dataclass(frozen=True)
class TableSnapshot:
    """What a query fetches per table, uncached: the table's id and type, and for a managed
    table its ``ValidWriteIdList`` (``None`` for an external table, which has no write ids)."""

    name: str  # "db.table", as requested
    table_id: int
    table_type: str
    write_ids: ValidWriteIdList | None


@dataclass(frozen=True)
class QuerySnapshot(Mapping):
    """The snapshot one query reads under: ``{"db.table": TableSnapshot}``. Plain values, so it
    can be pickled along with a reader. ``txn_id``: the transaction it was taken for (its own
    writes count as committed), ``None`` for a reader."""

    tables: Mapping[str, TableSnapshot]
    txn_id: int | None = None

    def __getitem__(self, name: str) -> TableSnapshot:
        return self.tables[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    def table(self, name: str) -> TableSnapshot:
        """The snapshot of ``name``; a ``MetastoreError`` naming the covered tables if the
        query did not take one for it."""
        try:
            return self.tables[name]
        except KeyError:
            raise MetastoreError(
                f"the query's snapshot does not cover {name} (it covers "
                f"{', '.join(sorted(self.tables)) or 'no table'}): take the snapshot of every "
                f"table the query reads"
            ) from None


def check_snapshot_table(
    table: Table, snapshot: QuerySnapshot | None, key: str | None = None
) -> Table:
    """``table``, if it is the table ``snapshot`` (a ``QuerySnapshot``, or None: no check) was
    taken of under ``key`` (default: its qualified name); a table dropped and recreated since
    has another id, and reading it under that snapshot would mix two tables."""
    if snapshot is not None:
        key = key or table.qualified_name
        taken = snapshot.table(key)
        if taken.table_id != table.id:
            raise MetastoreError(
                f"table {key} was dropped and recreated after the query's snapshot (table id "
                f"{taken.table_id} in the snapshot, {table.id} now): run the query again"
            )
    return table


class MetastoreCatalog(Protocol):
    """The catalogue face of a metastore backend (see the module docstring). Both backends
    (``store.Metastore``, ``thrift_store.ThriftMetastore``) subclass it, so mypy holds each
    method of theirs to the signature here and they share what is written once here (being a
    context manager that closes)."""

    snapshots_from_log: bool

    def describe(self) -> str: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def atomically(self) -> AbstractContextManager[None]: ...

    # -- reads --------------------------------------------------------------------------
    def list_databases(self) -> list[str]: ...

    def get_database(self, name: str) -> Database: ...

    def list_tables(self, database: str) -> list[str]: ...

    def get_table(self, database: str, name: str) -> Table: ...

    def list_partitions(
        self, table: Table, snapshot: QuerySnapshot | None = None
    ) -> list[Partition]: ...

    def table_snapshots(
        self, names: Iterable[str], txn_id: int | None = None
    ) -> dict[str, TableSnapshot]: ...

    def get_valid_write_ids(
        self, names: Iterable[str], txn_id: int | None = None
    ) -> dict[str, ValidWriteIdList | None]: ...

    def partition_counts(self) -> dict[int, int]: ...

    # -- the notification log -----------------------------------------------------------
    def current_notification_id(self) -> int: ...

    def notifications_after(
        self, after_event_id: int = 0, limit: int | None = None
    ) -> list[NotificationEvent]: ...

    # -- writes -------------------------------------------------------------------------
    def create_database(
        self, name: str, location: str | None = None, if_not_exists: bool = True
    ) -> Database: ...

    def create_table(
        self,
        table: Table,
        partitions: Sequence[Partition] = (),
        *,
        replace: bool = False,
        write_id: int | None = None,
    ) -> Table: ...

    def add_partitions(
        self, table: Table, partitions: Sequence[Partition], write_id: int | None = None
    ) -> list[Partition]: ...

    def alter_partition(
        self, table: Table, partition: Partition, write_id: int | None = None
    ) -> Partition: ...

    def alter_table_parameters(
        self,
        database: str,
        name: str,
        parameters: dict[str, str | None],
        write_id: int | None = None,
    ) -> Table: ...

    def set_partition_parameters(
        self, table: Table, values: Sequence[str | None], params: dict[str, str | None]
    ) -> None: ...

    def drop_table(self, database: str, name: str) -> None: ...

    def drop_partitions(
        self, table: Table, values: Sequence[Sequence[str | None]], write_id: int | None = None
    ) -> None: ...
