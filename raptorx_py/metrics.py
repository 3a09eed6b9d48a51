"""Counters: the one home of every count the tiers promise (files opened, remote requests,
bytes read, partitions pruned, cache hits ...).

Counting is process-local and cheap: ``counters.add("reader.files_opened")``. Spark runs
planning and reading in Python worker processes, so a process's counts reach the tests
and the benchmark through a :class:`MetricsSink`: an append-only SQLite file in a directory
named by the ``metrics.directory`` property. ``flush`` writes the counts accumulated since
the previous flush in one transaction; ``MetricsSink.totals`` sums every process's rows,
and ``MetricsSink.totals_by_source`` keeps them apart by the Spark process that counted them
(``process_source``: which executor), for per-executor reports on a cluster.

Contract and limits:
- Names are dotted, ``<tier>.<what>``; values are integers.
- With no directory configured, flushing is a no-op and counts stay in the process.
- The sink is for tests and the benchmark (who reads it between queries), not a time series.
- The JVM counts too (the fragment hits its columnar reader serves, ``FragmentHits.scala``)
  but has no SQLite driver: it appends ``<source>\t<name>\t<value>`` lines to a file of its
  own under ``<directory>/jvm-counters/`` (``JVM_COUNTS_DIR``), which ``totals`` and
  ``totals_by_source`` fold in (a line without its newline, being written, is not read yet).
- Inside ``deferring_flushes`` (the driver's planner) a flush is not written by the thread
  that asked: a timer thread writes it, at once when the last such write is
  ``FLUSH_INTERVAL`` seconds old, else when that interval has passed (so a long-lived
  application's planning counts, ``metastore_cache.*`` and ``listing_cache.*``, reach the
  sink while it runs, for ``raptorx cache stats`` and the tests, without a SQLite commit on
  a scan's planning path). ``settle_deferred_flushes`` waits for a pending one; the
  process's exit writes what is left.
- For Spark's metrics system (the native jar's ``CacheMetricsPlugin``), a flush given a
  snapshot directory (the ``metrics.spark-directory`` property, which ``register`` sets to
  ``<spark.raptorx.metrics.dir>/<application id>`` when the plugin is on) also publishes
  this process's totals since it started, and the sizes of the node's disk tiers
  (``node_gauge``), to ``<directory>/<process>/<pid>-<nonce>.tsv`` (temporary file +
  ``os.replace``), which the plugin sums per Spark process. The JVM reads these text files
  because pyspark's jars hold no SQLite driver. Inside ``deferring_flushes`` publishing is
  at most once per ``PUBLISH_INTERVAL`` seconds, the last one within that interval (a
  timer), so the driver's planner does not write a file per scan.
- A scope (``Counters.open_scope``/``scope``) also collects what the process counts while it
  is open, apart from the totals and untouched by flushes: what one task read or one scan's
  planning did, for Spark's SQL metrics (``jvm_contract/scan_report.py``). It collects every
  thread's counts, so it is exact only while the process serves one task or one planning at
  a time (a Python worker; the driver's planner, which plans one scan at a time).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import TypeVar

from raptorx_py.jvm_contract.protocol import SNAPSHOT_COUNTER, SNAPSHOT_GAUGE, SNAPSHOT_SUFFIX
from raptorx_py.sqlite_wal import connect_read_only, connect_wal, is_damage, set_aside
from raptorx_py.thread_flag import ThreadFlag


class Counters:
    """Thread-safe named integer counters of one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: Counter[str] = Counter()
        self._totals: Counter[str] = Counter()
        self._scopes: list[Counter[str]] = []
        self._detached = threading.local()

    def add(self, name: str, amount: int = 1) -> None:
        detached = getattr(self._detached, "scope", None)
        with self._lock:
            self._values[name] += amount
            self._totals[name] += amount
            if detached is not None:
                detached[name] += amount
                return
            for scope in self._scopes:
                scope[name] += amount

    @contextmanager
    def detached(self) -> Iterator[Counter[str]]:
        """``with counters.detached() as counted:``: what this thread counts in the block goes
        to the process's counts and to ``counted`` only, not to the open scopes, which belong
        to whatever the process is doing meanwhile (work done ahead for a later scan must not
        show in the scan being planned now); ``add_to_scopes(counted)`` adds it to the scopes
        open when that later scan takes the work."""
        previous = getattr(self._detached, "scope", None)
        counted: Counter[str] = Counter()
        self._detached.scope = counted
        try:
            yield counted
        finally:
            self._detached.scope = previous

    def add_to_scopes(self, counts: Mapping[str, int]) -> None:
        """Add ``counts`` (already in the process's counts: ``detached``) to the open scopes."""
        with self._lock:
            for scope in self._scopes:
                scope.update(counts)

    def open_scope(self) -> Counter[str]:
        """A new scope: every count added from now until ``close_scope`` is also added to the
        returned ``Counter``."""
        scope: Counter[str] = Counter()
        with self._lock:
            self._scopes.append(scope)
        return scope

    def close_scope(self, scope: Counter[str]) -> dict[str, int]:
        """Stop collecting into ``scope`` (closing it twice is harmless); what it collected."""
        with self._lock:
            # By identity: two scopes that counted the same are equal Counters.
            self._scopes = [s for s in self._scopes if s is not scope]
            return dict(scope)

    @contextmanager
    def scope(self) -> Iterator[Counter[str]]:
        """``with counters.scope() as counted:``: what the process counts in the block."""
        scope = self.open_scope()
        try:
            yield scope
        finally:
            self.close_scope(scope)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)

    def totals(self) -> dict[str, int]:
        """Everything counted since the process started (a drain does not reset it): what
        the process publishes for Spark's metrics system."""
        with self._lock:
            return dict(self._totals)

    def drain(self) -> dict[str, int]:
        """Return the counts and reset them to zero (what a flush ships)."""
        with self._lock:
            values, self._values = dict(self._values), Counter()
            return values


