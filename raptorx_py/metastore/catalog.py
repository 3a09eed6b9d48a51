"""What a metastore backend offers the layers above it: the catalogue interface.

``MetastoreCatalog`` is the contract both backends implement: ``store.Metastore`` (SQLite or
PostgreSQL, ``hive.metastore.url``; transactions, write ids and locks besides) and
``thrift_store.ThriftMetastore`` (a Hive Metastore over Thrift, ``hive.metastore.uri``).
The versioned cache (``cached_store``), the planner, registration, the TPC-H loader and the
CLI's table commands use only these methods, so they work on either; ``store.open_catalog``
returns the configured one (mypy checks that both conform).

Contract of the reads: ``get_table``/``list_partitions`` return the model's values
(``model.py``), a missing object is ``NoSuchObjectError`` naming what exists;
``table_snapshots`` gives each table's id, type and ValidWriteIdList (``None`` without write
ids); ``current_notification_id``/``notifications_after`` read the notification log;
``snapshots_from_log`` says whether a query's snapshot can be answered by polling that log
(a backend without write ids) instead of asking per table. Writes raise ``MetastoreError``
for what the backend cannot do (write ids over Thrift), before changing anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, Self

if TYPE_CHECKING:
    from raptorx_py.hive.model import Database, Partition, Table
    from raptorx_py.hive.write_ids import ValidWriteIdList
    from raptorx_py.metastore.notifications import NotificationEvent
    from raptorx_py.metastore.transactions import TableSnapshot

__all__ = ["MetastoreCatalog"]


class MetastoreCatalog(Protocol):
    """The catalogue face of a metastore backend (see the module docstring)."""

    snapshots_from_log: bool

    def describe(self) -> str: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: Any) -> None: ...

    def atomically(self) -> AbstractContextManager[None]: ...

    # -- reads --------------------------------------------------------------------------
    def list_databases(self) -> list[str]: ...

    def get_database(self, name: str) -> Database: ...

    def list_tables(self, database: str) -> list[str]: ...

    def get_table(self, database: str, name: str) -> Table: ...

    def list_partitions(self, table: Table, snapshot: Any = None) -> list[Partition]: ...

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
