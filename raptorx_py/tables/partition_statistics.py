"""Statistics of an external table's partitions after registration: Hive's ``ANALYZE TABLE
... COMPUTE STATISTICS``, ``ALTER TABLE ... ADD PARTITION`` and ``MSCK REPAIR TABLE``, and
the seal that records a partition's files as complete.

Every operation here that records statistics computes them from the files a listing of the
partition's directory found (one footer read per file, in parallel) and records, with them,
that listing's fingerprint (``storage.file_sets``, parameter ``statsFileSet``): the planner
trusts them only while the directory lists the same files (``planner.stats_trusted``). A
file whose columns differ from the table's is a ``SchemaError`` naming it, and nothing is
recorded. Managed tables are refused: their statistics are their writes' (write ids).

- ``analyze_partition`` / ``analyze_table``: recompute one partition's, or every partition's
  (an unpartitioned table: the table's), statistics from what its directory holds now.
- ``seal_partition``: mark a partition complete; its statistics are verified against its
  listing and recomputed when they describe other files (the documented ``unseal``, change,
  ``seal`` sequence), in the same metastore change as the seal.
- ``unseal_partition``: mark it open again.
- ``add_partition``: register one partition directory (default: the table's location plus
  the partition's Hive name) with its statistics.
- ``repair_table``: register every partition directory under the table's location that the
  metastore does not have; report the registered partitions whose directory holds no file.

Limits: an unpartitioned table's statistics can only be replaced with the table itself (the
metastore has no call that alters table statistics alone), so ``analyze_table`` of one
registers it again in place (same location, columns and parameters, a new table id; one
transaction).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from dataclasses import replace as replace_dataclass

from raptorx_py.config.settings import Settings
from raptorx_py.errors import LayoutError, NoSuchObjectError, SchemaError
from raptorx_py.hive.column_types import decode_value
from raptorx_py.hive.model import EXTERNAL_TABLE, ColumnStats, Partition, Table
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.hive.table_parameters import SEALED_PARAM, STATS_FILES_PARAM
from raptorx_py.metastore.catalog import MetastoreCatalog
from raptorx_py.names import parse_table_name
from raptorx_py.storage.absent_partitions import check_location
from raptorx_py.storage.file_sets import file_set_fingerprint
from raptorx_py.storage.fs import as_url, filesystem_for, join_url, split_url
from raptorx_py.storage.hive_layout import list_data_files, walk_table
from raptorx_py.tables.file_statistics import summarize
from raptorx_py.tables.table_registration import FOOTER_READ_THREADS, read_file_facts


@dataclass(frozen=True)
class DirectoryStatistics:
    """What a directory's current files say: their column statistics, the basic-statistics
    parameters (``numRows``, ``numFiles``, ``totalSize``) and ``statsFileSet``."""

    stats: dict[str, ColumnStats]
    parameters: dict[str, str]

    @property
    def fingerprint(self) -> str:
        return self.parameters[STATS_FILES_PARAM]


def external_table(metastore: MetastoreCatalog, qualified_name: str) -> Table:
    """The table ``qualified_name``; a ``SchemaError`` unless it is EXTERNAL."""
    table = metastore.get_table(*parse_table_name(qualified_name))
    if table.table_type != EXTERNAL_TABLE:
        raise SchemaError(
            f"{table.qualified_name} is a {table.table_type}: its statistics are recorded by "
            f"its writes (under write ids), and its partitions added by them; this command "
            f"is for EXTERNAL tables"
        )
    return table


def listed_fingerprint(settings: Settings, url: str) -> str:
    """The fingerprint of what ``url`` lists now (one listing, no footer read)."""
    fs, path = filesystem_for(url, settings)
    return file_set_fingerprint(path, list_data_files(fs, path, url))


def directory_statistics(settings: Settings, table: Table, url: str) -> DirectoryStatistics:
    """The statistics of the data files under ``url`` (none: zero rows), which must have
    ``table``'s columns."""
    fs, path = filesystem_for(url, settings)
    scheme, _ = split_url(url)
    files = list_data_files(fs, path, url)
    facts = []
    if files:
        with ThreadPoolExecutor(max_workers=min(FOOTER_READ_THREADS, len(files))) as pool:
            facts = list(pool.map(lambda f: read_file_facts(fs, scheme, f), files))
    for f, fact in zip(files, facts):
        if fact.columns != table.columns:
            raise SchemaError(
                f"file {join_url(scheme, f.path)} has columns {_describe(fact.columns)}, but "
                f"{table.qualified_name} has {_describe(table.columns)}; nothing was recorded "
                f"(a table's files share one schema: `raptorx table register --replace` to "
                f"take a new one)"
            )
    stats, params = summarize(facts)
    params[STATS_FILES_PARAM] = file_set_fingerprint(path, files)
    return DirectoryStatistics(stats, params)


