"""One planner per Spark application, in the driver's own Python process.

Without it, pyspark 4.3 plans every scan of a Python data source in a planning Python worker
(``PythonPlannerRunner``): a worker call per scan (and one per ``load()`` to create the
source), 65-140 ms each when warm, and the driver-side caches (the metastore cache, the
listing cache) split across whichever workers Spark picks, so a warm query could still
LIST and read the metastore again.

With it, the JVM provider (``native/.../DriverPlanner.scala``, ``PlannedPython.scala``) asks
this object instead, through pyspark's Py4J callback server (the one ``foreachBatch`` uses),
so every scan of every query of the application is planned in ONE long-lived process that
keeps ONE metastore cache and ONE listing cache (the per-process registries of
``cached_store`` and ``listing_cache``) and the query snapshots. The messages are pyspark's
own planning protocol, unchanged: the JVM's runners write the bytes a worker's socket would
carry, ``create`` and ``plan`` here answer with the bytes a worker would write back (after a
status byte, ``protocol.PLANNER_OK``/``PLANNER_FAILED``). So the read function and the
partitions the executors get are made exactly as a worker makes them (``pyspark.sql.worker``'s
``write_read_func_and_partitions``), and a scan's whole planning (reader, pushed filters,
snapshot, partitions) is one callback.

Contract and limits:

- ``register_planner(spark)`` (done by ``session.register`` on a classic session with the
  native jar) starts the callback server and registers the application's one planner; the
  JVM falls back to the worker path when none is registered (Spark Connect, ``spark-sql``,
  a Scala application) or when a callback fails in transport.
- Calls are served one at a time (a lock): planning is short when warm, and the caches it
  shares need no more than that. ``prefetch`` (the provider created a query's scan builders:
  one call with their distinct sources, just before the query's next plan) answers at once
  and reads ahead on threads of its own (``scan_prefetch``). A callback runs on a
  Py4J thread of this process while the thread that started the query waits in the JVM.
- A failure of the source's own code (a missing table, a bad option) is returned as text and
  fails the query as a ``PythonException``, as a worker's would: a ``RaptorxError`` as its
  one line (the full traceback appended to the error log, ``error_report``), any other
  exception with its traceback.
- Counted: ``planning.driver_calls`` / ``planning.worker_calls`` (by the source, for each
  creation and each scan planned, by where it ran), ``planning.driver_micros`` (time of the
  planner's scan planning, Python side, whole request). The planner's counts (with the
  metastore cache's and the listing cache's) reach the metrics sink from a timer thread, at
  most once per ``metrics.FLUSH_INTERVAL`` (``metrics.deferring_flushes``), not on the
  callback's path; ``raptorx cache stats`` reads them from the sink while the application
  runs.
- The query snapshots of the scans it plans are kept in this process
  (``query_snapshots.in_process``, the same rule as the node's store, without its SQLite
  commit per scan). A scan of the same query planned by a worker instead (only after a
  callback failed in transport) does not see them and takes its own snapshot.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
import traceback
import weakref
from collections import OrderedDict

from pyspark.serializers import read_bool, read_int, write_int
from pyspark.sql.types import StructType, _parse_datatype_json_string
from pyspark.sql.worker import create_data_source
from pyspark.sql.worker.data_source_pushdown_filters import FilterRef, deserializeFilter
from pyspark.sql.worker.plan_data_source_read import write_read_func_and_partitions
from pyspark.worker_util import pickleSer, utf8_deserializer

from raptorx_py import metrics
from raptorx_py.datasource.planning import scan_prefetch
from raptorx_py.datasource.planning.planning_thread import serving_planner
from raptorx_py.error_report import log_error
from raptorx_py.errors import RaptorxError
from raptorx_py.jvm_contract import protocol
from raptorx_py.metrics import counters

log = logging.getLogger(__name__)

#: The JVM interface the planner implements, and the registry it registers with.
INTERFACE = "raptorx.DriverPlanner"
_OK = protocol.PLANNER_OK.encode("ascii")
_FAILED = protocol.PLANNER_FAILED.encode("ascii")
#: Unpickled sources kept by their pickled bytes (a read's source is the same for every scan).
_SOURCES_KEPT = 64

#: Py4J sockets this process turned Nagle off on (``_no_delay_on_this_thread``).
_sockets_without_nagle: weakref.WeakSet = weakref.WeakSet()


class DriverPlanner:
    """The application's planner (see the module docstring). Py4J calls ``create`` and
    ``plan`` with pyspark's request bytes; each returns the status byte and the answer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: OrderedDict[bytes, object] = OrderedDict()

    def create(self, request: bytes) -> bytes:
        """pyspark's ``create_data_source`` protocol: the source and its schema."""
        return self._serve(
            "create", lambda infile, out: create_data_source._main(infile, out), request
        )

    def plan(self, request: bytes) -> bytes:
        """pyspark's ``data_source_pushdown_filters`` protocol: the filters taken, the read
        function and the partitions of one scan."""
        return self._serve("plan", self._plan, request)

    def prefetch(self, request: bytes) -> bytes:
        """The provider created scan builders of a query: start reading what each scan's
        first reads of its table will be (``scan_prefetch``). The request: the query's token
        (pyspark's UTF-8 framing), how many sources (an int), then each pickled source (as a
        plan request opens); the provider sends them in one call just before the query's
        next plan, each distinct source once. Answers at once; the answer is only its
        status. Counted: ``planning.prefetch_calls``, ``planning.prefetch_sources``."""
        return self._serve("prefetch", self._prefetch, request)

    def _serve(self, what: str, serve, request: bytes) -> bytes:
        _no_delay_on_this_thread()
        out = io.BytesIO()
        out.write(_OK)
        # Flushes are written by a timer thread (metrics.deferring_flushes): a flush per call
        # (a SQLite commit) would be most of a warm scan's planning time.
        with self._lock, metrics.deferring_flushes(), serving_planner():
            try:
                serve(io.BytesIO(bytes(request)), out)
            except BaseException as e:  # noqa: BLE001 - every failure goes back as the answer
                return _FAILED + _failure_text(e, f"DriverPlanner.{what}").encode("utf-8")
        return out.getvalue()

    def _prefetch(self, infile: io.BytesIO, out: io.BytesIO) -> None:
        token = utf8_deserializer.loads(infile)
        sources = [self._source(infile) for _ in range(read_int(infile))]
        counters.add("planning.prefetch_calls")
        counters.add("planning.prefetch_sources", len(sources))
        for source in sources:
            scan_prefetch.read_ahead(source, token, serving_planner)

    def _source(self, infile: io.BytesIO):
        """The pickled data source at the start of a plan request (pyspark's
        ``read_command``), unpickled once per distinct source."""
        blob = infile.read(read_int(infile))
        source = self._sources.get(blob)
        if source is None:
            source = pickleSer.loads(blob)
            self._sources[blob] = source
            if len(self._sources) > _SOURCES_KEPT:
                self._sources.popitem(last=False)
        else:
            self._sources.move_to_end(blob)
        return source

    def _plan(self, infile: io.BytesIO, out: io.BytesIO) -> None:
        """What ``pyspark.sql.worker.data_source_pushdown_filters._main`` does, reading and
        writing the same bytes; timed."""
        started = time.perf_counter()
        data_source = self._source(infile)
        schema = _parse_datatype_json_string(utf8_deserializer.loads(infile))
        if not isinstance(schema, StructType):
            raise TypeError(f"a scan's schema must be a StructType, got {schema!r}")
        reader = data_source.reader(schema=schema)
        filters = [
            FilterRef(deserializeFilter(f)) for f in json.loads(utf8_deserializer.loads(infile))
        ]
        refused = {FilterRef(f) for f in reader.pushFilters([r.filter for r in filters])}
        taken = []
        for i, ref in enumerate(filters):
            if ref in refused:
                refused.discard(ref)
            else:
                taken.append(i)
        if refused:
            raise ValueError(f"the reader returned filters it was not given: {refused}")
        max_arrow_batch_size = read_int(infile)
        binary_as_bytes = read_bool(infile)
        write_read_func_and_partitions(
            out,
            reader=reader,
            data_source=data_source,
            schema=schema,
            max_arrow_batch_size=max_arrow_batch_size,
            binary_as_bytes=binary_as_bytes,
        )
        write_int(len(taken), out)
        for i in taken:
            write_int(i, out)
        counters.add("planning.driver_micros", int((time.perf_counter() - started) * 1e6))