#: The counters of this process. Tiers count here; the data source flushes.
counters = Counters()


@cache
def process_source() -> str:
    """The Spark process this one counts for: ``executor <id>`` in a standalone executor's
    Python workers, ``driver`` anywhere else (the driver, local mode's tasks, plain Python).

    A standalone worker starts each executor in ``<work dir>/<app id>/<executor id>``
    (Spark's ``ExecutorRunner``) and the executor's Python workers inherit that directory,
    which is also what a relative cache directory is resolved against: the name follows the
    caches. Other cluster managers are reported as ``driver`` (a limit, documented)."""
    cwd = os.getcwd()
    parent = os.path.basename(os.path.dirname(cwd))
    if parent.startswith("app-"):
        return f"executor {os.path.basename(cwd)}"
    return "driver"


class MetricsSink:
    """Append-only, process-safe store of counter deltas in ``<directory>/metrics.db``, each
    row tagged with the process and the Spark process (``process_source``) that counted it.

    The table is ``deltas``; a file from before the source column (table ``counts``) is
    left as it is and not read: these are scratch counts, read between queries.

    A damaged file (not a database, malformed, emptied) is set aside (``metrics.db.damaged``,
    renamed) and a new one started, its counts lost: counted (``metrics.sink_rebuilt``) and
    logged once per directory; the write or reading that met it then runs on the new file.
    No memory mapping (``sqlite_wal``): a rollback journal and ``mmap_size=0``, so a process
    flushing while another clears or replaces the file gets an error, not SIGBUS."""

    FILE_NAME = "metrics.db"
    #: Where JVMs append their counts (one ``*.tsv`` file per JVM).
    JVM_COUNTS_DIR = "jvm-counters"

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, self.FILE_NAME)

    def _connect(self) -> sqlite3.Connection:
        os.makedirs(self.directory, exist_ok=True)
        return connect_wal(
            self.path,
            timeout=60,
            schema="CREATE TABLE IF NOT EXISTS deltas (pid INTEGER, source TEXT, at REAL, "
            "name TEXT, value INTEGER)",
            # Scratch counts, and a damaged file is started again: no fsync per flush.
            pragmas=("PRAGMA synchronous=OFF",),
            journal_mode="TRUNCATE",
        )

    def _healing(self, use: Callable[[sqlite3.Connection], _T]) -> _T:
        """``use(connection)``, once more on a new file if the first met a damaged one."""
        for attempt in (1, 2):
            try:
                conn = self._connect()
                try:
                    return use(conn)
                finally:
                    conn.close()
            except sqlite3.DatabaseError as e:
                if attempt == 2 or not is_damage(e):
                    raise
                aside = set_aside(self.path)
                counters.add("metrics.sink_rebuilt")
                if self.directory not in _rebuilt_logged:
                    _rebuilt_logged.add(self.directory)
                    logging.getLogger(__name__).warning(
                        "metrics sink %s was damaged (%s); set aside as %s, counting anew",
                        self.path,
                        e,
                        aside,
                    )
        raise AssertionError("unreachable")  # the loop returns or raises

    def _read(self, sql: str) -> list[tuple]:
        """Rows of ``sql``, read without writing (a read-only directory's sink is readable);
        a damaged file is set aside and read as the new, empty one."""
        try:
            conn = connect_read_only(self.path)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            if not is_damage(e):
                raise
        return self._healing(lambda conn: conn.execute(sql).fetchall())

    def write(self, deltas: Mapping[str, int]) -> None:
        if not deltas:
            return
        now, pid, source = time.time(), os.getpid(), process_source()
        rows = [(pid, source, now, k, int(v)) for k, v in deltas.items()]

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT INTO deltas VALUES (?, ?, ?, ?, ?)", rows)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        self._healing(insert)

    def totals(self) -> dict[str, int]:
        """Sum of every delta written so far, by counter name."""
        return {
            name: total
            for (_, name), total in self._sums(
                "SELECT '', name, SUM(value) FROM deltas GROUP BY name", by_source=False
            )
        }

    def totals_by_source(self) -> dict[str, dict[str, int]]:
        """``totals`` per Spark process (``process_source``): ``{"executor 0": {...}, ...}``."""
        out: dict[str, dict[str, int]] = defaultdict(dict)
        for (source, name), total in self._sums(
            "SELECT source, name, SUM(value) FROM deltas GROUP BY source, name", by_source=True
        ):
            out[source][name] = total
        return dict(out)

    def _sums(self, sql: str, by_source: bool) -> list[tuple[tuple[str, str], int]]:
        sums: Counter[tuple[str, str]] = Counter()
        if os.path.exists(self.path):
            rows = self._read(sql)
            for source, name, total in rows:
                # A damaged page SQLite did not notice can read as NULLs: not a count.
                if isinstance(name, str) and isinstance(total, int):
                    sums[(source, name)] += total
        for source, name, value in self._jvm_counts():
            sums[(source if by_source else "", name)] += value
        return list(sums.items())

    def _jvm_counts(self) -> list[tuple[str, str, int]]:
        """The JVMs' appended counts: complete lines of ``jvm-counters/*.tsv``."""
        directory = os.path.join(self.directory, self.JVM_COUNTS_DIR)
        try:
            names = sorted(os.listdir(directory))
        except FileNotFoundError:
            return []
        out = []
        for file_name in names:
            if not file_name.endswith(".tsv"):
                continue
            try:
                with open(os.path.join(directory, file_name), encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue  # cleared meanwhile
            for line in text.split("\n")[:-1]:
                parts = line.split("\t")
                if len(parts) == 3 and parts[2].lstrip("-").isdigit():
                    out.append((parts[0], parts[1], int(parts[2])))
        return out

    def clear(self) -> None:
        jvm = os.path.join(self.directory, self.JVM_COUNTS_DIR)
        if os.path.isdir(jvm):
            for file_name in os.listdir(jvm):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(jvm, file_name))
        if os.path.exists(self.path):
            self._healing(lambda conn: conn.execute("DELETE FROM deltas"))