def _describe(columns) -> str:
    return ", ".join(f"{c.name} {c.type}" for c in columns)


def _partition(metastore: MetastoreCatalog, table: Table, values: tuple) -> Partition:
    name = partition_name(table.partition_keys, values)
    partitions = metastore.list_partitions(table)
    for p in partitions:
        if p.values == tuple(values):
            return p
    # As the metastore's own error (``store.Metastore._no_such_partition``): bare names, bounded.
    raise NoSuchObjectError(
        "partition",
        f"{table.qualified_name}/{name}",
        (partition_name(table.partition_keys, p.values) for p in partitions),
        hint=f"raptorx table show {table.qualified_name} --partitions lists them all",
    )


def analyze_partition(
    metastore: MetastoreCatalog,
    settings: Settings,
    qualified_name: str,
    values: tuple,
    *,
    seal: bool | None = None,
) -> Partition:
    """Recompute the statistics of partition ``values`` from its files (one ALTER_PARTITION
    keeps its other parameters); ``seal`` True/False also seals/unseals it, None keeps it."""
    table = external_table(metastore, qualified_name)
    return _analyzed(metastore, settings, table, _partition(metastore, table, values), seal)


def _analyzed(
    metastore: MetastoreCatalog, settings: Settings, table: Table, old: Partition, seal: bool | None
) -> Partition:
    """``old`` with the statistics of its files now (``analyze_partition``)."""
    found = directory_statistics(settings, table, old.location)
    params = {**old.parameters, **found.parameters}
    if seal is not None:
        params.pop(SEALED_PARAM, None)
        if seal:
            params[SEALED_PARAM] = "true"
    return metastore.alter_partition(
        table, Partition(old.values, old.location, params, found.stats)
    )


@dataclass(frozen=True)
class SealOutcome:
    partition: tuple
    recomputed: bool  # False: its statistics already described its files


def seal_partition(
    metastore: MetastoreCatalog, settings: Settings, qualified_name: str, values: tuple
) -> SealOutcome:
    """Seal partition ``values``: its listing may be cached from now on. Its statistics are
    first checked against its current listing (one listing) and, when they describe other
    files, recomputed in the same metastore change as the seal."""
    table = external_table(metastore, qualified_name)
    old = _partition(metastore, table, values)
    recorded = old.parameters.get(STATS_FILES_PARAM)
    if recorded is not None and recorded == listed_fingerprint(settings, old.location):
        metastore.set_partition_parameters(table, old.values, {SEALED_PARAM: "true"})
        return SealOutcome(old.values, False)
    _analyzed(metastore, settings, table, old, True)
    return SealOutcome(old.values, True)


def unseal_partition(metastore: MetastoreCatalog, qualified_name: str, values: tuple) -> None:
    """Mark partition ``values`` open: its listing is never cached, so files may change."""
    table = metastore.get_table(*parse_table_name(qualified_name))
    metastore.set_partition_parameters(table, tuple(values), {SEALED_PARAM: None})


def analyze_table(
    metastore: MetastoreCatalog, settings: Settings, qualified_name: str
) -> list[tuple]:
    """Recompute every partition's statistics (an unpartitioned table: the table's, by
    registering it again in place, see the module's limits). Returns the partitions'
    values (``[()]`` for an unpartitioned table)."""
    table = external_table(metastore, qualified_name)
    if not table.is_partitioned:
        found = directory_statistics(settings, table, table.location)
        metastore.create_table(
            replace_dataclass(
                table, parameters={**table.parameters, **found.parameters}, stats=found.stats
            ),
            replace=True,
        )
        return [()]
    done = []
    for p in metastore.list_partitions(table):
        _analyzed(metastore, settings, table, p, None)
        done.append(p.values)
    return done


