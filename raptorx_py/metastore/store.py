"""The metastore: databases, tables, partitions and statistics in a SQL database.

Contract:
- Every change is one database transaction: it commits whole or rolls back whole on any
  error, so a failed registration leaves the metastore exactly as it was.
- All SQL is parameterised; names never reach SQL text.
- Every statement sent to the database counts one ``metastore.round_trips``.
- The SQLite backend is safe across the processes of one machine (WAL, busy timeout,
  ``BEGIN IMMEDIATE`` for writes). A backend is a small object (see ``SqliteBackend``) so a
  PostgreSQL backend can be added without touching the queries.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from urllib.parse import urlparse

from raptorx_py.errors import AlreadyExistsError, MetastoreError, NoSuchObjectError
from raptorx_py.hive_types import decode_value, encode_value
from raptorx_py.metastore import schema
from raptorx_py.metastore.model import (
    Column,
    ColumnStats,
    Database,
    Partition,
    Table,
)
from raptorx_py.metrics import counters


class SqliteBackend:
    """An SQLite file, created with its directory on first use."""

    id_type = "INTEGER PRIMARY KEY AUTOINCREMENT"
    #: Starts a write transaction that holds the write lock from its first statement, so two
    #: writers serialise instead of failing on upgrade.
    begin_write = "BEGIN IMMEDIATE"
    #: What the driver raises; the store turns these into ``MetastoreError``.
    error_types: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, path: str):
        self.path = os.path.abspath(os.path.expanduser(path))

    def connect(self) -> sqlite3.Connection:
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=60000")
        except (sqlite3.Error, OSError) as e:
            raise MetastoreError(f"cannot open the SQLite metastore at {self.path}: {e}") from e
        return conn

    def describe(self) -> str:
        return f"sqlite:///{self.path}"


def backend_for_url(url: str):
    """The backend for a ``hive.metastore.url``."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        # sqlite:///relative/or/~/path and sqlite:////absolute/path
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else parsed.path
        if not path:
            raise MetastoreError(f"metastore URL '{url}' names no file: use sqlite:///<path>")
        return SqliteBackend(path)
    raise MetastoreError(
        f"unsupported metastore URL '{url}': expected sqlite:///<path>")


