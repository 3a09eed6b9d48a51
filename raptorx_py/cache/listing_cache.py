"""The file-listing cache (driver): listings of partitions whose contents cannot change.

Listing a partition directory is a round trip to the object store per partition and per
query. RaptorX caches the listings of *sealed* partitions: an external table's partition
whose ``sealed`` parameter is ``"true"`` is promised not to change until it is un-sealed or
altered in the metastore, and both of those change the partition version the entry is keyed
by. A managed table's partition is pinned by its write-id state instead, so the caller passes
that state as the version and any partition is cacheable.

Usage (what the planner does per partition, from its listing thread pool)::

    cache = listing_cache_for(settings.listing_cache)  # None when no table is eligible
    files = cache.get_or_list(table.qualified_name, p.location,
                              partition_version(p.location, p.parameters),
                              is_sealed(p.parameters),
                              lambda: list_data_files(fs, path, url))
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raptorx_py.cache.process_registry import ProcessRegistry
from raptorx_py.cache_invalidations import LISTING, Invalidation, JournalReader, journal_path
from raptorx_py.config.tiers import ListingCacheSettings
from raptorx_py.hive.table_parameters import SEALED_PARAM
from raptorx_py.metrics import counters


def parse_patterns(patterns: str | Iterable[str]) -> tuple[str, ...]:
    """``"tpch.*, db.t"`` -> ``("tpch.*", "db.t")`` (lower-cased, blanks dropped)."""
    items = patterns.split(",") if isinstance(patterns, str) else patterns
    return tuple(p.strip().lower() for p in items if p and p.strip())


def table_matches(patterns: str | Iterable[str], table: str) -> bool:
    """Whether ``"db.table"`` matches one of ``hive.file-status-cache-tables``' patterns.

    Shell-style (``*``, ``?``, ``[...]``), case-insensitive, over the whole qualified name:
    ``*`` matches every table, ``tpch.*`` every table of ``tpch``; no pattern, no table.
    """
    name = table.lower()
    return any(fnmatch.fnmatchcase(name, p) for p in parse_patterns(patterns))


def is_sealed(parameters: Mapping[str, str]) -> bool:
    return str(parameters.get(SEALED_PARAM, "")).strip().lower() == "true"


def partition_version(location: str, parameters: Mapping[str, str]) -> str:
    """A version of an external table's partition as the metastore describes it: a digest
    of its location and every parameter (``sealed``, ``transient_lastDdlTime``, ``numRows``
    ...). Sealing, un-sealing, altering or moving the partition changes it."""
    canonical = json.dumps([location, sorted(parameters.items())], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _normalise(location: str) -> str:
    return location.rstrip("/")


@dataclass
class _Entry:
    table: str
    version: str
    files: tuple
    weight: int  # entries it counts for against max_files
    stored_at: float


class ListingCache:
    """Listings of sealed partitions, keyed by partition location and version.

    Contract:
    - Only tables matching ``patterns`` are cached; for others ``get_or_list`` just lists.
    - Only a partition the caller declares ``sealed`` is cached (an eligible table's open
      partition is listed every time, its cached listing dropped, and counted as
      ``listing_cache.skipped_unsealed``). The ``version`` must change whenever the
      partition's contents may: for external tables ``partition_version`` (metastore
      parameters + location), for managed tables the write-id state the query reads under.
      A location holds one version at a time: a listing under a new version replaces it.
    - What is stored is always the lister's whole listing of ``location``: there is no
      ``put``. A caller that wants part of a directory passes ``where=``, which filters the
      whole cached listing, so a filtered listing can never be stored as the directory.
    - A listing that was invalidated (``invalidate``, ``invalidate_table``, ``clear``) while
      it was being built is returned to its caller but never stored.
    - At most ``max_files`` file entries in total (an empty listing counts as one), least
      recently used listings evicted first; a listing is served for ``expire_seconds`` after
      it was stored (by ``clock``).
    - Thread-safe; listers run outside the lock, so partitions list in parallel. Two threads
      missing the same key both list (no single flight); the later store wins.

    Limits: a sealed partition changed on storage without touching the metastore is served
    stale until expiry or ``invalidate`` -- that is what sealing promises not to happen.
    """

    def __init__(
        self,
        patterns: str | Iterable[str],
        *,
        max_files: int,
        expire_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.patterns = parse_patterns(patterns)
        self.max_files = int(max_files)
        self.expire_seconds = float(expire_seconds)
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # by location, LRU order
        self._total = 0
        # Invalidation stamps from one monotonic sequence: a listing that started at stamp s
        # may be stored only if neither its location nor its table nor the whole cache was
        # invalidated after s (the per-key generation check, with one counter for all keys).
        # A stamp no listing in flight started before can refuse nothing any more, so it is
        # pruned and these maps stay small.
        self._sequence = 0
        self._invalidated_locations: dict[str, int] = {}
        self._invalidated_tables: dict[str, int] = {}
        self._cleared_at = 0
        self._in_flight: dict[int, int] = {}  # start stamp -> listings in flight

    # -- public API ----------------------------------------------------------------------
    def eligible(self, table: str) -> bool:
        return table_matches(self.patterns, table)

    def get_or_list(
        self,
        table: str,
        location: str,
        version: str,
        sealed: bool,
        lister: Callable[[], Sequence[Any]],
        *,
        where: Callable[[Any], bool] | None = None,
    ) -> tuple:
        """The listing of ``location`` (the whole directory, filtered by ``where`` if given):
        from the cache when ``location`` is cached under ``version``, else from
        ``lister()``, which must list the whole of ``location``."""
        if not self.eligible(table):
            return _select(tuple(lister()), where)
        location, table = _normalise(location), table.lower()
        if not sealed:
            counters.add("listing_cache.skipped_unsealed")
            with self._lock:
                if location in self._entries:  # un-sealed since it was cached
                    self._remove_locked(location)
            return _select(tuple(lister()), where)
        now = self._clock()
        with self._lock:
            files = self._hit_locked(location, version, now)
            if files is not None:
                return _select(files, where)
            entry = self._entries.get(location)
            if entry is not None:  # expired, or another version of the partition
                self._remove_locked(location)
                counters.add("listing_cache.evictions")
            self._sequence += 1
            started = self._sequence
            self._in_flight[started] = self._in_flight.get(started, 0) + 1
        counters.add("listing_cache.misses")
        try:
            files = tuple(lister())
        except BaseException:
            with self._lock:
                self._finish_locked(started)
            raise
        with self._lock:
            stale = self._invalidated_since_locked(started, location, table)
            self._finish_locked(started)
            if stale:
                counters.add("listing_cache.discarded_stale")
            else:
                self._store_locked(
                    location, _Entry(table, version, files, max(1, len(files)), self._clock())
                )
        return _select(files, where)

    def cached(self, table: str, location: str, version: str, sealed: bool) -> tuple | None:
        """The listing ``get_or_list`` would serve from the cache for these arguments (a
        hit, counted as one), or None where it would list, touching nothing then: the
        caller's ``get_or_list`` decides and counts. Never lists, so a caller can serve the
        hits of many partitions in its own thread and send only the rest to listing threads."""
        if not sealed or not self.eligible(table):
            return None
        now = self._clock()
        with self._lock:
            return self._hit_locked(_normalise(location), version, now)

    def invalidate(self, location: str) -> int:
        """Forget the cached listing of ``location`` (any version), and refuse to store a
        listing of it that is being built right now. Returns the listings dropped."""
        location = _normalise(location)
        with self._lock:
            self._sequence += 1
            self._invalidated_locations[location] = self._sequence
            dropped = [location] if location in self._entries else []
            for k in dropped:
                self._remove_locked(k)
            self._prune_locked()
        counters.add("listing_cache.invalidations")
        return len(dropped)

    def invalidate_table(self, table: str) -> int:
        """Forget every cached listing of ``"db.table"`` (as passed to ``get_or_list``)."""
        table = table.lower()
        with self._lock:
            self._sequence += 1
            self._invalidated_tables[table] = self._sequence
            dropped = [k for k, e in self._entries.items() if e.table == table]
            for k in dropped:
                self._remove_locked(k)
            self._prune_locked()
        counters.add("listing_cache.invalidations")
        return len(dropped)

    def apply(self, invalidations: Iterable[Invalidation]) -> None:
        """Apply what ``raptorx cache invalidate`` / ``clear`` posted to the node's journal
        (``cache_invalidations``): a table's listings, some locations' or all."""
        for inv in invalidations:
            if not inv.covers(LISTING):
                continue
            if inv.table is None:
                self.clear()
            elif inv.locations:
                for location in inv.locations:
                    self.invalidate(location)
            else:
                self.invalidate_table(inv.table)

    def clear(self) -> None:
        with self._lock:
            self._sequence += 1
            self._cleared_at = self._sequence
            self._entries.clear()
            self._total = 0
        counters.add("listing_cache.invalidations")

    @property
    def file_count(self) -> int:
        """File entries held, as counted against ``max_files``."""
        return self._total

    def __len__(self) -> int:
        return len(self._entries)

    # -- internals (callers hold the lock) ---------------------------------------------
    def _store_locked(self, location: str, entry: _Entry) -> None:
        if entry.weight > self.max_files or self.expire_seconds <= 0:
            return
        if location in self._entries:
            self._remove_locked(location)
        self._entries[location] = entry
        self._total += entry.weight
        counters.add("listing_cache.stores")
        while self._total > self.max_files:
            self._remove_locked(next(iter(self._entries)))
            counters.add("listing_cache.evictions")

    def _hit_locked(self, location: str, version: str, now: float) -> tuple | None:
        """The files cached for ``location`` (normalised) under ``version`` and not expired at
        ``now``, made most recently used and counted as a hit; else None."""
        entry = self._entries.get(location)
        if (
            entry is None
            or entry.version != version
            or now - entry.stored_at >= self.expire_seconds
        ):
            return None
        self._entries.move_to_end(location)
        counters.add("listing_cache.hits")
        return entry.files

    def _remove_locked(self, location: str) -> None:
        self._total -= self._entries.pop(location).weight

    def _invalidated_since_locked(self, started: int, location: str, table: str) -> bool:
        return (
            self._cleared_at > started
            or self._invalidated_locations.get(location, 0) > started
            or self._invalidated_tables.get(table, 0) > started
        )

    def _finish_locked(self, started: int) -> None:
        left = self._in_flight[started] - 1
        if left:
            self._in_flight[started] = left
        else:
            del self._in_flight[started]
        self._prune_locked()

    def _prune_locked(self) -> None:
        # A stamp only refuses listings that started before it.
        oldest = min(self._in_flight, default=self._sequence + 1)
        for stamps in (self._invalidated_locations, self._invalidated_tables):
            for name in [n for n, s in stamps.items() if s <= oldest]:
                del stamps[name]


def _select(files: tuple, where: Callable[[Any], bool] | None) -> tuple:
    return files if where is None else tuple(f for f in files if where(f))


# -- one cache per process and configuration --------------------------------------------
_caches: ProcessRegistry[ListingCache] = ProcessRegistry()


def listing_cache_for(tier: ListingCacheSettings) -> ListingCache | None:
    """This process's listing cache for the tier's settings (``Settings.listing_cache``);
    None when ``hive.file-status-cache-tables`` names no table.

    Spark reuses the planning worker across queries, so the cache outlives a query. One cache
    per distinct (tables, size, expiry): settings that differ get their own cache. What
    ``raptorx cache invalidate`` / ``clear`` posted to the node's journal since the last call
    is applied first (``cache_invalidations``: one stat when nothing is new).
    """
    patterns = parse_patterns(tier.tables)
    if not patterns:
        return None
    key = (patterns, tier.size, tier.expire_time)
    journal = journal_path(tier.journal_directory)
    cache = _caches.get(
        key, lambda: ListingCache(patterns, max_files=key[1], expire_seconds=key[2])
    )
    if cache is not None:
        reader = _journals.get((key, journal), lambda: JournalReader(journal))
        if reader is not None:
            cache.apply(reader.poll())
    return cache


#: Each cache's position in its node's journal (one per cache and journal file).
_journals: ProcessRegistry[JournalReader] = ProcessRegistry()
