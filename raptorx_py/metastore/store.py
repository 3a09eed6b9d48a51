"""The metastore: databases, tables, partitions and statistics in a SQL database.

Contract:
- Every change is one database transaction: it commits whole or rolls back whole on any
  error, so a failed registration leaves the metastore exactly as it was.
- Every change appends its notification-log event(s) in that same transaction
  (``notifications.py``): the log is the total order of everything that happened.
- All SQL is parameterised; names never reach SQL text.
- Every statement sent to the database (through ``sql_session.SqlSession``) counts one
  ``metastore.round_trips``, except those of
  a thread inside ``counting_as(name)`` (the metastore cache's background refresher counts
  ``metastore.refresh_round_trips``), so a query's count is not blurred by a timer.
- The SQLite backend is safe across the processes of one machine (WAL, busy timeout,
  ``BEGIN IMMEDIATE`` for writes).
- Opening reads without the write lock: the schema version is read in one plain SELECT (a WAL
  reader never waits for a writer), and the write lock is taken only when the schema is
  missing or older than this code's. So ``raptorx table show`` or a new application's read
  never waits behind a writer's transaction. A write that waits for the lock longer than the
  busy timeout fails saying what it waited for.
- A missing SQLite file is created only by an opener that creates things
  (``create=True``: ``Metastore(...)`` by default, ``open_metastore(..., create=True)`` for
  the CLI's register, TPC-H loads and Spark writes); every reader fails with
  ``MetastoreNotFoundError`` naming the path, so a typo never reads an empty metastore. A
  backend is a small object (see ``SqliteBackend``) so a
  PostgreSQL backend can be added without touching the queries.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import urlparse

from raptorx_py.config.tiers import MetastoreConnectionSettings
from raptorx_py.errors import (
    AlreadyExistsError,
    MetastoreError,
    MetastoreNotFoundError,
    NoSuchObjectError,
)
from raptorx_py.hive.column_types import decode_value
from raptorx_py.hive.model import (
    Column,
    ColumnStats,
    Database,
    Partition,
    Table,
)
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.hive.storage_formats import FORMATS
from raptorx_py.hive.write_ids import ValidWriteIdList
from raptorx_py.metastore import schema, transactions
from raptorx_py.metastore.catalog import (
    MetastoreCatalog,
    NotificationEvent,
    QuerySnapshot,
    TableSnapshot,
    check_snapshot_table,
)
from raptorx_py.metastore.notifications import (
    append_event,
    append_partition_event,
    current_notification_id,
    get_notifications,
    partition_message,
    table_message,
)
from raptorx_py.metastore.partition_rows import (
    check_partition_values,
    insert_partition_details,
    insert_partitions,
    own_format,
    stats_rows,
)
from raptorx_py.metastore.postgres import PostgresBackend
from raptorx_py.metastore.sql_session import Backend, SqlSession
from raptorx_py.metastore.transactions import check_write_id
from raptorx_py.names import check_name
from raptorx_py.sqlite_wal import connect_wal

__all__ = [
    "Metastore",
    "SqliteBackend",
    "backend_for_url",
    "open_metastore",
]


def stored_format_of(stored: object, what: str) -> str:
    """The format a stored INPUT_FORMAT names (PARQUET or ORC); ``MetastoreError`` naming
    ``what`` for another."""
    storage_format = str(stored).upper()
    if storage_format not in FORMATS:
        raise MetastoreError(
            f"{what} is stored as {stored!r}: tiered_hive reads {' and '.join(FORMATS)} tables"
        )
    return storage_format


class SqliteBackend:
    """An SQLite file, created with its directory on first use when ``create`` (else a
    missing file is ``MetastoreNotFoundError``). ``busy_timeout``: seconds a statement waits
    for another connection's lock before failing (tests shorten it)."""

    id_type = "INTEGER PRIMARY KEY AUTOINCREMENT"
    #: Starts a write transaction that holds the write lock from its first statement, so two
    #: writers serialise instead of failing on upgrade.
    begin_write = "BEGIN IMMEDIATE"
    #: What the driver raises; the store turns these into ``MetastoreError``.
    error_types: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, path: str, *, create: bool = True, busy_timeout: float = 60.0):
        self.path = os.path.abspath(os.path.expanduser(path))
        self.create = create
        self.busy_timeout = busy_timeout

    def connect(self) -> sqlite3.Connection:
        if not self.create and not os.path.exists(self.path):
            raise MetastoreNotFoundError(
                f"no SQLite metastore at {self.path} (hive.metastore.url={self.describe()}): "
                f"a read never creates one; check the path, or create the metastore with a "
                f"command that creates tables (raptorx table register, raptorx tpch load, a "
                f"Spark write)"
            )
        try:
            if self.create:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
            ms = int(self.busy_timeout * 1000)
            conn = connect_wal(
                self.path,
                timeout=self.busy_timeout,
                check_same_thread=False,
                pragmas=("PRAGMA foreign_keys=ON", f"PRAGMA busy_timeout={ms}"),
            )
        except (sqlite3.Error, OSError) as e:
            raise MetastoreError(f"cannot open the SQLite metastore at {self.path}: {e}") from e
        return conn

    def describe(self) -> str:
        return f"sqlite:///{self.path}"

    def lock_wait_error(self, error: BaseException) -> str | None:
        """What a write that gave up waiting for the write lock was waiting for (None: the
        error is something else)."""
        if "locked" not in str(error) and "busy" not in str(error):
            return None
        return (
            f"gave up after waiting {self.busy_timeout:g}s for the write lock of the "
            f"SQLite metastore {self.path}: another connection (a writer's commit, a "
            f"lock request or an upgrade) held a write transaction that long"
        )