def add_partition(
    metastore: MetastoreCatalog,
    settings: Settings,
    qualified_name: str,
    values: tuple,
    *,
    location: str | None = None,
    seal: bool = False,
) -> Partition:
    """Register the partition ``values`` of an external table at ``location`` (default:
    ``<table location>/<k1=v1/...>``) with the statistics of the files it holds (none is
    allowed: an empty partition). Every value must be of its key's type."""
    table = external_table(metastore, qualified_name)
    _check_values(table, values, where="partition")
    url = (
        as_url(location).rstrip("/")
        if location
        else f"{table.location.rstrip('/')}/{partition_name(table.partition_keys, values)}"
    )
    found = directory_statistics(settings, table, url)
    params = dict(found.parameters)
    if seal:
        params[SEALED_PARAM] = "true"
    (added,) = metastore.add_partitions(table, [Partition(tuple(values), url, params, found.stats)])
    return added


@dataclass(frozen=True)
class RepairReport:
    """What ``repair_table`` did: the partitions it registered (their Hive names), the
    registered partitions whose directory lists no data file (left registered), and those of
    them it dropped as absent (``drop_missing``: ``storage.absent_partitions``)."""

    added: tuple[str, ...]
    without_files: tuple[str, ...]
    dropped: tuple[str, ...] = ()


def repair_table(
    metastore: MetastoreCatalog,
    settings: Settings,
    qualified_name: str,
    *,
    seal: bool = False,
    drop_missing: bool = False,
) -> RepairReport:
    """Hive's ``MSCK REPAIR TABLE``: one recursive listing of the table's location; every
    partition directory the metastore does not have is registered (one ADD_PARTITION for
    all of them) with its statistics, sealed when ``seal``. Partitions whose directory
    lists no data file are reported, not dropped; with ``drop_missing`` (``MSCK REPAIR TABLE
    ... SYNC PARTITIONS``) those absent by the rule reads fail on
    (``storage.absent_partitions``: the location gone, or data recorded that it does not
    hold) are dropped (one DROP_PARTITION for all of them)."""
    table = external_table(metastore, qualified_name)
    if not table.is_partitioned:
        raise SchemaError(
            f"{table.qualified_name} is not partitioned: nothing to repair "
            f"(`raptorx table analyze {table.qualified_name}` recomputes its statistics)"
        )
    fs, root = filesystem_for(table.location, settings)
    scheme, _ = split_url(table.location)
    keys, dirs = walk_table(fs, root, table.location)
    expected = [k.name for k in table.partition_keys]
    if keys != expected:
        raise LayoutError(
            f"the directories under {table.location} have partition keys {keys}, but "
            f"{table.qualified_name} is partitioned by {expected}; nothing was registered"
        )
    registered = {p.values: p for p in metastore.list_partitions(table)}
    new = []
    for d in dirs:
        if d.values in registered:
            continue
        _check_values(table, d.values, where=f"directory {join_url(scheme, d.path)}")
        found = directory_statistics(settings, table, join_url(scheme, d.path))
        params = {**found.parameters, **({SEALED_PARAM: "true"} if seal else {})}
        new.append(Partition(d.values, join_url(scheme, d.path), params, found.stats))
    if new:
        metastore.add_partitions(table, new)
    listed = {d.values for d in dirs}
    gone = [v for v, p in registered.items() if v not in listed and not _lists_files(settings, p)]
    absent = []
    if drop_missing:
        absent = [
            v
            for v in gone
            if check_location(settings, registered[v].location, registered[v].parameters)
        ]
        if absent:
            metastore.drop_partitions(table, absent)
    names = [partition_name(table.partition_keys, p.values) for p in new]
    return RepairReport(
        tuple(names),
        tuple(sorted(partition_name(table.partition_keys, v) for v in gone)),
        tuple(sorted(partition_name(table.partition_keys, v) for v in absent)),
    )


def _lists_files(settings: Settings, p: Partition) -> bool:
    """Whether a partition (possibly outside the table's location) has a data file."""
    fs, path = filesystem_for(p.location, settings)
    return bool(list_data_files(fs, path, p.location))


def _check_values(table: Table, values: tuple, *, where: str) -> None:
    if len(values) != len(table.partition_keys):
        raise SchemaError(
            f"{where}: {len(values)} values for the {len(table.partition_keys)} partition "
            f"keys of {table.qualified_name}"
        )
    for k, v in zip(table.partition_keys, values):
        try:
            decode_value(v, k.type)
        except SchemaError as e:
            raise SchemaError(
                f"{where} of {table.qualified_name}: value '{v}' of key '{k.name}' is not "
                f"a {k.type}"
            ) from e
