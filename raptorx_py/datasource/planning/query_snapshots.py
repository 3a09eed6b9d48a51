"""One snapshot per query, shared by every scan of it (Hive: one ValidTxnList per statement,
from which each table's ValidWriteIdList).

With the native provider each scan of a query is planned by its own ``build()``, each in a
Python planning worker of its own (workers may be different processes). The provider
(``native/.../TieredHiveScanBuilder.scala``, ``QueryToken``) tags every scan it plans with a
token that is the same for all scans planned for one query: it is derived from Spark's
``QueryPlanningTracker``, the one object a ``QueryExecution`` installs (thread-local) while
its optimizer runs ``V2ScanRelationPushDown``, scalar subqueries included. The token reaches
the Python reader in the metadata (``TOKEN_KEY``) of the first field of the schema the scan
is planned with: the per-scan channels pyspark 4.3 gives from the JVM to the planning worker
are that schema and the pushed filters, and a filter must name a column of the schema with a
value of its type. The reader then asks this store: the first scan of a table in the query
records its snapshot under ``(token, table)``; every later scan of that table in the same
query reads under the recorded one.

The store is a small WAL SQLite file in the temporary directory (per user), shared by the
node's planning processes; entries older than ``MAX_AGE`` seconds are dropped whenever one
is recorded (a query's scans are planned within seconds).

Limits: a scan that reads no column (``count(*)``) has no field to carry the token and
takes its own snapshot. The snapshot is per table per query, taken when the query first plans a
scan of that
table; two different tables of one query are snapshotted at their own first scans, so a
transaction committing to both in between can be seen in one and not the other (a
ValidTxnList taken once for the whole query would need the commit order of transactions,
which the metastore keeps only in its notification log). Without the native jar there is no
token: each scan takes its own snapshot, as before.
"""

from __future__ import annotations

import collections
import os
import pickle
import sqlite3
import tempfile
import threading
import time

from raptorx_py.jvm_contract import protocol
from raptorx_py.metrics import counters
from raptorx_py.sqlite_wal import connect_wal

#: The schema field metadata key carrying the query's token (native/.../QueryToken.scala).
TOKEN_KEY = protocol.QUERY_TOKEN_KEY
MAX_AGE = 3600.0

_SCHEMA = """CREATE TABLE IF NOT EXISTS QUERY_SNAPSHOTS (
    TOKEN TEXT NOT NULL, TBL TEXT NOT NULL, CREATED REAL NOT NULL, SNAPSHOT BLOB NOT NULL,
    PRIMARY KEY (TOKEN, TBL))"""


def query_token(schema) -> str | None:
    """The query's token in the scan's schema (None: no native provider, or no column)."""
    fields = getattr(schema, "fields", None) or []
    token = (fields[0].metadata or {}).get(TOKEN_KEY) if fields else None
    return str(token) if token else None


class ProcessQuerySnapshots:
    """``snapshot_for_query``'s rule held in this process's memory, for a process that plans
    every scan of a query itself (the driver's planner, ``driver_planner.py``): the first scan
    of a table in a query records its snapshot, later ones read under it; entries older than
    ``MAX_AGE`` seconds are dropped when one is recorded. Thread-safe."""

    def __init__(self, clock=time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[float, object]] = {}

    def snapshot_for_query(self, token: str, table: str, snapshot):
        with self._lock:
            found = self._entries.get((token, table))
            if found is not None:
                return found[1]
            now = self._clock()
            for key in [k for k, (at, _) in self._entries.items() if at < now - MAX_AGE]:
                del self._entries[key]
            self._entries[(token, table)] = (now, snapshot)
            return snapshot


#: This process's query snapshots (used by the driver's planner).
in_process = ProcessQuerySnapshots()