def backend_for_url(url: str, *, create: bool = True) -> Backend:
    """The backend for a ``hive.metastore.url``; ``create``: a missing SQLite file may be
    created (see the module docstring)."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        # sqlite:///relative/or/~/path and sqlite:////absolute/path
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else parsed.path
        if not path:
            raise MetastoreError(f"metastore URL '{url}' names no file: use sqlite:///<path>")
        return SqliteBackend(path, create=create)
    if parsed.scheme in ("postgresql", "postgres"):
        # The driver itself loads only now (postgres._psycopg): SQLite users never load it.
        return PostgresBackend.from_url(url)
    raise MetastoreError(
        f"unsupported metastore URL '{url}': expected sqlite:///<path> or "
        f"postgresql://user:password@host:port/dbname"
    )


class Metastore(MetastoreCatalog):
    """Databases, tables, partitions and statistics, and the transaction API (open, commit,
    abort, heartbeat, write ids, snapshots: the methods here are the public face of
    ``transactions``). The notification log and locks are read and taken through their
    modules' functions, which take a ``Metastore`` (``notifications.get_notifications(ms)``,
    ``locks.try_lock(ms, ...)``). One connection per instance: ``sql``, the ``SqlSession``
    every module of the metastore sends its statements through.

    ``clock`` (seconds since the epoch) stamps transactions, locks and events, and decides
    their expiry: tests inject a fake one instead of sleeping. ``txn_timeout``
    (``hive.txn.timeout``) is recorded with every transaction this client opens and every
    lock it takes outside a transaction, which then expires after that many seconds without
    a heartbeat whoever runs the expiry.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        clock: Callable[[], float] = time.time,
        txn_timeout: float = 300.0,
    ):
        self.backend = backend
        self.txn_timeout = txn_timeout
        self.sql = SqlSession(backend, clock)
        self._ensure_schema()

    # -- plumbing ---------------------------------------------------------------------
    def close(self) -> None:
        self.sql.close()

    def atomically(self) -> AbstractContextManager[None]:
        """``with metastore.atomically(): ...``: every change inside is ONE database
        transaction, committed at the end or rolled back whole when an error leaves the
        block (e.g. a managed write's partitions and the commit of its transaction, so a
        process that dies between them leaves neither). Holds this connection's lock
        throughout; an error caught inside the block does not undo the steps before it."""
        return self.sql.transaction()

    def _schema_version(self) -> int | None:
        """The stored schema version, read without any lock (None: no schema yet)."""
        with self.sql.lock:
            try:
                return self.sql.execute("SELECT MAX(SCHEMA_VERSION) FROM VERSION").fetchone()[0]
            except MetastoreError:
                return None  # no VERSION table: a new database

    def _ensure_schema(self) -> None:
        version = self._schema_version()
        if version == schema.SCHEMA_VERSION:
            return  # the common case: no write lock, so an open never waits for a writer
        if version is not None and version > schema.SCHEMA_VERSION:
            raise MetastoreError(
                f"metastore {self.backend.describe()} has schema version {version}, newer "
                f"than this raptorx_py understands ({schema.SCHEMA_VERSION})"
            )
        with self.sql.transaction():
            for ddl in schema.DDL:
                self.sql.execute(ddl.format(id=self.backend.id_type))
            for seed in schema.SEED:
                self.sql.execute(seed)
            row = self.sql.execute("SELECT MAX(SCHEMA_VERSION) FROM VERSION").fetchone()
            if row[0] is None:
                self.sql.execute(
                    "INSERT INTO VERSION (VER_ID, SCHEMA_VERSION, VERSION_COMMENT) "
                    "VALUES (1, ?, 'raptorx_py metastore')",
                    (schema.SCHEMA_VERSION,),
                )
            elif row[0] > schema.SCHEMA_VERSION:
                raise MetastoreError(
                    f"metastore {self.backend.describe()} has schema version {row[0]}, newer "
                    f"than this raptorx_py understands ({schema.SCHEMA_VERSION})"
                )
            elif row[0] < schema.SCHEMA_VERSION:
                # Upgrade in place: a newer version only adds tables and seed rows, which
                # the statements above have just created.
                self.sql.execute(
                    "UPDATE VERSION SET SCHEMA_VERSION = ?, VERSION_COMMENT = ?",
                    (
                        schema.SCHEMA_VERSION,
                        f"raptorx_py metastore, upgraded from version {row[0]}",
                    ),
                )

    # -- transactions and write ids (see transactions.py) --------------------------------
    def open_transaction(
        self, user: str | None = None, host: str | None = None, agent_info: str | None = None
    ) -> int:
        """A new open transaction's id (user and host default to this process's)."""
        return transactions.open_transaction(self, user, host, agent_info)

    def commit_transaction(self, txn_id: int) -> None:
        transactions.commit_transaction(self, txn_id)

    def abort_transaction(self, txn_id: int) -> None:
        transactions.abort_transaction(self, txn_id)

    def heartbeat(self, txn_id: int | None = None, lock_id: int | None = None) -> None:
        transactions.heartbeat(self, txn_id, lock_id)

    def get_transaction(self, txn_id: int) -> transactions.TxnInfo:
        return transactions.get_transaction(self, txn_id)

    def expire_timed_out(self) -> list[int]:
        """Abort transactions (and drop locks) whose client stopped heartbeating; every
        transactional write does this anyway. Returns the aborted transaction ids."""
        with self.sql.transaction():
            return transactions.expire_timed_out(self)

    def allocate_write_id(self, txn_id: int, database: str, table: str) -> int:
        return transactions.allocate_write_id(self, txn_id, database, table)

    def get_valid_write_ids(
        self, names: Iterable[str], txn_id: int | None = None
    ) -> dict[str, ValidWriteIdList | None]:
        """``{"db.table": ValidWriteIdList}`` in one round trip (``None`` for an external
        table). With ``txn_id``, that transaction's own writes count as committed."""
        return {
            name: snap.write_ids
            for name, snap in transactions.get_table_snapshots(self, names, txn_id).items()
        }

    # -- what the versioned cache reads (the same methods on ThriftMetastore) ---------------
    #: A query's snapshot is one statement here (write ids included), so the cache asks.
    snapshots_from_log = False

    def table_snapshots(
        self, names: Iterable[str], txn_id: int | None = None
    ) -> dict[str, TableSnapshot]:
        """Id, type and ValidWriteIdList of each ``db.table`` (one round trip)."""
        return transactions.get_table_snapshots(self, names, txn_id)

    def current_notification_id(self) -> int:
        return current_notification_id(self)

    def notifications_after(
        self, after_event_id: int = 0, limit: int | None = None
    ) -> list[NotificationEvent]:
        return get_notifications(self, after_event_id, limit)

    def partition_counts(self) -> dict[int, int]:
        """``{table id: number of partitions}`` in one round trip."""
        with self.sql.lock:
            return dict(self.sql.execute("SELECT TBL_ID, COUNT(*) FROM PARTITIONS GROUP BY TBL_ID"))

    def describe(self) -> str:
        return self.backend.describe()

    # -- databases --------------------------------------------------------------------
    def create_database(
        self, name: str, location: str | None = None, if_not_exists: bool = True
    ) -> Database:
        name = check_name("database", name)
        with self.sql.transaction():
            row = self.sql.execute(
                "SELECT DB_ID, NAME, DB_LOCATION_URI FROM DBS WHERE NAME = ?", (name,)
            ).fetchone()
            if row is not None:
                if not if_not_exists:
                    raise AlreadyExistsError(f"database '{name}' already exists")
                return Database(row[0], row[1], row[2])
            db_id = self.sql.insert(
                "INSERT INTO DBS (NAME, DB_LOCATION_URI, CREATE_TIME) VALUES (?, ?, ?)",
                (name, location, int(time.time())),
                "DB_ID",
            )
            append_event(
                self, "CREATE_DATABASE", db=name, message={"dbId": db_id, "location": location}
            )
            return Database(db_id, name, location)

    def alter_database(self, name: str, location: str | None) -> Database:
        """Set the database's location."""
        with self.sql.transaction():
            db = self.get_database(name)
            self.sql.execute(
                "UPDATE DBS SET DB_LOCATION_URI = ? WHERE DB_ID = ?", (location, db.id)
            )
            append_event(
                self, "ALTER_DATABASE", db=name, message={"dbId": db.id, "location": location}
            )
        return Database(db.id, name, location)

    def drop_database(self, name: str, cascade: bool = False) -> None:
        """Drop an empty database, or with ``cascade`` its tables too (one DROP_TABLE event
        each, then DROP_DATABASE, as HMS does)."""
        with self.sql.transaction():
            db = self.get_database(name)
            tables = self.list_tables(name)
            if tables and not cascade:
                raise MetastoreError(
                    f"database '{name}' is not empty (tables: "
                    f"{', '.join(tables)}); drop them or use cascade"
                )
            for t in tables:
                self._drop_table(self.get_table(name, t))
            self.sql.execute("DELETE FROM DBS WHERE DB_ID = ?", (db.id,))
            append_event(self, "DROP_DATABASE", db=name, message={"dbId": db.id})

    def list_databases(self) -> list[str]:
        with self.sql.lock:
            return [r[0] for r in self.sql.execute("SELECT NAME FROM DBS ORDER BY NAME")]

    def get_database(self, name: str) -> Database:
        name = name.lower()  # names are case-insensitive (names.py)
        with self.sql.lock:
            row = self.sql.execute(
                "SELECT DB_ID, NAME, DB_LOCATION_URI FROM DBS WHERE NAME = ?", (name,)
            ).fetchone()
            if row is None:
                raise NoSuchObjectError("database", name, self.list_databases())
            return Database(*row)

    # -- tables -----------------------------------------------------------------------
    def list_tables(self, database: str) -> list[str]:
        with self.sql.lock:
            db = self.get_database(database)
            return [
                r[0]
                for r in self.sql.execute(
                    "SELECT TBL_NAME FROM TBLS WHERE DB_ID = ? ORDER BY TBL_NAME", (db.id,)
                )
            ]

    def get_table(self, database: str, name: str) -> Table:
        database, name = database.lower(), name.lower()
        with self.sql.lock:
            db = self.get_database(database)
            row = self.sql.execute(
                "SELECT TBL_ID, TBL_TYPE, LOCATION, INPUT_FORMAT FROM TBLS "
                "WHERE DB_ID = ? AND TBL_NAME = ?",
                (db.id, name),
            ).fetchone()
            if row is None:
                raise NoSuchObjectError(
                    "table",
                    f"{database}.{name}",
                    (f"{database}.{t}" for t in self.list_tables(database)),
                )
            tbl_id, tbl_type, location, stored_format = row
            storage_format = stored_format_of(
                stored_format, f"table {database}.{name} in {self.describe()}"
            )
            columns = self._columns(
                "SELECT COLUMN_NAME, TYPE_NAME FROM COLUMNS_V2 WHERE TBL_ID = ? "
                "ORDER BY INTEGER_IDX",
                tbl_id,
            )
            keys = self._columns(
                "SELECT PKEY_NAME, PKEY_TYPE FROM PARTITION_KEYS WHERE TBL_ID = ? "
                "ORDER BY INTEGER_IDX",
                tbl_id,
            )
            params = dict(
                self.sql.execute(
                    "SELECT PARAM_KEY, PARAM_VALUE FROM TABLE_PARAMS WHERE TBL_ID = ?", (tbl_id,)
                )
            )
            types = {c.name: c.type for c in columns}
            stats = {
                name: ColumnStats(
                    nulls,
                    decode_value(lo, types.get(name, ctype)),
                    decode_value(hi, types.get(name, ctype)),
                )
                for name, ctype, nulls, lo, hi in self.sql.execute(
                    "SELECT COLUMN_NAME, COLUMN_TYPE, NUM_NULLS, LOW_VALUE, HIGH_VALUE "
                    "FROM TAB_COL_STATS WHERE TBL_ID = ?",
                    (tbl_id,),
                )
            }
            return Table(
                database,
                name,
                tbl_type,
                location,
                columns,
                keys,
                params,
                stats,
                tbl_id,
                storage_format,
            )

    def _columns(self, query: str, tbl_id: int) -> tuple[Column, ...]:
        """The (name, type) rows of ``query`` for one table, in order, as columns."""
        return tuple(Column(n, t) for n, t in self.sql.execute(query, (tbl_id,)))

    def create_table(
        self,
        table: Table,
        partitions: Sequence[Partition] = (),
        *,
        replace: bool = False,
        write_id: int | None = None,
    ) -> Table:
        """Create ``table`` with its partitions and statistics in one transaction.

        With ``replace``, an existing table of that name is dropped in the same transaction,
        so readers see either the old table or the new one, never neither. Events:
        DROP_TABLE (when replacing), CREATE_TABLE, then ADD_PARTITION (when there are
        partitions). ``write_id``: see ``add_partitions``.
        """
        now = int(time.time())
        # The one naming rule (names.py): a name that could escape its directory never exists.
        table = dataclasses.replace(
            table,
            database=check_name("database", table.database),
            name=check_name("table", table.name),
        )
        with self.sql.transaction():
            db = self.get_database(table.database)
            existing = self.sql.execute(
                "SELECT TBL_ID FROM TBLS WHERE DB_ID = ? AND TBL_NAME = ?", (db.id, table.name)
            ).fetchone()
            if existing is not None:
                if not replace:
                    raise AlreadyExistsError(
                        f"table '{table.qualified_name}' already exists (to replace it: "
                        f"`raptorx table register --replace`, or replace=True)"
                    )
                self._drop_table(self.get_table(table.database, table.name))
            tbl_id = self.sql.insert(
                "INSERT INTO TBLS (DB_ID, TBL_NAME, TBL_TYPE, LOCATION, INPUT_FORMAT, "
                "CREATE_TIME) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    db.id,
                    table.name,
                    table.table_type,
                    table.location,
                    table.storage_format.lower(),
                    now,
                ),
                "TBL_ID",
            )
            self.sql.executemany(
                "INSERT INTO COLUMNS_V2 (TBL_ID, COLUMN_NAME, TYPE_NAME, INTEGER_IDX) "
                "VALUES (?, ?, ?, ?)",
                [(tbl_id, c.name, c.type, i) for i, c in enumerate(table.columns)],
            )
            self.sql.executemany(
                "INSERT INTO PARTITION_KEYS (TBL_ID, PKEY_NAME, PKEY_TYPE, INTEGER_IDX) "
                "VALUES (?, ?, ?, ?)",
                [(tbl_id, c.name, c.type, i) for i, c in enumerate(table.partition_keys)],
            )
            self.sql.executemany(
                "INSERT INTO TABLE_PARAMS (TBL_ID, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?)",
                [(tbl_id, k, v) for k, v in table.parameters.items()],
            )
            self.sql.executemany(
                "INSERT INTO TAB_COL_STATS (TBL_ID, COLUMN_NAME, COLUMN_TYPE, NUM_NULLS, "
                "LOW_VALUE, HIGH_VALUE, LAST_ANALYZED) VALUES (?, ?, ?, ?, ?, ?, ?)",
                stats_rows(tbl_id, table, table.stats, now),
            )
            created = dataclasses.replace(table, id=tbl_id)
            append_event(
                self,
                "CREATE_TABLE",
                db=table.database,
                table=table.name,
                message=table_message(created),
            )
            if partitions:
                self._add_partitions_with_event(created, partitions, now, write_id)
        return self.get_table(table.database, table.name)

    def alter_table_parameters(
        self,
        database: str,
        name: str,
        parameters: dict[str, str | None],
        write_id: int | None = None,
    ) -> Table:
        """Set table parameters (``None`` removes a key) in one transaction; an ALTER_TABLE
        event records the keys set. ``write_id``: as for ``add_partitions``."""
        with self.sql.transaction():
            table = self.get_table(database, name)
            txn_id = check_write_id(self, table, write_id)
            for key, value in parameters.items():
                self.sql.execute(
                    "DELETE FROM TABLE_PARAMS WHERE TBL_ID = ? AND PARAM_KEY = ?", (table.id, key)
                )
                if value is not None:
                    self.sql.execute(
                        "INSERT INTO TABLE_PARAMS (TBL_ID, PARAM_KEY, PARAM_VALUE) "
                        "VALUES (?, ?, ?)",
                        (table.id, key, value),
                    )
            append_event(
                self,
                "ALTER_TABLE",
                db=database,
                table=name,
                txn_id=txn_id,
                write_id=write_id,
                message=table_message(table, parameters=dict(parameters)),
            )
        return self.get_table(database, name)

    def drop_table(self, database: str, name: str) -> None:
        with self.sql.transaction():
            self._drop_table(self.get_table(database, name))

    def _drop_table(self, table: Table) -> None:
        """Inside a write transaction. Write ids are kept on purpose (see schema.py)."""
        self.sql.execute("DELETE FROM TBLS WHERE TBL_ID = ?", (table.id,))
        append_event(
            self, "DROP_TABLE", db=table.database, table=table.name, message=table_message(table)
        )

    # -- partitions -------------------------------------------------------------------
    def add_partitions(
        self, table: Table, partitions: Sequence[Partition], write_id: int | None = None
    ) -> list[Partition]:
        """Add partitions to an existing table in one transaction (one ADD_PARTITION event)
        and a fixed number of statements whatever their number; returns them as stored
        (with their ids), in the order given.

        ``write_id``: the write id under which a managed table's partitions are written; it
        must belong to an open transaction for this table, is stored as the partition
        parameter ``writeId`` and is carried by the event (with its transaction id), so
        the versioned cache knows which commit makes the change visible.
        """
        with self.sql.transaction():
            current = self.get_table(table.database, table.name)
            return self._add_partitions_with_event(current, partitions, int(time.time()), write_id)

    def alter_partition(
        self, table: Table, partition: Partition, write_id: int | None = None
    ) -> Partition:
        """Replace the location, parameters and statistics of the existing partition with
        ``partition.values`` (one ALTER_PARTITION event); ``write_id`` as for
        ``add_partitions`` (a managed table's append records its write id here)."""
        now = int(time.time())
        with self.sql.transaction():
            current = self.get_table(table.database, table.name)
            txn_id = check_write_id(self, current, write_id)
            check_partition_values(current, partition.values)
            name = partition_name(current.partition_keys, partition.values)
            part_id = self._part_id(current, name)
            if part_id is None:
                raise self._no_such_partition(current, name)
            self.sql.execute(
                "UPDATE PARTITIONS SET LOCATION = ? WHERE PART_ID = ?",
                (partition.location, part_id),
            )
            self.sql.execute("DELETE FROM PARTITION_PARAMS WHERE PART_ID = ?", (part_id,))
            self.sql.execute("DELETE FROM PART_COL_STATS WHERE PART_ID = ?", (part_id,))
            self.sql.execute("DELETE FROM PARTITION_FORMATS WHERE PART_ID = ?", (part_id,))
            insert_partition_details(self.sql, current, [(part_id, partition)], now, write_id)
            append_partition_event(
                self,
                "ALTER_PARTITION",
                current,
                [
                    partition_message(
                        part_id,
                        partition.values,
                        partition.location,
                        write_id,
                        own_format(current, partition),
                    )
                ],
                txn_id=txn_id,
                write_id=write_id,
            )
        return next(p for p in self.list_partitions(current) if p.id == part_id)

    def drop_partitions(
        self, table: Table, values: Sequence[Sequence[str | None]], write_id: int | None = None
    ) -> None:
        """Drop the partitions with these values in one transaction (one DROP_PARTITION
        event); a missing one is an error and drops nothing."""
        with self.sql.transaction():
            current = self.get_table(table.database, table.name)
            txn_id = check_write_id(self, current, write_id)
            dropped = []
            for vals in values:
                check_partition_values(current, vals)
                name = partition_name(current.partition_keys, vals)
                row = self.sql.execute(
                    "SELECT PART_ID, LOCATION FROM PARTITIONS WHERE TBL_ID = ? AND PART_NAME = ?",
                    (current.id, name),
                ).fetchone()
                if row is None:
                    raise self._no_such_partition(current, name)
                self.sql.execute("DELETE FROM PARTITIONS WHERE PART_ID = ?", (row[0],))
                dropped.append(partition_message(row[0], vals, row[1]))
            if dropped:
                append_partition_event(
                    self, "DROP_PARTITION", current, dropped, txn_id=txn_id, write_id=write_id
                )

    def _part_id(self, table: Table, name: str) -> int | None:
        row = self.sql.execute(
            "SELECT PART_ID FROM PARTITIONS WHERE TBL_ID = ? AND PART_NAME = ?", (table.id, name)
        ).fetchone()
        return None if row is None else row[0]

    def _no_such_partition(self, table: Table, name: str) -> NoSuchObjectError:
        return NoSuchObjectError(
            "partition",
            f"{table.qualified_name}/{name}",
            (
                n
                for (n,) in self.sql.execute(
                    "SELECT PART_NAME FROM PARTITIONS WHERE TBL_ID = ?", (table.id,)
                )
            ),
            hint=f"raptorx table show {table.qualified_name} --partitions lists them all",
        )

    def _add_partitions_with_event(
        self, table: Table, partitions: Sequence[Partition], now: int, write_id: int | None
    ) -> list[Partition]:
        """Inside a write transaction: insert ``partitions`` of the stored ``table`` in a
        fixed number of statements (``partition_rows``) and record one ADD_PARTITION.
        Returns them as stored."""
        txn_id = check_write_id(self, table, write_id)
        added = insert_partitions(self.sql, table, partitions, now, write_id)
        append_partition_event(
            self,
            "ADD_PARTITION",
            table,
            [
                partition_message(p.id, p.values, p.location, write_id, p.storage_format)
                for p in added
            ],
            txn_id=txn_id,
            write_id=write_id,
        )
        return added

    def list_partitions(
        self, table: Table, snapshot: QuerySnapshot | None = None
    ) -> list[Partition]:
        """Every partition of ``table`` with parameters and statistics (four queries).

        ``snapshot`` (a ``QuerySnapshot``, the ``CachedMetastore`` interface): the database
        has no history, so this reads the current partitions whatever the snapshot; it only
        checks that ``table`` is the table the snapshot was taken of (same id)."""
        check_snapshot_table(table, snapshot)
        with self.sql.lock:
            # Each partition's own format (PARTITION_FORMATS) in the same query: null for
            # one in its table's format.
            parts: dict[int, tuple[str, str | None]] = {
                pid: (
                    loc,
                    None
                    if fmt is None
                    else stored_format_of(fmt, f"a partition of {table.qualified_name}"),
                )
                for pid, loc, fmt in self.sql.execute(
                    "SELECT p.PART_ID, p.LOCATION, f.INPUT_FORMAT FROM PARTITIONS p "
                    "LEFT JOIN PARTITION_FORMATS f ON f.PART_ID = p.PART_ID "
                    "WHERE p.TBL_ID = ? ORDER BY p.PART_NAME",
                    (table.id,),
                )
            }
            values: dict[int, list] = defaultdict(list)
            for pid, val, _ in self.sql.execute(
                "SELECT v.PART_ID, v.PART_KEY_VAL, v.INTEGER_IDX FROM PARTITION_KEY_VALS v "
                "JOIN PARTITIONS p ON p.PART_ID = v.PART_ID WHERE p.TBL_ID = ? "
                "ORDER BY v.PART_ID, v.INTEGER_IDX",
                (table.id,),
            ):
                values[pid].append(val)
            params: dict[int, dict] = defaultdict(dict)
            for pid, k, v in self.sql.execute(
                "SELECT a.PART_ID, a.PARAM_KEY, a.PARAM_VALUE FROM PARTITION_PARAMS a "
                "JOIN PARTITIONS p ON p.PART_ID = a.PART_ID WHERE p.TBL_ID = ?",
                (table.id,),
            ):
                params[pid][k] = v
            stats: dict[int, dict] = defaultdict(dict)
            for pid, name, ctype, nulls, lo, hi in self.sql.execute(
                "SELECT s.PART_ID, s.COLUMN_NAME, s.COLUMN_TYPE, s.NUM_NULLS, s.LOW_VALUE, "
                "s.HIGH_VALUE FROM PART_COL_STATS s JOIN PARTITIONS p "
                "ON p.PART_ID = s.PART_ID WHERE p.TBL_ID = ?",
                (table.id,),
            ):
                stats[pid][name] = ColumnStats(
                    nulls, decode_value(lo, ctype), decode_value(hi, ctype)
                )
            return [
                Partition(tuple(values[pid]), loc, params[pid], stats[pid], pid, fmt)
                for pid, (loc, fmt) in parts.items()
            ]

    def set_partition_parameters(
        self, table: Table, values: Sequence[str | None], params: dict[str, str | None]
    ) -> None:
        """Set the parameters ``params`` of one partition of ``table`` in one transaction; a
        ``None`` value deletes that key (e.g. ``{"sealed": "true"}`` / ``{"sealed": None}``).
        Raises NoSuchObjectError naming the partition and listing the existing ones."""
        check_partition_values(table, values)
        name = partition_name(table.partition_keys, values)
        with self.sql.transaction():
            row = self.sql.execute(
                "SELECT PART_ID FROM PARTITIONS WHERE TBL_ID = ? AND PART_NAME = ?",
                (table.id, name),
            ).fetchone()
            if row is None:
                raise self._no_such_partition(table, name)
            for key, value in params.items():
                if value is None:
                    self.sql.execute(
                        "DELETE FROM PARTITION_PARAMS WHERE PART_ID = ? AND PARAM_KEY = ?",
                        (row[0], key),
                    )
                else:  # upsert: SQLite >= 3.24 and PostgreSQL alike
                    self.sql.execute(
                        "INSERT INTO PARTITION_PARAMS (PART_ID, PARAM_KEY, PARAM_VALUE) "
                        "VALUES (?, ?, ?) ON CONFLICT (PART_ID, PARAM_KEY) "
                        "DO UPDATE SET PARAM_VALUE = excluded.PARAM_VALUE",
                        (row[0], key, value),
                    )
            append_event(
                self,
                "ALTER_PARTITION",
                db=table.database,
                table=table.name,
                message=table_message(
                    table,
                    parameters=dict(params),
                    partitions=[partition_message(row[0], values, None)],
                ),
            )


def open_metastore(
    connection: MetastoreConnectionSettings, *, create: bool = False, **kwargs: Any
) -> Metastore:
    """The metastore database named by ``hive.metastore.url`` of ``connection``
    (``Settings.metastore_connection``; transactions it opens expire after
    ``hive.txn.timeout``); ``create``: a missing SQLite file may be created (only callers
    that create tables pass it); ``kwargs`` go to ``Metastore`` (e.g. ``clock``). Callers
    that also serve a Thrift metastore use ``configured.open_catalog``; with
    ``hive.metastore.uri`` set, what needs the database (transactions, locks, managed
    writes) is refused here, naming why, rather than run against the ``hive.metastore.url``
    the user did not mean."""
    if connection.uri:
        raise MetastoreError(
            f"hive.metastore.uri={connection.uri} makes a Hive Metastore over Thrift "
            f"the metastore, and this operation needs transactions, write ids or locks, which "
            f"its API (Hive 2.3) does not have: managed (insert-only ACID) writes, table "
            f"cleaning and lock listings are not available through it; nothing was written"
        )
    kwargs.setdefault("txn_timeout", connection.txn_timeout)
    return Metastore(backend_for_url(connection.url, create=create), **kwargs)
