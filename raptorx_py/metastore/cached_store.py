"""The versioned metastore cache: Hive's synchronized CachedStore in front of ``Metastore``.

A query takes its snapshot once (``snapshot(["db.t", ...])``: per table its id, type and
ValidWriteIdList, ONE uncached round trip) and passes it to every read
(``get_table(db, name, snapshot=)``, ``list_partitions(table, snapshot=)``). A warm query makes
no other round trip.

Contract (after the Apache Hive design document "Synchronized Metastore Cache",
https://cwiki.apache.org/confluence/display/Hive/Synchronized+Metastore+Cache):
- Entries (a table; the partition list of a table) carry the ValidWriteIdList they were read
  under. A read is served from the cache when an entry of the same table id is *fresh* for the
  query's list (same committed write ids: ``ValidWriteIdList.is_fresh_for``); an entry that
  misses commits, or shows commits the query must not see, is not served: the read goes to the
  database and the result is cached under the query's list when that is newer than what the
  cache holds (the cache only moves forward).
- The table id from the snapshot is checked on every read: a table dropped and recreated under
  the same name is never served from the old table's entry.
- ``refresh()`` applies the notification log after the last applied event in ONE round trip.
  A write event carrying a transaction id is staged; the transaction's COMMIT_TXN publishes a
  new version (staged changes applied, write id marked committed); ABORT_TXN discards the stage.
  A transaction whose OPEN_TXN this cache did not see (it began before the cache, or in a gap)
  is not published but invalidates what it wrote (the stage may miss its earlier events). A
  change without a transaction (any change of an external table, DDL without a write id,
  create/drop of tables) invalidates the table's entries. A duplicate event (id already
  applied) is ignored. A gap in event ids (events lost or trimmed) invalidates EVERYTHING and
  forgets every stage: the missing events could have touched any table. Invalidated entries
  are reloaded lazily, by the next read that needs them.
- External tables carry no write ids: served for ``hive.metastore-cache-ttl`` after their load,
  and invalidated meanwhile by their events (eventual consistency, as in the document).
  ``hive.metastore-cache-ttl=0`` turns the cache off: every read goes to the database.
- ``hive.metastore-cache-scope=PARTITION`` caches partition lists only (tables are read from
  the database). ``hive.partition-versioning-enabled=false`` caches the partitions of managed
  tables without a version tag, like an external table's (TTL and events only): a commit by
  another application is then seen only after the TTL or the next ``refresh()``.
- ``hive.metastore-cache-maximum-size`` bounds the table entries and, separately, the cached
  partitions (counted one by one), LRU; a table with more partitions than that is not cached.

Guarantees (each tested): monotonic reads (a later snapshot never gets older data); read your
own writes (after its commit, the writer's next snapshot includes its write id, so a cached
entry without it is not fresh and the read goes to the database, before any ``refresh()``); no
stale read of a managed table (a snapshot that includes a commit is never served an entry read
or published without it); a query's snapshot holds for its whole run as long as the cache holds
a version fresh for it: the cache keeps the previous version of each entry next to the current
one, so one commit published meanwhile does not change what an older snapshot reads; once the
cache no longer holds such a version, the read goes to the database, which has no history and
returns its current (newer) state.

Limits: metadata is not MVCC in the database either (the document keeps HMS's behaviour): a
database read made under a snapshot can include changes committed after it, or written by a
still-open transaction, and is tagged with the query's snapshot all the same; the data layer
decides which files a snapshot sees by write id. Partitions rebuilt from events have no
statistics (see ``cache_events``). Changes to managed tables made without a write id are seen
by other applications after their ``refresh()`` only. Reads under a snapshot taken with
``txn_id`` (the writer's view of its own open transaction) are never cached.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from raptorx_py.cache_invalidations import METASTORE, JournalReader, journal_path
from raptorx_py.config.tiers import MetastoreCacheSettings
from raptorx_py.errors import MetastoreError
from raptorx_py.hive.model import EXTERNAL_TABLE, Partition, Table
from raptorx_py.metastore.cache_entries import CachedVersion, VersionedEntries
from raptorx_py.metastore.cache_events import (
    TXN_EVENTS,
    WRITE_EVENTS,
    PartitionList,
    apply_to_partitions,
    apply_to_table,
    mark_committed,
)
from raptorx_py.metastore.catalog import (
    MetastoreCatalog,
    NotificationEvent,
    QuerySnapshot,
    TableSnapshot,
    check_snapshot_table,
)
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.metastore.round_trips import counting_as
from raptorx_py.metastore.store import Metastore, backend_for_url
from raptorx_py.metrics import counters
from raptorx_py.names import parse_table_name

log = logging.getLogger(__name__)


def stored_id(table: Table) -> int:
    """The metastore id of a table read from the metastore: what a cached entry is tagged
    with, so that a dropped and recreated table of the same name is never served."""
    if table.id is None:
        raise MetastoreError(f"table {table.qualified_name} has no metastore id")
    return table.id


T = TypeVar("T")

#: What the background refresher's statements count as (``refresh()`` called directly counts
#: ``metastore.round_trips`` like any other statement).
REFRESH_ROUND_TRIPS = "metastore.refresh_round_trips"

#: Tables per snapshot statement while prewarming (the statement has one OR term per table).
PREWARM_SNAPSHOT_BATCH = 500


class CachedMetastore:
    """The versioned cache in front of one ``Metastore`` (see the module docstring).

    ``metastore``: a backend (``catalog.MetastoreCatalog``: a ``Metastore``, or a
    ``ThriftMetastore`` over a Hive Metastore; used as is; closed by ``close`` only with
    ``owns_metastore=True``) or a metastore URL (opened here and closed by ``close``).
    ``tier``: the cache's settings (``Settings.metastore_cache``).
    ``clock`` (seconds, monotonic) decides TTLs; tests inject a fake one. Thread-safe: reads,
    ``refresh`` and the background refresher may run
    concurrently (database reads happen outside the cache's lock).
    """

    def __init__(
        self,
        metastore: MetastoreCatalog | str,
        tier: MetastoreCacheSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        owns_metastore: bool | None = None,
    ):
        self._owns_metastore = (
            isinstance(metastore, str) if owns_metastore is None else owns_metastore
        )
        self.metastore: MetastoreCatalog = (
            Metastore(backend_for_url(metastore), txn_timeout=tier.txn_timeout)
            if isinstance(metastore, str)
            else metastore
        )
        self.tier = tier
        self._clock = clock
        self.ttl = tier.ttl
        self.enabled = self.ttl > 0
        self.caches_tables = tier.scope == "ALL"
        self.versioned_partitions = tier.partition_versioning_enabled
        self._lock = threading.RLock()
        self._refresh_lock = threading.Lock()
        self._tables = VersionedEntries(tier.maximum_size)
        self._partitions = VersionedEntries(tier.maximum_size)
        self._staged: dict[int, list[NotificationEvent]] = {}
        self._opened: set[int] = set()  # transactions whose OPEN_TXN was applied
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = 0
        # What `raptorx cache invalidate/clear` posted since this cache was created, applied
        # before every read (cache_invalidations: one stat when nothing is new).
        self._journal = JournalReader(journal_path(tier.journal_directory))
        #: Notified after every refresh (lets a caller wait for the background refresher).
        self.refreshed = threading.Condition()
        # Everything after this event is applied by refresh(); anything before it is already
        # in whatever a read loads from now on.
        self.last_event_id = self.metastore.current_notification_id() if self.enabled else 0
        #: False once the notification log is known to stay empty (a Hive Metastore without
        #: a notification listener): entries are then served for their TTL only.
        self.log_filled = True
        if self.enabled and self.metastore.snapshots_from_log and self.last_event_id == 0:
            self._check_log_filled()

    # -- the query's snapshot ---------------------------------------------------------------
    def snapshot(self, names: Iterable[str], txn_id: int | None = None) -> QuerySnapshot:
        """Id, type and ValidWriteIdList of each ``db.table``: one round trip, never cached.

        Over a Hive Metastore (no write ids: ``snapshots_from_log``), the round trip is the
        notification-log poll (``refresh``): a table whose entry survived it (and is within
        its TTL) is answered from the cache, the others are asked for."""
        self.apply_invalidations()
        if not (self.metastore.snapshots_from_log and self.enabled and txn_id is None):
            return QuerySnapshot(dict(self.metastore.table_snapshots(names, txn_id)), txn_id)
        self.refresh()
        tables: dict[str, TableSnapshot] = {}
        missing = []
        for name in dict.fromkeys(names):
            hit = self._lookup_by_age(self._tables, name) or self._lookup_by_age(
                self._partitions, name
            )
            if hit is None:
                missing.append(name)
            else:
                tables[name] = TableSnapshot(name, hit.table_id, EXTERNAL_TABLE, None)
        if missing:
            tables.update(self.metastore.table_snapshots(missing))
        return QuerySnapshot(tables, txn_id)

    def _check_log_filled(self) -> None:
        """An empty notification log on a metastore that holds tables: no listener fills it
        (said once, in the log); the cache then falls back to ``hive.metastore-cache-ttl``."""
        ms = self.metastore
        for db in ms.list_databases():
            if ms.list_tables(db):
                self.log_filled = False
                log.warning(
                    "the notification log of the metastore %s is empty though it holds "
                    "tables (database %s): no notification listener (DbNotificationListener) "
                    "is configured on it, so this cache sees other writers' changes only "
                    "when an entry's hive.metastore-cache-ttl (%gs) runs out",
                    ms.describe(),
                    db,
                    self.ttl,
                )
                counters.add("metastore_cache.empty_notification_log")
                return

    # -- reads ------------------------------------------------------------------------------
    def get_table(self, database: str, name: str, snapshot: QuerySnapshot | None = None) -> Table:
        """The table ``database.name`` as of ``snapshot`` (taken here, one round trip, when
        not given, unless a cached external table within its TTL can answer)."""
        key = f"{database}.{name}"
        self.apply_invalidations()
        if not self.enabled or not self.caches_tables:
            return check_snapshot_table(self.metastore.get_table(database, name), snapshot, key)
        if snapshot is None:
            hit = self._lookup_by_age(self._tables, key)
            if hit is not None:
                counters.add("metastore_cache.table_hits")
                return hit.value
            snapshot = self.snapshot([key])
        snap = snapshot.table(key)
        with self._lock:
            since = self._tables.generation()
            hit = self._tables.lookup(key, lambda v: self._serves(v, snap))
        if hit is not None:
            counters.add("metastore_cache.table_hits")
            return hit.value
        counters.add("metastore_cache.table_misses")
        table = check_snapshot_table(self.metastore.get_table(database, name), snapshot, key)
        if snapshot.txn_id is None:
            with self._lock:
                self._tables.install(
                    key,
                    CachedVersion(table, stored_id(table), snap.write_ids, self._clock()),
                    since,
                )
        return table

    def get_table_and_partitions(self, database: str, name: str) -> tuple[Table, list[Partition]]:
        """The table ``database.name`` and its partitions (none for an unpartitioned table) as
        of one snapshot: no round trip when a cached external table and its partitions are
        within their TTL, else the one snapshot ``get_table`` alone would take, serving both."""
        key = f"{database}.{name}"
        self.apply_invalidations()
        snapshot = None
        if self.enabled and self.caches_tables:
            hit = self._lookup_by_age(self._tables, key)
            if hit is None or (
                hit.value.partition_keys
                and self._lookup_by_age(self._partitions, key, hit.value.id) is None
            ):
                snapshot = self.snapshot([key])
        table = self.get_table(database, name, snapshot)
        partitions = self.list_partitions(table, snapshot) if table.partition_keys else []
        return table, partitions

    def list_partitions(
        self, table: Table, snapshot: QuerySnapshot | None = None
    ) -> list[Partition]:
        """The partitions of ``table`` as of ``snapshot`` (as ``get_table``), in the
        metastore's order. The list is the caller's; the partitions are shared (read-only)."""
        key = table.qualified_name
        self.apply_invalidations()
        if not self.enabled:
            check_snapshot_table(table, snapshot, key)
            return self.metastore.list_partitions(table)
        if snapshot is None:
            hit = self._lookup_by_age(self._partitions, key, table.id)
            if hit is not None:
                counters.add("metastore_cache.partition_hits")
                return list(hit.value.partitions)
            snapshot = self.snapshot([key])
        snap = snapshot.table(key)
        check_snapshot_table(table, snapshot, key)
        with self._lock:
            since = self._partitions.generation()
            hit = self._partitions.lookup(key, lambda v: self._serves(v, snap))
        if hit is not None:
            counters.add("metastore_cache.partition_hits")
            return list(hit.value.partitions)
        counters.add("metastore_cache.partition_misses")
        partitions = self.metastore.list_partitions(table)
        if snapshot.txn_id is None:
            tag = snap.write_ids if self.versioned_partitions else None
            value = PartitionList(table.partition_keys, tuple(partitions))
            with self._lock:
                self._partitions.install(
                    key,
                    CachedVersion(
                        value, stored_id(table), tag, self._clock(), max(1, len(partitions))
                    ),
                    since,
                )
        return partitions

    def _serves(self, version: CachedVersion, snap: TableSnapshot) -> bool:
        if version.table_id != snap.table_id:
            return False
        if version.write_ids is None:
            return self._clock() - version.loaded_at < self.ttl
        return snap.write_ids is not None and version.write_ids.is_fresh_for(snap.write_ids)

    def _lookup_by_age(
        self, entries: VersionedEntries, key: str, table_id: int | None = None
    ) -> CachedVersion | None:
        """An unversioned version within its TTL (all a read without a snapshot can use)."""
        with self._lock:
            return entries.lookup(
                key,
                lambda v: (
                    v.write_ids is None
                    and (table_id is None or v.table_id == table_id)
                    and self._clock() - v.loaded_at < self.ttl
                ),
            )

    # -- the notification log ------------------------------------------------------------------
    def refresh(self) -> int:
        """Apply the notification log after ``last_event_id``: one round trip. Returns how
        many events were applied."""
        if not self.enabled:
            return 0
        with self._refresh_lock:
            events = self.metastore.notifications_after(self.last_event_id)
            applied = self.apply_events(events)
        with self.refreshed:
            self.refreshes += 1
            self.refreshed.notify_all()
        return applied

    def apply_events(self, events: Sequence[NotificationEvent]) -> int:
        """Apply ``events`` (in id order), as ``refresh`` does with what it fetched."""
        applied = 0
        with self._lock:
            for e in events:
                if e.event_id <= self.last_event_id:
                    counters.add("metastore_cache.duplicate_events")
                    continue
                if e.event_id != self.last_event_id + 1:
                    log.warning(
                        "notification log gap: event %d follows %d; the metastore "
                        "cache reloads everything",
                        e.event_id,
                        self.last_event_id,
                    )
                    counters.add("metastore_cache.log_gaps")
                    self.invalidate_all()
                self._apply(e)
                self.last_event_id = e.event_id
                applied += 1
        counters.add("metastore_cache.events_applied", applied)
        return applied

    def _apply(self, e: NotificationEvent) -> None:
        kind = e.event_type
        if kind in TXN_EVENTS:
            if e.txn_id is None:  # a damaged log row: nothing to stage or publish by
                return
            if kind == "OPEN_TXN":
                self._opened.add(e.txn_id)
            elif kind == "COMMIT_TXN":
                self._publish(e.txn_id, e)
            else:
                # The stage goes; published entries stay: their committed write ids are unchanged.
                self._staged.pop(e.txn_id, None)
                self._opened.discard(e.txn_id)
        elif kind in WRITE_EVENTS and e.txn_id is not None:
            self._staged.setdefault(e.txn_id, []).append(e)
        elif kind == "DROP_DATABASE":
            for entries in (self._tables, self._partitions):
                for key in entries.keys():
                    if key.startswith(f"{e.db_name}."):
                        self._invalidate(key)
        elif e.db_name is not None and e.table_name is not None and kind != "ALLOC_WRITE_ID":
            # A change outside any transaction (external tables, DDL without a write id).
            self._invalidate(f"{e.db_name}.{e.table_name}")

    def _publish(self, txn_id: int, commit: NotificationEvent) -> None:
        staged = self._staged.pop(txn_id, [])
        complete = txn_id in self._opened
        self._opened.discard(txn_id)
        for written in commit.message.get("writeIds") or ():
            key = f"{written['db']}.{written['table']}"
            events = [s for s in staged if f"{s.db_name}.{s.table_name}" == key]
            for entries in (self._tables, self._partitions):
                self._publish_entry(entries, key, written["writeId"], events, complete)

    def _publish_entry(
        self,
        entries: VersionedEntries,
        key: str,
        write_id: int,
        events: list[NotificationEvent],
        complete: bool,
    ) -> None:
        current = entries.current(key)
        if current is None:
            return
        if current.write_ids is not None and current.write_ids.is_visible(write_id):
            return  # read from the database after this commit: it already holds the change
        table_ids = {e.message.get("tableId") for e in events}
        if current.write_ids is None or not complete or table_ids - {current.table_id}:
            entries.invalidate(key)
            counters.add("metastore_cache.invalidations")
            return
        value: PartitionList | Table | None
        if isinstance(current.value, PartitionList):
            value = apply_to_partitions(current.value, events)
            weight = max(1, len(value.partitions)) if value is not None else 0
        else:
            value, weight = apply_to_table(current.value, events), 1
        if value is None:
            entries.invalidate(key)
            counters.add("metastore_cache.invalidations")
            return
        entries.push(
            key,
            CachedVersion(
                value,
                current.table_id,
                mark_committed(current.write_ids, write_id),
                self._clock(),
                weight,
            ),
        )
        counters.add("metastore_cache.published")

    def _invalidate(self, key: str) -> None:
        dropped = self._tables.invalidate(key) | self._partitions.invalidate(key)
        if dropped:
            counters.add("metastore_cache.invalidations")

    def invalidate_table(self, name: str) -> bool:
        """Forget the entries of ``"db.table"`` (its table and its partition list, every
        version): the next read loads them from the metastore. True when it held any."""
        with self._lock:
            dropped = self._tables.invalidate(name) | self._partitions.invalidate(name)
        if dropped:
            counters.add("metastore_cache.invalidations")
        return bool(dropped)

    def apply_invalidations(self) -> None:
        """Apply what ``raptorx cache invalidate`` / ``clear`` posted to the node's journal
        since the last call (``cache_invalidations``), from any process."""
        for inv in self._journal.poll():
            if not inv.covers(METASTORE):
                continue
            if inv.table is None:
                self.invalidate_all()
                counters.add("metastore_cache.invalidations")
            else:
                self.invalidate_table(inv.table)

    def invalidate_all(self) -> None:
        """Forget every entry and every stage (reads reload what they need)."""
        with self._lock:
            self._tables.clear()
            self._partitions.clear()
            self._staged.clear()
            self._opened.clear()

    # -- start-up and the background refresher ----------------------------------------------
    def prewarm(self) -> int:
        """Load every table and its partitions, within ``hive.metastore-cache-maximum-size``
        (tables in name order; a table whose partitions do not fit the remaining budget is
        skipped whole). As the document's bootstrap: no query drives this, so the
        ValidWriteIdLists are taken here, once for all tables (in batches), BEFORE the
        entries are read, so an entry is never older than its tag (a change in between only
        makes a later read miss). Returns the number of entries loaded."""
        if not self.enabled:
            return 0
        ms = self.metastore
        names = [f"{db}.{t}" for db in ms.list_databases() for t in ms.list_tables(db)]
        names = names[: self.tier.maximum_size]
        with self._lock:
            since = self._tables.generation(), self._partitions.generation()
        snaps: dict[str, TableSnapshot] = {}
        for i in range(0, len(names), PREWARM_SNAPSHOT_BATCH):
            snaps.update(ms.table_snapshots(names[i : i + PREWARM_SNAPSHOT_BATCH]))
        sizes = ms.partition_counts()
        budget = self._partitions.max_weight
        loaded = 0
        for name in names:
            snap = snaps[name]
            table = ms.get_table(*parse_table_name(name, default_database=None))
            if table.id != snap.table_id:
                continue  # dropped and recreated meanwhile: left to the first query
            if self.caches_tables:
                with self._lock:
                    loaded += self._tables.install(
                        name,
                        CachedVersion(table, stored_id(table), snap.write_ids, self._clock()),
                        since[0],
                    )
            count = sizes.get(table.id, 0)
            if not table.is_partitioned or max(1, count) > budget:
                continue
            partitions = ms.list_partitions(table)
            tag = snap.write_ids if self.versioned_partitions else None
            with self._lock:
                if self._partitions.install(
                    name,
                    CachedVersion(
                        PartitionList(table.partition_keys, tuple(partitions)),
                        table.id,
                        tag,
                        self._clock(),
                        max(1, len(partitions)),
                    ),
                    since[1],
                ):
                    budget -= max(1, len(partitions))
                    loaded += 1
        counters.add("metastore_cache.prewarmed", loaded)
        return loaded

    def start(self) -> None:
        """Run ``refresh()`` every ``hive.metastore-refresh-interval`` in a daemon thread."""
        if not self.enabled or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._refresh_loop,
            daemon=True,
            name=f"metastore-cache-refresh {self.metastore.describe()}",
        )
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()

    def close(self) -> None:
        self.stop()
        if self._owns_metastore:
            self.metastore.close()

    def __enter__(self) -> CachedMetastore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.tier.refresh_interval):
            try:
                # Counted apart (``metastore.refresh_round_trips``): a timer's statements are
                # no query's, and would blur the per-query ``metastore.round_trips``.
                with counting_as(REFRESH_ROUND_TRIPS):
                    self.refresh()
            except MetastoreError as e:  # the database is away: keep serving, try again
                log.warning("metastore cache refresh failed (will retry): %s", e)

    # -- what it holds (tests, diagnostics) -------------------------------------------------
    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "tables": len(self._tables),
                "partition_lists": len(self._partitions),
                "partitions": self._partitions.weight,
                "evictions": self._tables.evictions + self._partitions.evictions,
                "staged_transactions": len(self._staged),
                "last_event_id": self.last_event_id,
            }


def partition_counts(ms: MetastoreCatalog) -> dict[int, int]:
    """``{table id: number of partitions}`` (one round trip on a database)."""
    return ms.partition_counts()


# -- one cache per process per metastore --------------------------------------------------------
_registry: dict[MetastoreCacheSettings, CachedMetastore] = {}
_registry_lock = threading.Lock()
_registry_pid = os.getpid()
#: Caches inherited through fork: their connection and thread belong to the parent; kept
#: referenced (never closed or collected here) so the child does not close the parent's
#: database connection.
_inherited: list[CachedMetastore] = []


def cached_metastore_for(tier: MetastoreCacheSettings, *, start: bool = True) -> CachedMetastore:
    """This process's cache for the tier's settings (``Settings.metastore_cache``: one cache
    per equal slice, so per metastore connection and cache configuration), created on first
    use (and prewarmed then, with ``hive.metastore-cache-prewarm``) and, with ``start``,
    refreshed in the background. Module state on purpose: Spark reuses the driver's Python
    worker from query to query, so the cache outlives a query. A forked child builds its
    own."""
    global _registry_pid
    key = tier
    with _registry_lock:
        if _registry_pid != os.getpid():
            _inherited.extend(_registry.values())
            _registry.clear()
            _registry_pid = os.getpid()
        cache = _registry.get(key)
        if cache is None:
            cache = CachedMetastore(open_catalog(tier.connection), tier, owns_metastore=True)
            if tier.prewarm:
                try:
                    cache.prewarm()
                except MetastoreError as e:  # a cold cache still answers every query
                    log.warning("metastore cache prewarm failed; loading on demand: %s", e)
            if start:
                cache.start()
            _registry[key] = cache
        return cache


def with_cached_metastore(tier: MetastoreCacheSettings, read: Callable[[CachedMetastore], T]) -> T:
    """``read(cache)`` through this process's cache for ``tier`` (``Settings.metastore_cache``);
    when the cache's database connection has failed (server restarted, connection dropped:
    an ``OperationalError`` of the driver), the cache is discarded and ``read`` runs once
    more through a new one (counted as ``metastore_cache.reconnects``). The cache outlives
    queries, so without this a dead connection would fail every later query of the process.
    ``read`` must be a read (it may run twice)."""
    cache = cached_metastore_for(tier)
    try:
        return read(cache)
    except MetastoreError as e:
        if not _connection_failed(e):
            raise
        log.warning("metastore connection failed (%s); reconnecting once", e)
        discard_cached_metastore(cache)
        counters.add("metastore_cache.reconnects")
        return read(cached_metastore_for(tier))


def _connection_failed(e: MetastoreError) -> bool:
    import sqlite3

    types: list[type] = [sqlite3.OperationalError]
    try:
        import psycopg

        types.append(psycopg.OperationalError)
    except ImportError:  # PostgreSQL support not installed
        pass
    try:
        from thrift.transport.TTransport import TTransportException

        types.append(TTransportException)
    except ImportError:  # the Thrift client is not installed
        pass
    return isinstance(e.__cause__, tuple(types))


def discard_cached_metastore(cache: CachedMetastore) -> None:
    """Forget and close ``cache`` (the next ``cached_metastore_for`` builds a new one)."""
    with _registry_lock:
        for key, held in list(_registry.items()):
            if held is cache:
                del _registry[key]
    try:
        cache.close()
    except Exception:  # noqa: BLE001 - its connection is broken already
        log.debug("closing a discarded metastore cache failed", exc_info=True)


def close_cached_metastores() -> None:
    """Stop and close every cache of this process (tests; interpreter shutdown)."""
    with _registry_lock:
        caches = list(_registry.values()) if _registry_pid == os.getpid() else []
        _registry.clear()
    for cache in caches:
        cache.close()
