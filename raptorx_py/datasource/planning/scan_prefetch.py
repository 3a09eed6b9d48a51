"""What the first scan of each table of a query reads before anything else, read ahead.

Spark creates every scan builder of a query (``V2ScanRelationPushDown``'s first pass calls
the JVM provider's ``newScanBuilder`` for each relation) before it builds any of them, then
builds them one after another, each build one call to the driver's planner
(``driver_planner.py``). A scan's first reads of its table are round trips: the snapshot and
the table (the metastore), and for an external unpartitioned table its one LIST (the store).
Made scan after scan, a query over five tables waited for five LISTs in a row: TPC-H Q2
over S3 at 20 ms a request, with every cache off, planned for 170-185 ms, where Spark's
reader over ``s3a://`` had listed when its views were registered.

So the provider notes each scan builder's source as it creates it and tells the planner of
them in one call just before the query's next plan (``DriverPlanner.prefetch``: each distinct
source once), and ``read_ahead`` starts those reads on threads of its own and keeps them
among the query's values (``query_snapshots.query_values.put_ahead``), under the keys the
scan looks them up by: the scan finds them (waiting while they are read) as it finds what an
earlier scan of the table in the query read, and the reads of a query's tables overlap.

Contract and limits:

- The same reads as without it, under the same keys and rules: ``first_scan.first_scan_state``
  (the snapshot, the query's recorded one, the table under it), then the table's listing
  (``planner.raw_listing``, the listing cache's rule), the snapshot before the listing as in
  a scan. A value the query holds already is not read again.
- Only what the table's first scan reads whatever its filters and columns: the snapshot and
  the table, and the listing of an EXTERNAL UNPARTITIONED table (a scan lists every external
  location; a partitioned table's partitions are pruned by the scan's filters first, and a
  managed table lists only what its statistics leave).
- Best effort: a read that fails is forgotten, and the scan reads for itself and meets the
  error itself (``planner.prefetch_failed``). Nothing is waited for here: the provider's call
  returns before any of it is read.
- What a read ahead counts goes to the process's counts at once and to the scan that takes it
  (``metrics.counters.detached``, ``query_values.lookup``), not to the scan planned
  meanwhile; ``planner.tables_read_ahead`` and ``planner.listings_read_ahead`` count them.
- Only with the driver's planner and a query token (the provider sends none otherwise). A
  scan that reads no column carries no token to its reader (``query_snapshots``), so it
  does not take what was read ahead for it: its table is read twice (a LIST more).
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from raptorx_py.datasource.planning import planner
from raptorx_py.datasource.planning.first_scan import first_scan_state, table_key
from raptorx_py.datasource.planning.query_snapshots import query_values
from raptorx_py.hive.model import EXTERNAL_TABLE
from raptorx_py.metrics import counters

log = logging.getLogger(__name__)

#: Threads reading ahead: a query's tables at once (TPC-H's widest query reads eight).
THREADS = 8

_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def read_ahead(source, token: str, serving) -> None:
    """Start reading what the first scan of ``source``'s table in the query ``token`` reads
    first, unless the query holds it already. ``source``: the ``TieredHiveDataSource`` of a
    scan builder; ``serving``: a context manager the reads run in (the driver planner's, so
    that they take the query's snapshot as its scans do)."""
    if getattr(source, "catalog_request", None) is not None:
        return
    settings, database, name = source.settings, source.database, source.table_name

    def read_table():
        with serving():
            state = first_scan_state(settings, database, name, token)
        table = state[1]
        counters.add("planner.tables_read_ahead")
        if table.table_type == EXTERNAL_TABLE and not table.is_partitioned:
            loc = planner.table_location(table)
            _start(
                token,
                planner.listing_key(table.qualified_name, loc),
                lambda: _listed(settings, table.qualified_name, loc),
            )
        return state

    _start(token, table_key(database, name), read_table)


def _listed(settings, table_name: str, loc) -> tuple:
    files = planner.raw_listing(settings, table_name, loc, managed=False)
    counters.add("planner.listings_read_ahead")
    return files


def _start(token: str, key, read) -> None:
    """Keep a future of ``read()`` as the query's value of ``key`` (unless it holds one) and
    start it."""
    future: Future = Future()
    if not query_values.put_ahead(token, key, future):
        return
    _threads().submit(_run, future, read, key)


def _run(future: Future, read, key) -> None:
    with counters.detached() as counted:
        try:
            value = read()
        except BaseException as e:  # noqa: BLE001 - handed to the scan, which reads again
            counters.add("planner.prefetch_failed")
            log.debug("reading %s ahead failed: %s", key, e)
            future.set_exception(e)
            return
    future.set_result((value, dict(counted)))


def _threads() -> ThreadPoolExecutor:
    """This process's read-ahead threads (made again in a forked child)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(THREADS, thread_name_prefix="rx-ahead"))
        return _pool[1]