#: Sink directories whose rebuild this process has logged (each is logged once).
_rebuilt_logged: set[str] = set()
_T = TypeVar("_T")


#: Directories whose flushes ``deferring_flushes`` put off, flushed at exit (or by a caller).
_deferred: set[str] = set()
_deferring = ThreadFlag()

#: Held while a flush drains the counters and writes them (``flush``).
_flush_lock = threading.Lock()

#: Inside ``deferring_flushes``, the sink is written at most this often (seconds).
FLUSH_INTERVAL = 1.0


class _DeferredFlusher:
    """Writes the flushes ``deferring_flushes`` put off, on a timer thread: at once when the
    last write is ``FLUSH_INTERVAL`` old, else when it is (one timer at a time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = float("-inf")  # time.monotonic() of the last write
        self._timer: threading.Timer | None = None  # the one not yet writing
        self._latest: threading.Timer | None = None  # the last started (for ``settle``)
        self._pending: set[str] = set()  # the directories asked for since the last write

    def request(self, directory: str) -> None:
        with self._lock:
            _deferred.add(directory)
            self._pending.add(directory)
            if self._timer is not None:
                return
            wait = max(0.0, self._last + FLUSH_INTERVAL - time.monotonic())
            self._timer = self._latest = threading.Timer(wait, self._write)
            self._timer.daemon = True
            self._timer.start()

    def _write(self) -> None:
        with self._lock:
            self._timer = None
            self._last = time.monotonic()
            # Only the directories asked for since the last write (the counts are the
            # process's: the first one written gets them all, so one asked for long ago by
            # another configuration must not take this one's).
            directories, self._pending = sorted(self._pending), set()
        for directory in directories:  # this thread is not deferring: written now
            flush(directory)

    def settle(self, timeout: float | None = None) -> None:
        """Wait until the last write asked for (if any) is done."""
        with self._lock:
            timer = self._latest
        if timer is not None:
            timer.join(timeout)


_flusher = _DeferredFlusher()


def settle_deferred_flushes(timeout: float | None = 30.0) -> None:
    """Wait for the sink write a ``flush`` inside ``deferring_flushes`` scheduled (tests; the
    timer runs whether or not anyone waits)."""
    _flusher.settle(timeout)


@contextmanager
def deferring_flushes() -> Iterator[None]:
    """Within the block, on this thread, ``flush`` only notes its directory: the counts stay in
    this process's counters, and a timer thread (``_DeferredFlusher``) writes them to the sink
    soon after, at most once per ``FLUSH_INTERVAL``. For the driver's planner
    (``datasource/planning/driver_planner.py``), where a flush per call (a SQLite commit) would be
    most of a warm scan's planning time. The counts also reach the sink at the process's next
    flush outside such a block (the tests' and the benchmark's readings flush first), or at
    exit."""
    with _deferring.on():
        yield


@atexit.register
def _flush_deferred() -> None:
    for directory in sorted(_deferred):
        flush(directory)


def flush(directory: str | None, snapshots: str | None = None) -> None:
    """Ship this process's counts to the sink in ``directory`` (no-op without one; noted for
    later inside ``deferring_flushes``), and publish its totals under ``snapshots`` (the
    ``metrics.spark-directory`` property; none: not published)."""
    if snapshots:
        _publisher.publish(snapshots, soon=_deferring.is_on())
    if not directory:
        return
    if _deferring.is_on():
        _flusher.request(directory)
        return
    # One flush at a time in a process: a reader that flushes and then reads the sink must
    # not miss counts another thread (the deferred flusher's timer) drained but has not
    # written yet.
    with _flush_lock:
        deltas = counters.drain()
        try:
            MetricsSink(directory).write(deltas)
        except (sqlite3.Error, OSError):
            # Metrics never fail a query: put the counts back for the next flush.
            for name, value in deltas.items():
                counters.add(name, value)
            logging.getLogger(__name__).warning(
                "could not write metrics to %s", directory, exc_info=True
            )


#: Publishing is at most this often inside ``deferring_flushes`` (seconds).
PUBLISH_INTERVAL = 1.0

#: The sizes this process reports (``node_gauge``): name -> a function reading it now.
_node_gauges: dict[str, Callable[[], int]] = {}


def node_gauge(name: str, read: Callable[[], int]) -> None:
    """Publish ``read()`` as the size ``name`` with this process's totals (a tier registers
    its cache's size when it opens it; the latest registration of a name wins). A size is
    the node's, the same whichever process reads it: the plugin takes the newest file's."""
    _node_gauges[name] = read


def process_directory() -> str:
    """The directory name of this process's Spark process among an application's snapshots:
    ``driver`` or ``executor-<id>`` (``process_source``), as the plugin names them."""
    return process_source().replace(" ", "-")


class _SnapshotPublisher:
    """Writes this process's snapshot file (see the module's docstring); never raises."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._name = ""
        self._last = float("-inf")  # time.monotonic() of the last publish
        self._timer: threading.Timer | None = None
        self._pending: str | None = None

    def publish(self, directory: str, soon: bool = False) -> None:
        """Publish now, or (``soon``) now if the last was ``PUBLISH_INTERVAL`` ago, else
        once that interval has passed."""
        with self._lock:
            self._pending = directory
            wait = self._last + PUBLISH_INTERVAL - time.monotonic()
            if soon and wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._publish_pending)
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._write(directory)

    def _publish_pending(self) -> None:
        with self._lock:
            self._timer = None
            if self._pending:
                self._write(self._pending)

    def final(self) -> None:
        """At exit: the totals as they end (a timer may still have been waiting)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._pending:
                self._write(self._pending)

    def _write(self, directory: str) -> None:
        self._last = time.monotonic()
        if self._pid != os.getpid():  # a forked child publishes a file of its own
            self._pid, self._name = os.getpid(), f"{os.getpid()}-{secrets.token_hex(4)}"
        lines = [
            f"{SNAPSHOT_COUNTER}\t{name}\t{value}\n"
            for name, value in sorted(counters.totals().items())
            if value >= 0
        ]
        for name, read in sorted(_node_gauges.items()):
            try:
                lines.append(f"{SNAPSHOT_GAUGE}\t{name}\t{int(read())}\n")
            except Exception:  # noqa: BLE001 - a size that cannot be read now is left out
                logging.getLogger(__name__).debug("size %s not read", name, exc_info=True)
        target = os.path.join(directory, process_directory(), self._name + SNAPSHOT_SUFFIX)
        if not os.path.isdir(os.path.dirname(target)):
            # The plugin makes its process's directory when it starts and removes it when the
            # application stops: none, and a publish after the stop (a timer, the process's
            # exit) or without the plugin would leave files nobody removes.
            return
        tmp = f"{target}.{secrets.token_hex(4)}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write("".join(lines))
            os.replace(tmp, target)
        except OSError:
            # Metrics never fail a query: the next flush publishes again.
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            logging.getLogger(__name__).warning(
                "could not publish metrics to %s", directory, exc_info=True
            )


_publisher = _SnapshotPublisher()
atexit.register(_publisher.final)


def diff(after: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    """What was counted between two ``totals()`` readings."""
    return {
        k: after.get(k, 0) - before.get(k, 0)
        for k in set(after) | set(before)
        if after.get(k, 0) != before.get(k, 0)
    }
