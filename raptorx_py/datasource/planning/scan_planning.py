"""What a scan's planning keeps in its process besides the plan: the counters scope of the
scan being planned (for its plan mark), the fragment keys planned before (admission on
second use), which fragment key a split hands to the JVM, and which tiers its plan mark
names."""

from __future__ import annotations

import collections
import threading

from raptorx_py.cache.listing_cache import table_matches
from raptorx_py.metrics import counters
from raptorx_py.scheduling import affinity

#: The planning scope of the scan being planned in this process (planning is one scan at a
#: time: a planning worker, or the driver's planner under its lock).
_planning_scope: list = []


#: Fragment keys this process planned, oldest first (bounded): how AUTO tells a repeat.
_planned_fragments: collections.OrderedDict[bytes, None] = collections.OrderedDict()
_PLANNED_FRAGMENTS_MAX = 1 << 16
_planned_lock = threading.Lock()


def handoff_key(spec, spark_reads: bool, aggregated: bool = False) -> bytes | None:
    """The fragment key the JVM looks up and stores ``spec``'s split under: none for a split
    Spark's reader reads with no row filter left (``spec.predicates`` empty: no predicate, or
    statistics made them all true in its partition). Its fragment would hold its columns as
    read, and a hit on that was measured no faster than Spark's reader over the cached
    blocks (SF 1, Q4 and Q20), while it doubled the disk those columns take; the block cache
    serves it. A split of an ``aggregated`` scan always keeps its key: its fragment is its
    few partial rows. The Python reader, reading the split for another reason, still uses
    the split's key (``spec.key``)."""
    if spark_reads and not spec.predicates and not aggregated:
        return None
    return spec.key


def fragment_planned_before(key: bytes) -> bool:
    """Whether this process planned a split of fragment ``key`` before (and remember it).
    Per process: with the driver's planner, every scan of the application."""
    with _planned_lock:
        if key in _planned_fragments:
            _planned_fragments.move_to_end(key)
            return True
        _planned_fragments[key] = None
        if len(_planned_fragments) > _PLANNED_FRAGMENTS_MAX:
            _planned_fragments.popitem(last=False)
        return False


def open_planning_scope():
    """A counters scope for a scan's planning; one left open by a planning that failed before
    ``partitions()`` is closed first, so abandoned scopes do not pile up."""
    while _planning_scope:
        counters.close_scope(_planning_scope.pop())
    scope = counters.open_scope()
    _planning_scope.append(scope)
    return scope


def close_planning_scope(scope) -> None:
    if scope is None:
        return
    counters.close_scope(scope)
    # By identity: two scopes that counted the same are equal Counters.
    _planning_scope[:] = [s for s in _planning_scope if s is not scope]


def tiers_on(settings, table_name: str) -> list[str]:
    """The cache tiers and scheduling a scan of ``table_name`` runs with, by their names in
    the docs."""
    tiers = []
    if settings.metastore_cache_ttl > 0:
        tiers.append("metastore")
    if table_matches(settings.file_status_cache_tables, table_name):
        tiers.append("listing")
    if settings.parquet_metadata_cache_enabled:
        tiers.append("footer")
    if settings.cache_enabled:
        tiers.append("block")
    if settings.fragment_cache_enabled:
        tiers.append("fragment")
    if settings.node_selection_strategy == affinity.SOFT_AFFINITY:
        tiers.append("soft-affinity")
    return tiers
