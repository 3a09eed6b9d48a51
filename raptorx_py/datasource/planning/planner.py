"""Scan planning on the driver: which partitions and files a query must read.

Given a table, the requested columns and the pushed predicates, ``plan_scan``
1. prunes partitions on their values (exactly: every predicate on a partition key),
2. lists the surviving partitions' files (in parallel: each listing is a round trip; or,
   when that takes fewer round trips, one listing of the table's location: ``TableRoot``),
   through the file-listing cache for sealed partitions of the tables
   ``hive.file-status-cache-tables`` names (``cache.listing_cache``); a MANAGED table's
   directories are read as its snapshot allows (``storage.acid_layout``: the newest committed
   ``base_``, committed ``delta_`` above it), and their raw listings are cacheable sealed or
   not, the snapshot filtering them afterwards,
3. prunes partitions on their min/max/null statistics (``hive.partition-statistics-based-
   optimization-enabled``) and drops the predicates they make always true, only where
   ``stats_trusted`` says the statistics describe what is read: an external partition's
   current listing is the file set they were computed from (so it is listed first), a
   managed partition's last write is visible to the snapshot (so one pruned is never
   listed),
4. makes one split per data file, carrying the file's identity (path, size and version:
   ``storage.file_versions``; its ETag when the store has one) and
   the partition's values, cutting a file bigger than a task's share of the scan into byte
   ranges (``cut_files``: a reader of a range reads the row groups whose middle lies in it),
   and
5. packs splits into tasks (``pack_splits``): Spark pays a fixed cost per task of a Python
   source, so small files are read several to a task, up to ``hive.max-split-size`` bytes,
   in whole waves of ``hive.min-split-count`` (the task slots) tasks of even size; with
   ``hive.node-selection-strategy=SOFT_AFFINITY`` and live executors given, splits are first
   grouped by the executor their file prefers (``scheduling.affinity``) and each group packed
   on its own, so a task's splits share one preferred executor (``ScanPlan.locations``).

A partition pruned by value, or a managed one pruned by statistics, is never listed; no pruned
partition's files are ever opened. Usable without Spark.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from raptorx_py import predicates as preds
from raptorx_py.cache.listing_cache import is_sealed, listing_cache_for, partition_version
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planning.query_snapshots import query_values
from raptorx_py.hive.column_types import decode_value
from raptorx_py.hive.model import EXTERNAL_TABLE, Column, ColumnStats, Partition, Table
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.hive.table_parameters import (
    NUM_FILES_PARAM,
    NUM_ROWS_PARAM,
    STATS_FILES_PARAM,
    WRITE_ID_PARAM,
)
from raptorx_py.hive.write_ids import ValidWriteIdList
from raptorx_py.metastore.cached_store import CachedMetastore
from raptorx_py.metastore.catalog import MetastoreCatalog
from raptorx_py.metrics import counters
from raptorx_py.scheduling import affinity
from raptorx_py.storage.absent_partitions import (
    absent_reason,
    absent_what,
    missing_error,
    recorded_data,
)
from raptorx_py.storage.acid_layout import visible_files
from raptorx_py.storage.file_sets import file_set_fingerprint
from raptorx_py.storage.fs import filesystem_for, join_url, split_url
from raptorx_py.storage.hive_layout import (
    DataFile,
    data_files_below,
    find_files,
    list_data_files,
)

log = logging.getLogger(__name__)

LISTING_THREADS = 16
#: Objects a store returns per page of one listing (S3's ListObjectsV2 maximum).
LIST_PAGE_OBJECTS = 1000


@dataclass(frozen=True)
class TableRoot:
    """A partitioned table's location, and about how many objects one listing of it returns
    (``objects``: twice the data files its partitions' ``numFiles`` count, for the hidden
    files beside them, plus one a partition; None: some partition records no ``numFiles``).
    ``_list_locations`` lists it once instead of its partitions one by one when that is
    fewer round trips (``lists_root_instead``)."""

    url: str
    objects: int | None

    @classmethod
    def of(cls, table: Table, partitions) -> TableRoot:
        objects = len(partitions)
        for p in partitions:
            files = p.parameters.get(NUM_FILES_PARAM)
            if files is None or not files.isdigit():
                return cls(table.location, None)
            objects += 2 * int(files)
        return cls(table.location, objects)

    def lists_root_instead(self, listings: int) -> bool:
        """Whether one listing of the root, its pages one after another, takes fewer round
        trips than ``listings`` directory listings on ``LISTING_THREADS`` threads."""
        if self.objects is None or listings <= LISTING_THREADS:
            return False
        rounds = -(-listings // LISTING_THREADS)
        pages = max(1, -(-self.objects // LIST_PAGE_OBJECTS))
        return pages < rounds

    def holds(self, url: str) -> bool:
        """Whether the directory ``url`` lies below the root (same scheme and bucket)."""
        return url.startswith(self.url.rstrip("/") + "/")


@dataclass(frozen=True)
class Split:
    """One data file, or one piece of it, to read, with the file's identity and its
    partition's values.

    A piece is the byte range ``[offset, offset + length)`` of the file; it reads the row
    groups whose middle byte lies in that range (``scan.row_groups_of``), as Spark's and
    parquet-mr's readers cut a file, so the pieces of a file read each row group exactly once
    without planning having read its footer. ``length`` None: the whole file."""

    url: str
    size: int  # of the whole file (its identity, and where its footer ends)
    #: The file's version as listed (``storage.file_versions``: for a local file its inode,
    #: change and modification times; an ETag on S3); None: the store gave none.
    version: str | None
    etag: str | None  # the ETag the store checks ranged reads against, when it has one
    partition_values: tuple = ()  # typed values, one per partition key
    offset: int = 0
    length: int | None = None
    #: The data predicates this split evaluates when its partition's trusted statistics made
    #: some of the scan's always true there (``predicates.residual``: canonical order);
    #: None: the scan's data predicates.
    predicates: tuple | None = None
    #: The format of its file when its partition's is not its table's (None: the table's).
    storage_format: str | None = None

    def file_format(self, table: Table) -> str:
        """The format of its file: its partition's own, else ``table``'s."""
        return self.storage_format or table.storage_format

    @property
    def bytes(self) -> int:
        """The bytes this split covers: what a task packing it takes on."""
        return self.size if self.length is None else self.length


@dataclass(frozen=True)
class ScanPlan:
    table: Table
    columns: tuple[Column, ...]
    data_predicates: tuple  # predicates on data columns, evaluated while reading
    splits: tuple[Split, ...]
    tasks: tuple[tuple[Split, ...], ...] = ()  # the splits packed, one tuple per Spark task
    partitions_total: int = 0
    partitions_pruned_by_value: int = 0
    partitions_pruned_by_stats: int = 0
    #: One per task: its preferred executor's location (``executor_<host>_<id>``). Empty
    #: when no task has a preference (every task then prefers one: ``pack_by_executor``).
    locations: tuple[str, ...] = ()


def typed_partition_values(table: Table, partition: Partition) -> tuple:
    return tuple(decode_value(v, k.type) for k, v in zip(table.partition_keys, partition.values))


def split_predicates(table: Table, predicates) -> tuple[tuple, tuple]:
    """``(on partition keys, on data columns)``: the first are settled by planning alone."""
    keys = {k.name for k in table.partition_keys}
    return (
        tuple(p for p in predicates if preds.columns_of(p) <= keys),
        tuple(p for p in predicates if not preds.columns_of(p) <= keys),
    )


def plan_scan(
    metastore: MetastoreCatalog | CachedMetastore,
    settings: Settings,
    table: Table,
    columns,
    predicates,
    *,
    snapshot=None,
    executors=(),
    query: str | None = None,
) -> ScanPlan:
    """Plan one scan of ``table``. ``metastore``: a catalog (``Metastore``,
    ``ThriftMetastore``) or a ``CachedMetastore``; ``snapshot``: the query's
    ``QuerySnapshot`` (taken once per scan by the data source), or None. With a snapshot,
    the partitions are ``metastore.list_partitions(table, snapshot=snapshot)``: served from
    the versioned cache when it holds a version fresh for the snapshot. ``executors``: the
    application's live executors (``affinity.Executor``), which soft affinity places tasks on.
    ``query``: the query's token (``query_snapshots``), under which a directory's listing is
    kept for the query's later scans of the table (``query_values``), or None."""
    key_preds, data_preds = split_predicates(table, predicates)
    # Before the partitions: a partition added by a commit after this snapshot then reads
    # as empty (its delta is invisible), never as half of that commit.
    write_ids = _managed_write_ids(metastore, table, snapshot)

    if table.is_partitioned:
        partitions = metastore.list_partitions(table, snapshot=snapshot)
        total = len(partitions)
        kept = []
        for p in partitions:
            row = dict(
                zip((k.name for k in table.partition_keys), typed_partition_values(table, p))
            )
            if all(preds.evaluate(kp, row) for kp in key_preds):
                kept.append(p)
        by_value = total - len(kept)
        root: TableRoot | None = TableRoot.of(table, partitions)
        candidates = [
            _Location(
                p.location,
                typed_partition_values(table, p),
                p.parameters,
                p.id,
                stats=p.stats,
                row_count=p.row_count,
                keys=table.partition_keys,
                raw_values=p.values,
                storage_format=p.storage_format,
            )
            for p in kept
        ]
    else:
        total, by_value = 1, 0
        candidates = [table_location(table)]  # an unpartitioned table is its one partition
        root = None
    use_stats = bool(settings.stats_pruning_enabled and data_preds)
    splits, by_stats, untrusted = _splits_of(
        settings,
        table.qualified_name,
        candidates,
        data_preds if use_stats else (),
        write_ids,
        query,
        root,
    )
    if settings.fragment_cache_enabled:
        pieces = fragment_pieces(table, splits, settings.max_split_size, settings.min_split_count)
    else:
        piece = piece_bytes(splits, settings.max_split_size, settings.min_split_count)
        pieces = cut_files(splits, piece)
    task_locations: tuple[str, ...] = ()
    if settings.node_selection_strategy == affinity.SOFT_AFFINITY and executors:
        tasks, task_locations = pack_by_executor(
            pieces,
            executors,
            settings.max_split_size,
            settings.min_split_count,
            settings.soft_affinity_max_split_imbalance,
        )
        counters.add("planner.tasks_with_preference", len(tasks))
        counters.add("planner.executors_placed_over", len(executors))
    else:
        tasks = pack_splits(pieces, settings.max_split_size, settings.min_split_count)
    counters.add("planner.partitions_total", total)
    counters.add("planner.partitions_pruned_by_value", by_value)
    counters.add("planner.partitions_pruned_by_stats", by_stats)
    counters.add("planner.partitions_pruned", by_value + by_stats)
    counters.add("planner.partitions_stats_untrusted", untrusted)
    counters.add("planner.files_listed", len(splits))
    counters.add("planner.splits", len(pieces))
    counters.add("planner.tasks", len(tasks))
    return ScanPlan(
        table,
        tuple(columns),
        data_preds,
        tuple(pieces),
        tasks,
        total,
        by_value,
        by_stats,
        task_locations,
    )