def sockets_without_nagle() -> list[socket.socket]:
    """The Py4J sockets this process answered planner callbacks on, Nagle off (tests)."""
    return list(_sockets_without_nagle)


def _no_delay_on_this_thread() -> None:
    """Nagle's algorithm off on the Py4J socket this callback answers on (in pyspark's
    pinned-thread mode, the calling thread's own connection), once per socket.

    An answer longer than a TCP segment (a scan of many files) is otherwise sent with its
    tail held back until the JVM acknowledges the head, which the JVM delays by up to 40 ms;
    the JVM sets the same option on its end (``CallbackSockets.scala``). Best effort: without
    pyspark's thread connection (another py4j, another mode) nothing is set."""
    from pyspark import SparkContext

    client = getattr(SparkContext._gateway, "_gateway_client", None)
    connection = getattr(client, "get_thread_connection", lambda: None)()
    sock = getattr(connection, "socket", None)
    if sock is None or sock in _sockets_without_nagle:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError as e:  # a closed or non-TCP socket: the callback still works, slower
        log.debug("could not turn Nagle off on the planner's socket: %s", e)
        return
    _sockets_without_nagle.add(sock)
    counters.add("planning.sockets_without_nagle")


def _failure_text(e: BaseException, where: str) -> str:
    """What the query's error says: our error's one line (its traceback in the error log),
    or any other exception with its traceback."""
    if isinstance(e, RaptorxError):
        path = log_error(e, where)
        note = f"\n(full traceback in {path})" if path is not None else ""
        return f"{type(e).__module__}.{type(e).__qualname__}: {e}{note}"
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))


class _JavaPlanner(DriverPlanner):
    """The planner as Py4J sees it: a Python object implementing ``raptorx.DriverPlanner``."""

    class Java:
        implements = [INTERFACE]


#: The process's planner (Py4J keeps only a weak hold on a callback object).
_planner: _JavaPlanner | None = None


def register_planner(spark) -> bool:
    """Start pyspark's callback server and make this process's planner the application's;
    whether it is registered. A classic session only (a Spark Connect client has no JVM)."""
    global _planner
    from pyspark.java_gateway import ensure_callback_server_started

    sc = spark.sparkContext
    ensure_callback_server_started(sc._gateway)
    if _planner is None:
        _planner = _JavaPlanner()
    sc._jvm.raptorx.DriverPlanners.register(_planner)
    return True


def unregister_planner(spark) -> None:
    """Send the application's planning back to pyspark's workers (tests, comparisons)."""
    spark.sparkContext._jvm.raptorx.DriverPlanners.unregister()


def planner_registered(spark) -> bool:
    return bool(spark.sparkContext._jvm.raptorx.DriverPlanners.isRegistered())
