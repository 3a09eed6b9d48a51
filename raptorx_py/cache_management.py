"""Managing this node's cache tiers from outside a query: look (``cache_stats``), clear
(``clear_caches``), invalidate one table or partition (``invalidate_table``) and warm one
(``warm_table``), without Spark. ``raptorx cache ...`` is this module on the command line.

The tiers and where each lives on a node (and how these operations reach it):

- ``metastore``, ``listing``: the memory of each planning process (the versioned metastore
  cache, the file-listing cache); reached by the node's invalidation journal
  (``cache_invalidations``).
- ``footer``: the memory of each Python worker (the journal) and
  ``<cache.base-directory>/footers`` (removed here).
- ``block``: ``<cache.base-directory>/blocks``, removed here under the block index's write
  lock.
- ``fragment``: ``fragment-result-cache.base-directory``, removed here (file, then index row).

Contract:
- Whatever process filled an entry, it is reached: the disk tiers are shared files, removed
  the way each tier removes its own (a reader holding an entry open reads it whole; no
  reader ever sees a torn entry, since entries are only ever published whole and unlinked);
  the memory tiers apply the journal before they next serve (a scan already planned reads
  what its plan listed).
- An invalidation only costs misses: the next query reads from the store and fills again.
- ``invalidate_table`` reaches the entries of the files the table (or partition) holds
  now, every version of each (the disk tiers' keys start with a digest of the file's URL):
  a file removed from storage since is not listed, and its entries stay until evicted
  (no query can read them: no listing names that file any more).
- ``warm_table`` reads through the footer and block caches what a query reading
  ``columns`` under ``where`` would read: the files its plan lists (partitions pruned on
  values and trusted statistics), the row groups their footers' statistics do not prune,
  and those columns' chunks. It fills no fragment result: a fragment's key holds the exact
  filters Spark pushes (it adds ``IS NOT NULL`` to comparisons) and the output schema, so a
  result computed here would seldom be the one a query asks for.
- Nothing here creates a tier's directory: a tier that has none on this node is reported
  as empty and skipped.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from raptorx_py import cache_invalidations as journal
from raptorx_py.cache.block_cache import BlockCacheFileSystem
from raptorx_py.cache.block_store import INDEX_FILE as BLOCK_INDEX
from raptorx_py.cache.block_store import BlockStore, read_only_usage
from raptorx_py.cache.footer_cache import (
    FooterCache,
    footer_cache_directory,
    read_only_disk_usage,
)
from raptorx_py.cache.fragment_cache import (
    ENTRIES_DIR,
    FragmentCache,
    fragment_cache_directory,
    open_fragment_cache,
)
from raptorx_py.cache.fragment_cache import read_only_stats as read_only_fragment_stats
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.datasource.reading.scan import raw_batches
from raptorx_py.datasource.reading.storage_tiers import StorageTiers
from raptorx_py.errors import ConfigError, NoSuchObjectError, SchemaError
from raptorx_py.hive.model import Partition, Table
from raptorx_py.hive.partition_names import partition_name, unescape_partition_value
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.metrics import MetricsSink, counters, diff
from raptorx_py.names import parse_table_name
from raptorx_py.storage.fs import filesystem_for, join_url, split_url
from raptorx_py.storage.hive_layout import list_data_files
from raptorx_py.where_clause import parse_where

TIERS = journal.TIERS

#: The counters of each tier: (hits, misses, evictions), each a sum of these names.
_TIER_COUNTERS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "metastore": (
        ("metastore_cache.table_hits", "metastore_cache.partition_hits"),
        ("metastore_cache.table_misses", "metastore_cache.partition_misses"),
        ("metastore_cache.invalidations",),
    ),
    "listing": (("listing_cache.hits",), ("listing_cache.misses",), ("listing_cache.evictions",)),
    "footer": (
        ("footer_cache.hits_memory", "footer_cache.hits_disk"),
        ("footer_cache.misses",),
        ("footer_cache.evictions", "footer_cache.disk_evictions"),
    ),
    "block": (("block_cache.hits",), ("block_cache.misses",), ("block_cache.evictions",)),
    "fragment": (
        ("fragment_cache.hits",),
        ("fragment_cache.misses",),
        ("fragment_cache.evicted", "fragment_cache.expired"),
    ),
}


@dataclass
class TierStats:
    """One tier on this node. ``entries`` / ``bytes`` None: held in other processes'
    memory, not countable from here. ``hits`` / ``misses`` / ``evictions`` (for the
    metastore cache: invalidations) are the metrics sink's totals since it was started or
    cleared, None without one (``metrics.directory`` unset)."""

    tier: str
    enabled: bool
    location: str
    entries: int | None
    bytes: int | None
    limit: int | None
    limit_unit: str
    hits: int | None = None
    misses: int | None = None
    evictions: int | None = None
    #: Why ``entries`` / ``bytes`` (or the counters) could not be read, in one line.
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cache_stats(settings: Settings) -> list[TierStats]:
    """Every tier on this node (see ``TierStats``), in ``TIERS`` order, read without writing
    anything (no tier is opened, so no recovery, eviction or file creation runs): a tier
    whose files cannot be read says why in its ``note``."""
    totals: dict[str, int] | None = None
    counters_note = None
    if settings.metrics_directory:
        try:
            totals = MetricsSink(settings.metrics_directory).totals()
        except (OSError, sqlite3.Error) as e:
            counters_note = f"counters not read from {settings.metrics_directory}: {_why(e)}"
    memory = "memory of each planning process (the driver's, with the native jar)"
    out = [
        TierStats(
            "metastore",
            settings.metastore_cache_ttl > 0,
            memory,
            None,
            None,
            settings.metastore_cache_maximum_size,
            "entries",
        ),
        TierStats(
            "listing",
            bool(settings.file_status_cache_tables.strip()),
            memory,
            None,
            None,
            settings.file_status_cache_size,
            "files",
        ),
    ]
    disk_tiers: list[tuple[str, bool, str, Callable[[str], tuple[int, int]], int]] = [
        (
            "footer",
            settings.parquet_metadata_cache_enabled,
            footer_cache_directory(settings.footer_cache),
            read_only_disk_usage,
            settings.cache_max_size,
        ),
        (
            "block",
            settings.cache_enabled,
            _block_directory(settings),
            read_only_usage,
            settings.cache_max_size,
        ),
        (
            "fragment",
            settings.fragment_cache_enabled,
            fragment_cache_directory(settings.fragment_cache),
            _fragment_usage,
            settings.fragment_cache_max_size,
        ),
    ]
    for tier, enabled, directory, usage, limit in disk_tiers:
        note = None
        entries: int | None
        size: int | None
        try:
            entries, size = usage(directory)
        except (OSError, sqlite3.Error) as e:
            entries = size = None
            note = f"{tier}: stats not read from {directory}: {_why(e)}"
        out.append(TierStats(tier, enabled, directory, entries, size, limit, "bytes", note=note))
    if totals is not None:
        for stats in out:
            hits, misses, evictions = _TIER_COUNTERS[stats.tier]
            stats.hits = sum(totals.get(n, 0) for n in hits)
            stats.misses = sum(totals.get(n, 0) for n in misses)
            stats.evictions = sum(totals.get(n, 0) for n in evictions)
    elif counters_note is not None:
        out[0].note = counters_note
    return out


def _fragment_usage(directory: str) -> tuple[int, int]:
    stats = read_only_fragment_stats(directory)
    return stats["entries"], stats["bytes"]


def _why(error: BaseException) -> str:
    """One line for ``error``: its kind and message, naming the file if it has one."""
    return f"{type(error).__name__}: {error}".splitlines()[0]


@dataclass
class ClearReport:
    """What ``clear_caches`` removed: entries per disk tier; the memory tiers it posted to
    the journal (they drop their entries when next asked for)."""

    removed: dict[str, int] = field(default_factory=dict)
    posted: tuple[str, ...] = ()


def clear_caches(settings: Settings, tiers: Iterable[str] = TIERS) -> ClearReport:
    """Empty ``tiers`` on this node, whatever process filled them."""
    tiers = _checked_tiers(tiers)
    report = ClearReport()
    if "footer" in tiers:
        footers = _footer_cache(settings)
        report.removed["footer"] = footers.clear() if footers is not None else 0
    if "block" in tiers:
        blocks = _block_store(settings)
        report.removed["block"] = 0
        if blocks is not None:
            try:
                report.removed["block"] = blocks.drop_prefix("")
            finally:
                blocks.close()
    if "fragment" in tiers:
        report.removed["fragment"] = _with_fragment_cache(settings, FragmentCache.clear)
    # The journal last, as in ``invalidate_table``: no memory refills from the disk tiers.
    memory = tuple(t for t in journal.MEMORY_TIERS if t in tiers)
    if memory:
        journal.post(
            journal.journal_path(settings.cache_base_directory), journal.Invalidation(memory)
        )
        report.posted = memory
    return report


@dataclass
class InvalidationReport:
    """What ``invalidate_table`` reached: the table, the partitions (names) and the data
    files concerned, and the entries removed per disk tier."""

    table: str
    partitions: list[str]
    files: int
    removed: dict[str, int]
    posted: tuple[str, ...]


def invalidate_table(
    settings: Settings, table_name: str, partition: str | None = None
) -> InvalidationReport:
    """Drop every tier's entries of ``table_name`` (``db.t``), or of its partitions matching
    ``partition`` (``k=v[/k2=v2]``, any subset of the keys): its metastore entries, its
    listings, and the footer, block and fragment entries of the files it holds now."""
    with open_catalog(settings.metastore_connection) as ms:
        table = ms.get_table(*parse_table_name(table_name))
        partitions = ms.list_partitions(table) if table.is_partitioned else []
    if partition is not None:
        if not table.is_partitioned:
            raise SchemaError(f"--partition: {table.qualified_name} is not partitioned")
        partitions = matching_partitions(table, partitions, partition)
    locations = [p.location for p in partitions] if table.is_partitioned else [table.location]
    files = _data_file_urls(settings, locations)
    report = InvalidationReport(
        table.qualified_name,
        [partition_name(table.partition_keys, p.values) for p in partitions],
        len(files),
        {},
        journal.MEMORY_TIERS,
    )
    footers = _footer_cache(settings)
    report.removed["footer"] = footers.invalidate(files) if footers is not None else 0
    report.removed["block"] = _invalidate_blocks(settings, files)
    report.removed["fragment"] = _with_fragment_cache(
        settings, lambda cache: cache.invalidate(files)
    )
    # The journal last: a worker that drops a footer from its memory must not find the old
    # one on disk again (the disk entries are gone by now).
    journal.post(
        journal.journal_path(settings.cache_base_directory),
        journal.Invalidation(
            journal.MEMORY_TIERS,
            table.qualified_name,
            tuple(locations) if partition is not None else (),
            tuple(files),
        ),
    )
    counters.add("cache_management.invalidations")
    return report


def matching_partitions(table: Table, partitions: Sequence[Partition], spec: str) -> list:
    """The partitions of ``table`` whose values match ``spec`` (``k=v[/k2=v2]``, values
    escaped as in directory names; any subset of the keys). Raises ``SchemaError`` for a
    malformed spec or a key the table lacks, ``NoSuchObjectError`` when none matches."""
    keys = [k.name.lower() for k in table.partition_keys]
    wanted: dict[int, str | None] = {}
    for part in spec.strip("/").split("/"):
        key, sep, value = part.partition("=")
        column = unescape_partition_value(key)
        if not sep or not key or column is None:
            raise SchemaError(
                f"partition spec '{spec}' of {table.qualified_name} is not of the form "
                f"k1=v1[/k2=v2...]"
            )
        if column.lower() not in keys:
            names = ", ".join(k.name for k in table.partition_keys)
            raise SchemaError(
                f"partition spec '{spec}' names '{column}', which is not a partition key of "
                f"{table.qualified_name} (its keys: {names})"
            )
        wanted[keys.index(column.lower())] = unescape_partition_value(value)
    found = [p for p in partitions if all(p.values[i] == v for i, v in wanted.items())]
    if not found:
        raise NoSuchObjectError(
            "partition",
            f"{table.qualified_name}/{spec}",
            (partition_name(table.partition_keys, p.values) for p in partitions),
            hint=f"raptorx table show {table.qualified_name} --partitions lists them all",
        )
    return found


@dataclass
class WarmReport:
    """What ``warm_table`` read: files, row groups and column chunks, the bytes those chunks
    span, and what the tiers counted meanwhile (``block_cache.*``, ``footer_cache.*``)."""

    table: str
    files: int
    row_groups: int
    row_groups_pruned: int
    column_chunks: int
    bytes_read: int
    counted: dict[str, int]

    @property
    def bytes_from_store(self) -> int:
        return self.counted.get("block_cache.bytes_from_remote", 0)

    @property
    def footers_loaded(self) -> int:
        return self.counted.get("footer_cache.misses", 0)


def warm_table(
    settings: Settings,
    table_name: str,
    *,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> WarmReport:
    """Fill the footer and block caches with what a query reading ``columns`` (default:
    every data column) of ``table_name`` under ``where`` (``where_clause``) reads.
    ``progress(done, total)`` is called with bytes after each file."""
    if not (settings.cache_enabled or settings.parquet_metadata_cache_enabled):
        raise ConfigError(
            "nothing to warm: the block cache (cache.enabled) and the footer cache "
            "(hive.parquet.metadata-cache-enabled) are both off",
            source="raptorx cache warm",
        )
    # Totals, not the undrained counts: a flush (the driver planner's timer) may drain them.
    before = counters.totals()
    with open_catalog(settings.metastore_connection) as ms:
        table = ms.get_table(*parse_table_name(table_name))
        types = {c.name: c.type for c in (*table.columns, *table.partition_keys)}
        predicates = parse_where(where, types) if where else []
        chosen = _chosen_columns(table, columns)
        plan = plan_scan(ms, settings, table, chosen, predicates)
    data_predicates = plan.data_predicates
    files = {s.url: s for s in plan.splits}  # pieces of one file: read it once
    total = sum(s.size for s in files.values())
    done = groups_read = groups_pruned = chunks = span = 0
    # The scan's tiers: a tier that cannot be set up is left out (counted), never a failure.
    tiers = StorageTiers.for_settings(settings)
    needed = [c.name for c in chosen]
    for split in files.values():
        g, p, c, b = _warm_file(settings, tiers, table, split, needed, data_predicates)
        groups_read, groups_pruned, chunks, span = (
            groups_read + g,
            groups_pruned + p,
            chunks + c,
            span + b,
        )
        done += split.size
        if progress is not None:
            progress(done, total)
    counted = {
        k: v
        for k, v in diff(counters.totals(), before).items()
        if k.startswith(("block_cache.", "footer_cache."))
    }
    counters.add("cache_management.files_warmed", len(files))
    return WarmReport(
        table.qualified_name, len(files), groups_read, groups_pruned, chunks, span, counted
    )


def _warm_file(
    settings, tiers: StorageTiers, table: Table, split, needed: list[str], data_predicates
) -> tuple[int, int, int, int]:
    """Read one whole file's footer and the ``needed`` columns of the row groups
    ``data_predicates`` leave, as the scan reads them (``scan.raw_batches``, through the
    same tiers, with the same rule that a cache fault never fails the read): ``(row groups
    read, row groups pruned, column chunks, bytes those chunks span)``."""
    seen: list = []

    def report(md, groups, pruned) -> None:
        seen[:] = [md, groups, pruned]

    whole = replace(split, offset=0, length=None)
    for _ in raw_batches(whole, table, needed, data_predicates, settings, tiers, report):
        pass
    if not seen:
        return 0, 0, 0, 0
    md, groups, pruned = seen
    names = {n.lower() for n in needed}
    chunks = span = 0
    for rg in groups:
        group = md.row_group(rg)
        for ci in range(group.num_columns):
            chunk = group.column(ci)
            if chunk.path_in_schema.split(".")[0].lower() in names:
                chunks += 1
                span += chunk.total_compressed_size
    return len(groups), pruned, chunks, span


def _chosen_columns(table: Table, columns: Sequence[str] | None):
    if not columns:
        return table.columns
    by_name = {c.name.lower(): c for c in table.columns}
    keys = {k.name.lower() for k in table.partition_keys}
    chosen = []
    for name in columns:
        column = by_name.get(name.strip().lower())
        if column is None and name.strip().lower() in keys:
            continue  # a partition key is in no file: nothing to read for it
        if column is None:
            raise SchemaError(
                f"--columns names '{name}', which {table.qualified_name} does not have. "
                f"Columns: {', '.join(c.name for c in table.columns)}"
            )
        chosen.append(column)
    return tuple(chosen)


# -- the tiers, opened here only where they already exist ------------------------------------


def _checked_tiers(tiers: Iterable[str]) -> tuple[str, ...]:
    tiers = tuple(tiers)
    unknown = [t for t in tiers if t not in TIERS]
    if unknown:
        raise ConfigError(
            f"unknown cache tier {', '.join(repr(t) for t in unknown)}; tiers: {', '.join(TIERS)}",
            source="--tier",
        )
    return tiers


def _footer_cache(settings: Settings) -> FooterCache | None:
    directory = footer_cache_directory(settings.footer_cache)
    if not os.path.isdir(directory):
        return None
    return FooterCache(
        directory,
        max_bytes=settings.parquet_metadata_cache_size,
        ttl=settings.parquet_metadata_cache_ttl,
        max_disk_bytes=settings.cache_max_size,
        group_shared=settings.cache_group_shared,
    )


def _block_directory(settings: Settings) -> str:
    return os.path.join(
        os.path.abspath(os.path.expanduser(settings.cache_base_directory)), "blocks"
    )


def _block_store(settings: Settings):
    """The node's block store (its start-up recovery runs, as in any new worker), or None
    when it has no index yet."""
    directory = _block_directory(settings)
    if not os.path.exists(os.path.join(directory, BLOCK_INDEX)):
        return None
    store = BlockStore(
        directory, max_size=settings.cache_max_size, group_shared=settings.cache_group_shared
    )
    return store if store.enabled else None


def _invalidate_blocks(settings: Settings, urls: Sequence[str]) -> int:
    """Drop the blocks of ``urls``: each through a block cache over its own filesystem
    (the protocol is in the key)."""
    if not urls or not os.path.exists(os.path.join(_block_directory(settings), BLOCK_INDEX)):
        return 0
    dropped = 0
    by_filesystem: dict[int, tuple[Any, list[str]]] = {}
    for url in urls:
        target, _ = filesystem_for(url, settings)
        by_filesystem.setdefault(id(target), (target, []))[1].append(url)
    for target, group in by_filesystem.values():
        fs = BlockCacheFileSystem(
            target,
            _block_directory(settings),
            block_size=settings.cache_block_size,
            max_size=settings.cache_max_size,
            group_shared=settings.cache_group_shared,
        )
        dropped += fs.invalidate(group)
        fs.store.close()
    return dropped


def _fragment_cache(settings: Settings) -> FragmentCache | None:
    directory = fragment_cache_directory(settings.fragment_cache)
    if not os.path.isdir(os.path.join(directory, ENTRIES_DIR)):
        return None
    return open_fragment_cache(settings.fragment_cache)


def _with_fragment_cache(settings: Settings, use: Callable[[FragmentCache], int]) -> int:
    """``use(cache)`` on the node's fragment cache, closed after; 0 when it has none."""
    cache = _fragment_cache(settings)
    if cache is None:
        return 0
    try:
        return use(cache)
    finally:
        cache.close()


def _data_file_urls(settings: Settings, locations: Sequence[str]) -> list[str]:
    """Every data file under ``locations`` as planning names it (a managed table's ACID
    directories included, whichever snapshot sees them)."""
    urls = []
    for location in locations:
        fs, path = filesystem_for(location, settings)
        scheme = split_url(location)[0]
        urls += [join_url(scheme, f.path) for f in list_data_files(fs, path, location)]
    return urls