class Metastore:
    """Databases, tables, partitions and statistics. One connection per instance."""

    def __init__(self, backend):
        self.backend = backend
        self._lock = threading.RLock()
        self._conn = backend.connect()
        self._ensure_schema()

    # -- plumbing ---------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "Metastore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _execute(self, sql: str, params: Sequence = ()):
        counters.add("metastore.round_trips")
        try:
            return self._conn.execute(sql, tuple(params))
        except self.backend.error_types as e:
            raise MetastoreError(f"metastore query failed on {self.backend.describe()}: {e}") from e

    def _executemany(self, sql: str, rows: Iterable[Sequence]):
        counters.add("metastore.round_trips")
        try:
            return self._conn.executemany(sql, rows)
        except self.backend.error_types as e:
            raise MetastoreError(f"metastore query failed on {self.backend.describe()}: {e}") from e

    @contextmanager
    def _transaction(self):
        """A write transaction that commits whole or rolls back on any error."""
        with self._lock:
            self._execute(self.backend.begin_write)
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._execute("COMMIT")

    def _insert(self, sql: str, params: Sequence, id_column: str) -> int:
        """Run an INSERT and return the generated ``id_column`` (``RETURNING`` works on
        SQLite >= 3.35 and PostgreSQL alike, unlike ``lastrowid``)."""
        return self._execute(f"{sql} RETURNING {id_column}", params).fetchone()[0]

    def _ensure_schema(self) -> None:
        with self._transaction():
            for ddl in schema.DDL:
                self._execute(ddl.format(id=self.backend.id_type))
            row = self._execute("SELECT MAX(SCHEMA_VERSION) FROM VERSION").fetchone()
            if row[0] is None:
                self._execute("INSERT INTO VERSION (VER_ID, SCHEMA_VERSION, VERSION_COMMENT) "
                              "VALUES (1, ?, 'raptorx_py metastore')", (schema.SCHEMA_VERSION,))
            elif row[0] > schema.SCHEMA_VERSION:
                raise MetastoreError(
                    f"metastore {self.backend.describe()} has schema version {row[0]}, newer "
                    f"than this raptorx_py understands ({schema.SCHEMA_VERSION})")

    # -- databases --------------------------------------------------------------------
    def create_database(self, name: str, location: str | None = None,
                        if_not_exists: bool = True) -> Database:
        with self._transaction():
            row = self._execute("SELECT DB_ID, NAME, DB_LOCATION_URI FROM DBS WHERE NAME = ?",
                                (name,)).fetchone()
            if row is not None:
                if not if_not_exists:
                    raise AlreadyExistsError(f"database '{name}' already exists")
                return Database(row[0], row[1], row[2])
            db_id = self._insert("INSERT INTO DBS (NAME, DB_LOCATION_URI, CREATE_TIME) "
                                 "VALUES (?, ?, ?)", (name, location, int(time.time())), "DB_ID")
            return Database(db_id, name, location)

    def list_databases(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._execute("SELECT NAME FROM DBS ORDER BY NAME")]

    def get_database(self, name: str) -> Database:
        with self._lock:
            row = self._execute("SELECT DB_ID, NAME, DB_LOCATION_URI FROM DBS WHERE NAME = ?",
                                (name,)).fetchone()
            if row is None:
                raise NoSuchObjectError("database", name, self.list_databases())
            return Database(*row)

    # -- tables -----------------------------------------------------------------------
    def list_tables(self, database: str) -> list[str]:
        with self._lock:
            db = self.get_database(database)
            return [r[0] for r in self._execute(
                "SELECT TBL_NAME FROM TBLS WHERE DB_ID = ? ORDER BY TBL_NAME", (db.id,))]

    def get_table(self, database: str, name: str) -> Table:
        with self._lock:
            db = self.get_database(database)
            row = self._execute(
                "SELECT TBL_ID, TBL_TYPE, LOCATION FROM TBLS WHERE DB_ID = ? AND TBL_NAME = ?",
                (db.id, name)).fetchone()
            if row is None:
                raise NoSuchObjectError("table", f"{database}.{name}",
                                        (f"{database}.{t}" for t in self.list_tables(database)))
            tbl_id, tbl_type, location = row
            columns = tuple(Column(n, t) for n, t in self._execute(
                "SELECT COLUMN_NAME, TYPE_NAME FROM COLUMNS_V2 WHERE TBL_ID = ? "
                "ORDER BY INTEGER_IDX", (tbl_id,)))
            keys = tuple(Column(n, t) for n, t in self._execute(
                "SELECT PKEY_NAME, PKEY_TYPE FROM PARTITION_KEYS WHERE TBL_ID = ? "
                "ORDER BY INTEGER_IDX", (tbl_id,)))
            params = dict(self._execute(
                "SELECT PARAM_KEY, PARAM_VALUE FROM TABLE_PARAMS WHERE TBL_ID = ?", (tbl_id,)))
            types = {c.name: c.type for c in columns}
            stats = {name: ColumnStats(nulls, decode_value(lo, types.get(name, ctype)),
                                       decode_value(hi, types.get(name, ctype)))
                     for name, ctype, nulls, lo, hi in self._execute(
                         "SELECT COLUMN_NAME, COLUMN_TYPE, NUM_NULLS, LOW_VALUE, HIGH_VALUE "
                         "FROM TAB_COL_STATS WHERE TBL_ID = ?", (tbl_id,))}
            return Table(database, name, tbl_type, location, columns, keys, params, stats, tbl_id)

    def create_table(self, table: Table, partitions: Sequence[Partition] = (), *,
                     replace: bool = False) -> Table:
        """Create ``table`` with its partitions and statistics in one transaction.

        With ``replace``, an existing table of that name is dropped in the same transaction,
        so readers see either the old table or the new one, never neither.
        """
        now = int(time.time())
        with self._transaction():
            db = self.get_database(table.database)
            existing = self._execute("SELECT TBL_ID FROM TBLS WHERE DB_ID = ? AND TBL_NAME = ?",
                                     (db.id, table.name)).fetchone()
            if existing is not None:
                if not replace:
                    raise AlreadyExistsError(
                        f"table '{table.qualified_name}' already exists (use replace)")
                self._execute("DELETE FROM TBLS WHERE TBL_ID = ?", (existing[0],))
            tbl_id = self._insert(
                "INSERT INTO TBLS (DB_ID, TBL_NAME, TBL_TYPE, LOCATION, CREATE_TIME) "
                "VALUES (?, ?, ?, ?, ?)",
                (db.id, table.name, table.table_type, table.location, now), "TBL_ID")
            self._executemany(
                "INSERT INTO COLUMNS_V2 (TBL_ID, COLUMN_NAME, TYPE_NAME, INTEGER_IDX) "
                "VALUES (?, ?, ?, ?)",
                [(tbl_id, c.name, c.type, i) for i, c in enumerate(table.columns)])
            self._executemany(
                "INSERT INTO PARTITION_KEYS (TBL_ID, PKEY_NAME, PKEY_TYPE, INTEGER_IDX) "
                "VALUES (?, ?, ?, ?)",
                [(tbl_id, c.name, c.type, i) for i, c in enumerate(table.partition_keys)])
            self._executemany(
                "INSERT INTO TABLE_PARAMS (TBL_ID, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?)",
                [(tbl_id, k, v) for k, v in table.parameters.items()])
            types = {c.name: c.type for c in table.columns}
            self._executemany(
                "INSERT INTO TAB_COL_STATS (TBL_ID, COLUMN_NAME, COLUMN_TYPE, NUM_NULLS, "
                "LOW_VALUE, HIGH_VALUE, LAST_ANALYZED) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(tbl_id, name, types[name], *_encode_stats(s, types[name]), now)
                 for name, s in table.stats.items()])
            self._add_partitions(tbl_id, table, partitions, now)
        return self.get_table(table.database, table.name)

    def drop_table(self, database: str, name: str) -> None:
        with self._transaction():
            table = self.get_table(database, name)
            self._execute("DELETE FROM TBLS WHERE TBL_ID = ?", (table.id,))

    # -- partitions -------------------------------------------------------------------
    def _add_partitions(self, tbl_id: int, table: Table, partitions: Sequence[Partition],
                        now: int) -> None:
        types = {c.name: c.type for c in table.columns}
        for p in partitions:
            if len(p.values) != len(table.partition_keys):
                raise MetastoreError(
                    f"partition {p.values} of {table.qualified_name} has {len(p.values)} values "
                    f"for {len(table.partition_keys)} partition keys")
            part_id = self._insert(
                "INSERT INTO PARTITIONS (TBL_ID, PART_NAME, LOCATION, CREATE_TIME) "
                "VALUES (?, ?, ?, ?)",
                (tbl_id, partition_name(table.partition_keys, p.values), p.location, now),
                "PART_ID")
            self._executemany(
                "INSERT INTO PARTITION_KEY_VALS (PART_ID, PART_KEY_VAL, INTEGER_IDX) "
                "VALUES (?, ?, ?)", [(part_id, v, i) for i, v in enumerate(p.values)])
            self._executemany(
                "INSERT INTO PARTITION_PARAMS (PART_ID, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?)",
                [(part_id, k, v) for k, v in p.parameters.items()])
            self._executemany(
                "INSERT INTO PART_COL_STATS (PART_ID, COLUMN_NAME, COLUMN_TYPE, NUM_NULLS, "
                "LOW_VALUE, HIGH_VALUE, LAST_ANALYZED) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(part_id, name, types[name], *_encode_stats(s, types[name]), now)
                 for name, s in p.stats.items()])

    def list_partitions(self, table: Table) -> list[Partition]:
        """Every partition of ``table`` with parameters and statistics (four queries)."""
        with self._lock:
            parts = {pid: loc for pid, loc in self._execute(
                "SELECT PART_ID, LOCATION FROM PARTITIONS WHERE TBL_ID = ? ORDER BY PART_NAME",
                (table.id,))}
            values: dict[int, list] = defaultdict(list)
            for pid, val, _ in self._execute(
                    "SELECT v.PART_ID, v.PART_KEY_VAL, v.INTEGER_IDX FROM PARTITION_KEY_VALS v "
                    "JOIN PARTITIONS p ON p.PART_ID = v.PART_ID WHERE p.TBL_ID = ? "
                    "ORDER BY v.PART_ID, v.INTEGER_IDX", (table.id,)):
                values[pid].append(val)
            params: dict[int, dict] = defaultdict(dict)
            for pid, k, v in self._execute(
                    "SELECT a.PART_ID, a.PARAM_KEY, a.PARAM_VALUE FROM PARTITION_PARAMS a "
                    "JOIN PARTITIONS p ON p.PART_ID = a.PART_ID WHERE p.TBL_ID = ?", (table.id,)):
                params[pid][k] = v
            stats: dict[int, dict] = defaultdict(dict)
            for pid, name, ctype, nulls, lo, hi in self._execute(
                    "SELECT s.PART_ID, s.COLUMN_NAME, s.COLUMN_TYPE, s.NUM_NULLS, s.LOW_VALUE, "
                    "s.HIGH_VALUE FROM PART_COL_STATS s JOIN PARTITIONS p "
                    "ON p.PART_ID = s.PART_ID WHERE p.TBL_ID = ?", (table.id,)):
                stats[pid][name] = ColumnStats(nulls, decode_value(lo, ctype),
                                               decode_value(hi, ctype))
            return [Partition(tuple(values[pid]), loc, params[pid], stats[pid], pid)
                    for pid, loc in parts.items()]


def _encode_stats(s: ColumnStats, hive_type: str) -> tuple:
    return (s.num_nulls,
            None if s.low is None else encode_value(s.low, hive_type),
            None if s.high is None else encode_value(s.high, hive_type))


def partition_name(keys: Sequence[Column], values: Sequence[str | None]) -> str:
    """Hive's partition name, ``k1=v1/k2=v2`` with escaped values."""
    from raptorx_py.storage.hive_layout import escape_partition_value

    return "/".join(f"{k.name}={escape_partition_value(v)}" for k, v in zip(keys, values))


def open_metastore(settings) -> Metastore:
    """The metastore named by ``hive.metastore.url``."""
    return Metastore(backend_for_url(settings.metastore_url))