class ProcessQueryValues:
    """Values fixed for the length of one query, kept in this process by ``(token, key)``:
    what the query's first scan of a table read under its snapshot (the table, a
    directory's raw listing), which every later scan of that table in the same query reads
    again instead of asking the metastore or the store a second time. The same rule as the
    query's snapshot (every scan of a table in a query reads one state of it; two LISTs of a
    directory could even disagree while a writer adds a file), so nothing is kept beyond the
    query: its token is new for every query, and entries go after ``max_age`` seconds or
    when more than ``max_entries`` are kept (oldest first). A value is made outside the lock
    (``make`` may be a round trip); two scans of one query are never planned at once, so
    they never make one value twice. A value may also be made ahead of the scan that takes
    it (``put_ahead``: ``scan_prefetch``), then waited for by that scan. Thread-safe."""

    def __init__(self, max_entries: int = 4096, max_age: float = 600.0, clock=time.monotonic):
        self._max_entries = max_entries
        self._max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[tuple, tuple[float, object]] = (
            collections.OrderedDict()
        )

    def get(self, token: str, key) -> object | None:
        """The value the query ``token`` keeps under ``key``, or None."""
        return self.lookup(token, key)[0]

    def lookup(self, token: str, key) -> tuple[object | None, bool]:
        """``(value, kept)``: the value the query ``token`` keeps under ``key`` and whether an
        earlier scan of the query made it. A value made ahead (``put_ahead``) is waited for;
        the first scan to take it is the one it was made for, so it is not ``kept``, and what
        making it counted is added to the scopes open now (that scan's planning counts).
        ``(None, False)`` when nothing is kept, or when making it ahead failed (forgotten: the
        scan makes it itself, and meets the error itself)."""
        with self._lock:
            found = self._entries.get((token, key))
        if found is None:
            return None, False
        if not isinstance(found[1], _MadeAhead):
            return found[1], True
        try:
            value, counted = found[1].future.result()
        except Exception:  # noqa: BLE001 - the scan makes it again and meets the error itself
            with self._lock:
                if self._entries.get((token, key)) is found:
                    del self._entries[(token, key)]
            return None, False
        with self._lock:
            if self._entries.get((token, key)) is not found:  # taken by another scan already
                return value, True
            self._entries[(token, key)] = (found[0], value)
        counters.add_to_scopes(counted)
        return value, False

    def put(self, token: str, key, value) -> None:
        with self._lock:
            self._put_locked(token, key, value)

    def put_ahead(self, token: str, key, future) -> bool:
        """Keep ``future`` (of ``(value, what making it counted)``, made in
        ``metrics.counters.detached()``) as the value of ``key`` in the query ``token``,
        unless a value is kept already; whether it was kept."""
        with self._lock:
            if (token, key) in self._entries:
                return False
            self._put_locked(token, key, _MadeAhead(future))
            return True

    def get_or_make(self, token: str, key, make):
        """The value of ``key`` in the query ``token``: kept, else ``make()`` (then kept);
        and whether it was kept."""
        found, kept = self.lookup(token, key)
        if found is not None:
            return found, kept
        value = make()
        self.put(token, key, value)
        return value, False

    def _put_locked(self, token: str, key, value) -> None:
        now = self._clock()
        self._entries[(token, key)] = (now, value)
        self._entries.move_to_end((token, key))
        while self._entries:
            oldest_key, (at, _) = next(iter(self._entries.items()))
            if len(self._entries) <= self._max_entries and at >= now - self._max_age:
                break
            del self._entries[oldest_key]


class _MadeAhead:
    """A value being made ahead of the scan that takes it (``ProcessQueryValues.put_ahead``)."""

    __slots__ = ("future",)

    def __init__(self, future) -> None:
        self.future = future


#: The tables and directory listings each query's first scan of a table read (the driver's
#: planner, and a planning worker for the scans it plans): ``source.py``, ``planner.py``.
query_values = ProcessQueryValues()


def default_path() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"raptorx-query-snapshots-{uid}.sqlite")


def snapshot_for_query(
    token: str, table: str, snapshot, *, path: str | None = None, clock=time.time
):
    """The snapshot every scan of ``table`` in the query ``token`` reads under: the one
    recorded by the query's first scan of it, or ``snapshot`` (then recorded)."""
    conn = connect_wal(path or default_path(), timeout=30, schema=_SCHEMA)
    try:
        now = clock()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT SNAPSHOT FROM QUERY_SNAPSHOTS WHERE TOKEN = ? AND TBL = ?", (token, table)
            ).fetchone()
            if row is None:
                conn.execute("DELETE FROM QUERY_SNAPSHOTS WHERE CREATED < ?", (now - MAX_AGE,))
                conn.execute(
                    "INSERT INTO QUERY_SNAPSHOTS VALUES (?, ?, ?, ?)",
                    (token, table, now, sqlite3.Binary(pickle.dumps(snapshot))),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
    return snapshot if row is None else pickle.loads(row[0])
