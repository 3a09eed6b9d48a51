"""One connection to the metastore's database: what every metastore module sends SQL through.

``SqlSession`` is the metastore's whole interface to its database. ``Metastore`` owns one
(``Metastore.sql``) and the modules below it (``transactions``, ``notifications``,
``locks``, ``write_paths``, ``partition_rows``) use only its public members; they take the
``Metastore`` as an ``SqlMetastore`` (its session, its transaction timeout and table
lookups), so none of them imports ``store``, which imports them:

- ``execute(sql, params)`` / ``executemany(sql, rows)``: one statement each, with ``?``
  placeholders (the backend translates them); a driver error becomes ``MetastoreError``
  naming the database. Each counts one ``metastore.round_trips`` (``executemany`` is one
  batch, one count), except in a thread inside ``round_trips.counting_as(name)``, which
  counts ``name``.
- ``insert(sql, params, id_column)``: an INSERT returning the generated id.
- ``transaction()``: a write transaction (the backend's ``begin_write``: SQLite's
  ``BEGIN IMMEDIATE``, PostgreSQL's advisory lock) that commits when the block ends and
  rolls back on any error leaving it. Nested, it joins the enclosing one, which alone
  commits. It holds ``lock`` throughout.
- ``lock``: the process-local re-entrant lock a multi-statement read holds, so two threads
  sharing the connection never interleave their statements.
- ``clock()``: seconds since the epoch, the time transactions, locks and events are stamped
  with (tests inject a fake one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from raptorx_py.errors import MetastoreError
from raptorx_py.hive.model import Table
from raptorx_py.metastore.round_trips import count_round_trip


class Cursor(Protocol):
    """What a statement returns (``sqlite3.Cursor``, ``psycopg.Cursor``)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A DB-API connection with ``?`` placeholders (``sqlite3.Connection``,
    ``postgres.PostgresConnection``)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> Any: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """A database kind (``store.SqliteBackend``, ``postgres.PostgresBackend``)."""

    #: The column type of a generated id (``{id}`` in ``schema.DDL``).
    id_type: str
    #: The statement(s) that start a write transaction holding the write lock.
    begin_write: str
    #: What the driver raises; ``SqlSession`` turns these into ``MetastoreError``.
    error_types: tuple[type[BaseException], ...]

    def connect(self) -> Connection: ...

    def describe(self) -> str: ...


class SqlSession:
    """One connection of ``backend``, shared by the threads of one ``Metastore`` (see the
    module docstring for the contract of each member). ``clock``: seconds since the epoch."""

    def __init__(self, backend: Backend, clock: Callable[[], float]):
        self.backend = backend
        self.clock = clock
        self.lock = threading.RLock()
        self._depth = 0  # nesting of transaction()
        self._conn = backend.connect()

    def close(self) -> None:
        with self.lock:
            self._conn.close()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        count_round_trip()
        try:
            return self._conn.execute(sql, tuple(params))
        except self.backend.error_types as e:
            raise MetastoreError(f"metastore query failed on {self.backend.describe()}: {e}") from e

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Cursor:
        count_round_trip()
        try:
            return self._conn.executemany(sql, rows)
        except self.backend.error_types as e:
            raise MetastoreError(f"metastore query failed on {self.backend.describe()}: {e}") from e

    def insert(self, sql: str, params: Sequence[Any], id_column: str) -> int:
        """Run an INSERT and return the generated ``id_column`` (``RETURNING`` works on
        SQLite >= 3.35 and PostgreSQL alike, unlike ``lastrowid``)."""
        return self.execute(f"{sql} RETURNING {id_column}", params).fetchone()[0]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction that commits whole or rolls back on any error. Inside another
        ``transaction()`` it is part of the enclosing one, which alone commits."""
        with self.lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            try:
                self.execute(self.backend.begin_write)
            except MetastoreError as e:
                wait = getattr(self.backend, "lock_wait_error", lambda _e: None)(e.__cause__)
                if wait is None:
                    raise
                raise MetastoreError(wait) from e
            self._depth = 1
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self.execute("COMMIT")
            finally:
                self._depth = 0

    def now_ms(self) -> int:
        """``clock()`` in whole milliseconds (how TXNS and HIVE_LOCKS store times)."""
        return int(self.clock() * 1000)


class SqlMetastore(Protocol):
    """What the SQL modules below ``store.Metastore`` (``transactions``, ``notifications``,
    ``locks``, ``write_paths``) need of the ``Metastore`` they are given: its one session,
    the ``hive.txn.timeout`` its transactions and locks are recorded with, and a table
    lookup that raises ``NoSuchObjectError`` naming the tables that exist."""

    sql: SqlSession
    txn_timeout: float

    def get_table(self, database: str, name: str) -> Table: ...