def pack_by_executor(
    splits, executors, max_bytes: int, min_count: int, max_imbalance: int = 0
) -> tuple[tuple[tuple[Split, ...], ...], tuple[str, ...]]:
    """Tasks and, one per task, its preferred executor's location: the splits grouped by the
    executor their file is assigned (every piece of a file with the file), each group packed
    by ``pack_splits`` on that executor's share of the ``min_count`` task slots. Groups come
    in executor order, splits within a group in their planned order.

    A file is assigned its preferred executor (``affinity.ranked``: host first, then the
    host's executor), or with ``max_imbalance`` > 0 its second choice when the preferred one
    already holds that many more of the scan's splits than the least loaded executor
    (``affinity.balanced_assignment``; counted in ``planner.affinity_second_choice``)."""
    loads: dict[str, int] = {}
    for s in splits:
        loads[s.url] = loads.get(s.url, 0) + 1
    owners, seconds = affinity.balanced_assignment(loads, executors, max_imbalance)
    if seconds:
        counters.add("planner.affinity_second_choice", seconds)
    groups: dict = {}
    for s in splits:
        groups.setdefault(owners[s.url], []).append(s)
    share = max(1, min_count // len(executors)) if min_count else 0
    tasks: list[tuple[Split, ...]] = []
    locations: list[str] = []
    for executor in sorted(groups):
        packed = pack_splits(groups[executor], max_bytes, share)
        tasks.extend(packed)
        locations.extend([executor.location] * len(packed))
    return tuple(tasks), tuple(locations)


#: A file is cut into pieces no smaller than this (Spark's ``openCostInBytes``): each piece
#: costs a task a footer read and a Python worker's fixed cost.
MIN_PIECE_BYTES = 4 * 1024 * 1024
#: A file up to this much larger than a piece stays whole (Hadoop's ``SPLIT_SLOP``).
PIECE_SLOP = 1.1


def piece_bytes(splits, max_bytes: int, slots: int) -> int:
    """How big a piece of a file may be: a task's even share of the scan on ``slots`` task
    slots (so one big file still fills every slot), at most ``max_bytes`` and at least
    ``MIN_PIECE_BYTES``."""
    total = sum(s.bytes for s in splits)
    return max(MIN_PIECE_BYTES, min(max_bytes, -(-total // max(1, slots))))


def fixed_piece_bytes(max_bytes: int, slots: int) -> int:
    """A piece size that depends on the settings alone (``hive.max-split-size`` shared by the
    ``hive.min-split-count`` task slots), so a file is cut the same way in every query: the
    fragment result cache's entries are per piece."""
    return max(MIN_PIECE_BYTES, max_bytes // max(1, slots))


def fragment_pieces(table: Table, splits, max_bytes: int, slots: int) -> list[Split]:
    """The pieces of a scan under the fragment result cache, whose entries are per piece: a
    file must be cut the same way whatever else the query reads, so the cut may depend on
    the file, its table and the settings, never on the scan's other files or pruning.

    An unpartitioned table of fewer files than ``slots`` (TPC-H's one-file ``part``,
    ``customer``) has each file cut by its own size (``cut_each_file``), so it still fills
    the slots, as Spark's reader cuts it; its file count changes only with a write. Every
    other file is cut at the settings' fixed piece size (``fixed_piece_bytes``): a
    partitioned table's many small files stay whole (cutting a one-row-group file would only
    add an empty piece)."""
    if not table.is_partitioned and len(splits) < slots:
        return cut_each_file(splits, max_bytes, slots)
    return cut_files(splits, fixed_piece_bytes(max_bytes, slots))


def own_piece_bytes(size: int, max_bytes: int, slots: int) -> int:
    """A file's piece size from the file's own size and the settings alone: its even share
    of the ``slots`` task slots, at least ``MIN_PIECE_BYTES`` and at most
    ``fixed_piece_bytes``. So a file is cut the same way in every query (the fragment result
    cache's entries are per piece), and a table of one small file still fills the slots as
    Spark's reader does (a 7 MiB file in two pieces for two cores, not one task)."""
    share = -(-size // max(1, slots))
    return max(MIN_PIECE_BYTES, min(fixed_piece_bytes(max_bytes, slots), share))


def cut_each_file(splits, max_bytes: int, slots: int) -> list[Split]:
    """``splits`` with every whole file cut by its own piece size (``own_piece_bytes``)."""
    out: list[Split] = []
    for s in splits:
        out.extend(cut_files([s], own_piece_bytes(s.size, max_bytes, slots)))
    return out


def _simplified(data_preds, stats, row_count: int | None) -> tuple | None:
    """The data predicates left for a partition's splits once its trusted statistics drop
    those always true there (counted per partition in ``planner.predicates_dropped_by_stats``);
    None when none is dropped."""
    if not data_preds:
        return None
    rest = preds.residual(data_preds, stats, row_count)
    if len(rest) == len(data_preds):
        return None
    counters.add("planner.predicates_dropped_by_stats", len(data_preds) - len(rest))
    return rest


def cut_files(splits, piece: int, slop: float = PIECE_SLOP) -> list[Split]:
    """``splits`` with every whole file larger than ``piece`` (by more than ``slop``) cut into
    equal byte ranges of at most about ``piece`` bytes, in file order."""
    out = []
    for s in splits:
        if s.length is not None or s.size <= piece * slop:
            out.append(s)
            continue
        n = -(-s.size // piece)
        step = -(-s.size // n)
        out.extend(
            replace(s, offset=start, length=min(step, s.size - start))
            for start in range(0, s.size, step)
        )
    return out


def pack_splits(splits, max_bytes: int, min_count: int) -> tuple[tuple[Split, ...], ...]:
    """Consecutive splits (order kept: files of one partition stay together) packed into
    tasks for Spark, which runs ``min_count`` tasks at a time (its task slots).

    Packing greedily up to ``max_bytes`` says how many tasks the scan needs; that number is
    rounded up to whole waves of ``min_count`` tasks, and the files are cut into at most that
    many tasks with the largest as small as whole files allow. So a wave ends together: 12
    similar files on 2 slots are 2 tasks of 6, not 6 + 5 + 1 (a second wave for 1 file,
    which a fixed target of half the bytes gave). A task of several files never exceeds
    ``max_bytes``; a file larger than it is a task of its own. Fewer files than
    ``min_count`` are a task each."""
    sizes = [s.bytes for s in splits]
    if not sizes:
        return ()
    ends = list(itertools.accumulate(sizes, initial=0))  # ends[i]: bytes before split i

    def cut(capacity: int, limit: int) -> list[int] | None:
        """Task boundaries, each task as many splits as fit in ``capacity`` (at least one);
        None once more than ``limit`` tasks would be needed."""
        bounds, i = [0], 0
        while i < len(sizes):
            if len(bounds) > limit:
                return None
            i = max(i + 1, bisect.bisect_right(ends, ends[i] + capacity) - 1)
            bounds.append(i)
        return bounds

    def cut_within(capacity: int, limit: int) -> list[int]:
        """``cut`` where the capacity is known to fit in ``limit`` tasks."""
        bounds = cut(capacity, limit)
        if bounds is None:
            raise RuntimeError(f"tasks of {capacity} bytes were expected to fit in {limit}")
        return bounds

    slots = max(1, min(min_count, len(sizes)))
    needed = len(cut_within(max_bytes, len(sizes))) - 1  # never more tasks than splits
    tasks = -(-needed // slots) * slots  # whole waves
    low, high = 0, max_bytes  # the smallest capacity that fits in `tasks` tasks
    while low < high:
        mid = (low + high) // 2
        if cut(mid, tasks) is None:
            low = mid + 1
        else:
            high = mid
    bounds = cut_within(low, tasks)
    return tuple(tuple(splits[a:b]) for a, b in zip(bounds, bounds[1:]))


@dataclass(frozen=True)
class _Location:
    """A directory to list: a partition that survived value pruning (or an unpartitioned
    table's location), its typed values, the metastore object's id and parameters (which say
    whether it is sealed, and which files its statistics describe), and its statistics."""

    url: str
    values: tuple
    parameters: Mapping[str, str]
    object_id: int | None
    stats: Mapping[str, ColumnStats] = field(default_factory=dict)
    row_count: int | None = None
    #: The table's partition keys and the partition's values as the metastore spells them
    #: (empty: an unpartitioned table's location), for its Hive name (``name``).
    keys: tuple[Column, ...] = ()
    raw_values: tuple[str | None, ...] = ()
    #: The partition's own format when it is not its table's (``Partition.storage_format``).
    storage_format: str | None = None

    @property
    def name(self) -> str | None:
        """The partition's Hive name (``k1=v1/k2=v2``), or None for an unpartitioned table."""
        return partition_name(self.keys, self.raw_values) if self.keys else None

    @property
    def version(self) -> str:
        """The listing cache's version of this directory: the metastore object's id (a
        partition or table registered again, e.g. ``replace=True``, is a new object even
        with equal parameters) and its location and parameters."""
        return f"{self.object_id}:{partition_version(self.url, self.parameters)}"

    def may_match(self, data_preds) -> bool:
        """Whether its statistics leave a row that may satisfy every one of ``data_preds``."""
        return all(preds.may_match(dp, dict(self.stats), self.row_count) for dp in data_preds)


def _splits_of(
    settings: Settings,
    table_name: str,
    locations: list[_Location],
    data_preds: tuple,
    write_ids: ValidWriteIdList | None,
    query: str | None = None,
    root: TableRoot | None = None,
) -> tuple[list[Split], int, int]:
    """``(splits, pruned by statistics, statistics not trusted)`` of ``locations``: one split
    per data file of each location its statistics do not prune, carrying the predicates its
    statistics leave (``Split.predicates``). ``data_preds`` empty: statistics are not used.

    Statistics are used only where ``stats_trusted`` says they describe what this plan reads.
    For a managed table the snapshot says so, so a location they prune is never listed. For
    an external one only its current listing can (its fingerprint against the one recorded
    with the statistics), so every external location is listed first: a sealed partition's
    listing is usually the listing cache's, and an unsealed one whose statistics could not
    be trusted was listed anyway. A location whose statistics are not trusted is read whole,
    counted in ``planner.partitions_stats_untrusted``."""
    pruned = untrusted = 0
    # (location, trusted): None = an external location, decided once listed.
    to_list: list[tuple[_Location, bool | None]] = []
    for loc in locations:
        if not data_preds:
            to_list.append((loc, False))
        elif write_ids is None:
            to_list.append((loc, None))
        elif not stats_trusted(loc.parameters, write_ids):
            untrusted += 1
            to_list.append((loc, False))
        elif loc.may_match(data_preds):
            to_list.append((loc, True))
        else:
            pruned += 1
    listings = _list_locations(
        settings, table_name, [loc for loc, _ in to_list], write_ids, query, root
    )
    counters.add("planner.partitions_listed", len(listings))
    splits: list[Split] = []
    stale: list[str] = []  # external locations whose statistics describe other files
    for (loc, trusted), (path, files) in zip(to_list, listings):
        if not files and _skipped_as_absent(settings, table_name, loc, write_ids):
            continue
        if trusted is None:
            trusted = stats_trusted(loc.parameters, None, file_set_fingerprint(path, files))
            if not trusted:
                untrusted += 1
                stale.append(loc.url)
            elif not loc.may_match(data_preds):
                pruned += 1
                continue
        rest = _simplified(data_preds, dict(loc.stats), loc.row_count) if trusted else None
        splits.extend(
            Split(
                join_url(split_url(loc.url)[0], f.path),
                f.size,
                f.version,
                f.etag,
                loc.values,
                predicates=rest,
                storage_format=loc.storage_format,
            )
            for f in files
        )
    if stale:
        log.info(
            "the statistics of %d partition(s) of %s (%s%s) do not describe the files they "
            "hold now (recorded for other files, or none recorded): read without them; "
            "`raptorx table analyze %s` recomputes them",
            len(stale),
            table_name,
            ", ".join(stale[:3]),
            ", ..." if len(stale) > 3 else "",
            table_name,
        )
    return splits, pruned, untrusted


#: Absent partitions this process warned about (table, location, version): once each.
_warned_absent: set[tuple[str, str, str]] = set()


def _skipped_as_absent(
    settings: Settings, table_name: str, loc: _Location, write_ids: ValidWriteIdList | None
) -> bool:
    """For a location that listed no data file: True when it is absent
    (``storage.absent_partitions``: its location gone, or the metastore records data it
    does not hold) and ``hive.ignore-absent-partitions`` reads it as empty (a warning once
    per partition, counted in ``planner.partitions_absent_skipped``); ``PartitionMissingError``
    when it is absent otherwise; False when it is an empty partition. Both counted in
    ``planner.partitions_absent``. A managed partition (or table) is judged only when its
    last write is visible to the snapshot (before that its recorded statistics may describe
    rows the snapshot does not see) and recorded data: a managed table created and not yet
    written has no directory and is empty."""
    if write_ids is not None and (
        recorded_data(loc.parameters) is None or not stats_trusted(loc.parameters, write_ids)
    ):
        return False
    fs, path = filesystem_for(loc.url, settings)
    reason = absent_reason(fs, path, loc.url, loc.parameters)
    if reason is None:
        return False
    counters.add("planner.partitions_absent")
    if not settings.ignore_absent_partitions:
        raise missing_error(table_name, loc.name, loc.url, reason)
    counters.add("planner.partitions_absent_skipped")
    key = (table_name, loc.url, loc.version)
    if key not in _warned_absent:
        _warned_absent.add(key)
        log.warning(
            "%s %s: read as empty, as hive.ignore-absent-partitions=true says (counted in "
            "planner.partitions_absent_skipped)",
            absent_what(table_name, loc.name, loc.url),
            reason,
        )
    return True


def _list_locations(
    settings: Settings,
    table_name: str,
    locations: list[_Location],
    write_ids: ValidWriteIdList | None = None,
    query: str | None = None,
    root: TableRoot | None = None,
) -> list[tuple[str, list[DataFile]]]:
    """``(filesystem path, data files)`` of each of ``locations``, listed in parallel,
    through the file-listing cache when ``hive.file-status-cache-tables`` names the table
    (sealed partitions only). ``write_ids``: a managed table's snapshot; only the ACID
    directories it allows are read. ``query``: the query's token; a directory an earlier
    scan of this query listed (same table, location and version) is not listed again
    (``query_snapshots.query_values``, counted in ``planner.listings_reused_in_query``).
    ``root``: the partitioned table's location; when one listing of it takes fewer round
    trips than listing the directories below it that must be listed, it is listed instead
    (``listings_below_root``), and once the query listed it, every directory below it is
    taken from that listing."""
    cache = _listing_cache(settings)

    def list_one(loc: _Location) -> tuple[str, list[DataFile]]:
        def listed():
            return raw_listing(settings, table_name, loc, write_ids is not None)

        if query is None:
            files = listed()
        else:
            files, kept = query_values.get_or_make(query, listing_key(table_name, loc), listed)
            if kept:
                counters.add("planner.listings_reused_in_query")
        return visible(split_url(loc.url)[1], files)

    def visible(path: str, files) -> tuple[str, list[DataFile]]:
        if write_ids is not None:
            files = visible_files(files, path, write_ids)
        return path, list(files)

    def served(loc: _Location) -> tuple[str, list[DataFile]] | None:
        """``list_one(loc)`` when it needs no listing (kept by the query, or a listing
        cache hit), else None."""
        key = listing_key(table_name, loc)
        files, kept = (None, False) if query is None else query_values.lookup(query, key)
        if kept:
            counters.add("planner.listings_reused_in_query")
        if files is None:
            sealed = _listing_sealed(loc, write_ids is not None)
            files = (
                None if cache is None else cache.cached(table_name, loc.url, loc.version, sealed)
            )
            if files is None:
                return None
            if query is not None:
                query_values.put(query, key, tuple(files))
        return visible(split_url(loc.url)[1], files)

    if not locations:
        return []
    # What is served without a listing is served here: handing thousands of cache hits to
    # threads cost more than the hits (the GIL passed between 16 threads; profiled on the
    # driver's planner, 2026-11-28: about 8 ms of a warm scan). Only listings go to threads.
    results = [served(loc) for loc in locations]
    missing = [i for i, r in enumerate(results) if r is None]
    if root is not None and missing:
        below = [i for i in missing if root.holds(locations[i].url)]
        # Once the query listed the root, every directory below it is taken from that.
        listed_root = query is not None and query_values.get(query, root_key(table_name, root))
        if below and (listed_root or root.lists_root_instead(len(below))):
            from_root = listings_below_root(
                settings, cache, table_name, root, [locations[i] for i in below], write_ids, query
            )
            for i, files in zip(below, from_root):
                results[i] = visible(split_url(locations[i].url)[1], files)
            missing = [i for i in missing if results[i] is None]
    if len(missing) == 1:  # no thread for one listing
        results[missing[0]] = list_one(locations[missing[0]])
    elif missing:
        listed = _listing_pool().map(list_one, [locations[i] for i in missing])
        for i, r in zip(missing, listed):
            results[i] = r
    return results  # type: ignore[return-value]


def listings_below_root(
    settings: Settings,
    cache,
    table_name: str,
    root: TableRoot,
    locations: list[_Location],
    write_ids: ValidWriteIdList | None,
    query: str | None,
) -> list[tuple]:
    """The raw listing of each of ``locations`` (directories below ``root``), taken from one
    listing of the root: what ``raw_listing`` of each would give at that moment, kept as it
    would keep it (``cache``, the listing cache or None, for a sealed directory; the query's
    values). A query lists a root once (``planner.root_listings``); each directory so listed
    is counted in ``planner.listings_from_root``."""
    fs, path = filesystem_for(root.url, settings)

    def find():
        counters.add("planner.root_listings")
        return find_files(fs, path, root.url)

    if query is None:
        found = find()
    else:
        found, _ = query_values.get_or_make(query, root_key(table_name, root), find)
    paths = [split_url(loc.url)[1] for loc in locations]
    below = data_files_below(fs, path, paths, found)
    counters.add("planner.listings_from_root", len(locations))
    listings = []
    for loc, files in zip(locations, below):
        if cache is not None:
            sealed = _listing_sealed(loc, write_ids is not None)
            files = cache.get_or_list(
                table_name, loc.url, loc.version, sealed, lambda files=files: files
            )
        if query is not None:
            query_values.put(query, listing_key(table_name, loc), tuple(files))
        listings.append(tuple(files))
    return listings


def root_key(table_name: str, root: TableRoot) -> tuple:
    """The key of a table location's listing among a query's values (``query_values``)."""
    return ("root listing", table_name, root.url)


def listing_key(table_name: str, loc: _Location) -> tuple:
    """The key of a directory's raw listing among a query's values (``query_values``)."""
    return ("listing", table_name, loc.url, loc.version)


def raw_listing(settings: Settings, table_name: str, loc: _Location, managed: bool) -> tuple:
    """The data files of ``loc`` as listed, before a managed snapshot's filter: through the
    listing cache when ``hive.file-status-cache-tables`` names the table and the directory
    is sealed, else from the store."""
    fs, path = filesystem_for(loc.url, settings)

    def lister():
        return list_data_files(fs, path, loc.url)

    cache = _listing_cache(settings)
    if cache is None:
        return tuple(lister())
    sealed = _listing_sealed(loc, managed)
    return tuple(cache.get_or_list(table_name, loc.url, loc.version, sealed, lister))


def _listing_sealed(loc: _Location, managed: bool) -> bool:
    """Whether the listing cache may keep ``loc``'s listing. A managed directory's raw
    listing is cacheable whether sealed or not: its version includes the writeId parameter,
    which every commit changes after moving its files in. The snapshot's filter is applied
    to the listing, never stored."""
    return managed or is_sealed(loc.parameters)


def table_location(table: Table) -> _Location:
    """An unpartitioned table's one location: the directory ``plan_scan`` lists for it. Its
    parameters seal it, and its statistics are trusted by the same rule as a partition's."""
    rows = table.parameters.get(NUM_ROWS_PARAM)
    return _Location(
        table.location,
        (),
        table.parameters,
        table.id,
        stats=table.stats,
        row_count=int(rows) if rows and rows.isdigit() else None,
    )


#: This process's listing threads (``_listing_pool``) and the process they were made in.
_listing_threads: tuple[int, ThreadPoolExecutor] | None = None
_listing_threads_lock = threading.Lock()


def _listing_pool() -> ThreadPoolExecutor:
    """The ``LISTING_THREADS`` threads this process lists directories on, made at its first
    listing of several directories and kept: a scan no longer starts and joins its own
    (profiled on the driver's planner, 2026-11-27: starting them was a tenth of its time
    with every cache off). Made again in a forked child, whose copy has no threads."""
    global _listing_threads
    with _listing_threads_lock:
        if _listing_threads is None or _listing_threads[0] != os.getpid():
            pool = ThreadPoolExecutor(max_workers=LISTING_THREADS, thread_name_prefix="rx-list")
            _listing_threads = (os.getpid(), pool)
        return _listing_threads[1]


def stats_trusted(
    parameters: Mapping[str, str],
    write_ids: ValidWriteIdList | None,
    listed_fingerprint: str | None = None,
) -> bool:
    """The one rule for whether statistics (a partition's, or an unpartitioned table's,
    recorded with ``parameters``) describe the rows a plan reads, so may prune or simplify.

    External (``write_ids`` None): statistics are true only for the files they were computed
    from, whose fingerprint (``storage.file_sets``) is recorded with them (``statsFileSet``:
    registration, ``partition add``/``seal``, ``table analyze``/``repair``); they are trusted
    only when ``listed_fingerprint``, the fingerprint of the directory's current listing,
    equals it. Sealed or not makes no difference: a sealed partition changed on storage
    (out of band, or unsealed, changed and sealed by hand) lists other files. No recorded
    fingerprint (registered before it was recorded): not trusted.

    Managed: the statistics are those of the last write (``writeId``); one the snapshot
    ``write_ids`` does not see (running, aborted, or committed later, e.g. an overwrite's
    narrower bounds) may not describe the rows the snapshot reads. Writes of one partition
    (or unpartitioned table) are serialised by its lock, so a visible last write means every
    earlier one is decided, and bounds that include aborted rows are still bounds. Recorded
    outside any write id (a table's creation): trusted."""
    if write_ids is None:
        recorded = parameters.get(STATS_FILES_PARAM)
        return recorded is not None and recorded == listed_fingerprint
    wid = parameters.get(WRITE_ID_PARAM)
    if wid is None:
        return True
    return wid.isdigit() and write_ids.is_visible(int(wid))


def _managed_write_ids(
    metastore: MetastoreCatalog | CachedMetastore, table: Table, snapshot
) -> ValidWriteIdList | None:
    """A managed table's ValidWriteIdList: the snapshot's, else read now (one round trip);
    ``None`` for an external table."""
    if table.table_type == EXTERNAL_TABLE:
        return None
    if snapshot is not None:
        return snapshot.table(table.qualified_name).write_ids
    ms = metastore.metastore if isinstance(metastore, CachedMetastore) else metastore
    return ms.get_valid_write_ids([table.qualified_name])[table.qualified_name]


def _listing_cache(settings: Settings):
    """This process's listing cache for ``settings``, or None (the tier is off, or -- counted
    as ``listing_cache.unavailable`` -- could not be set up: planning then lists every
    partition, as without the tier, rather than fail the query)."""
    try:
        return listing_cache_for(settings.listing_cache)
    except Exception:  # noqa: BLE001 - a cache never fails a query the store can answer
        counters.add("listing_cache.unavailable")
        log.warning("file-listing cache unavailable; listing every partition", exc_info=True)
        return None
