"""Register an existing Hive-layout directory as an EXTERNAL table.

Steps: one recursive listing of the location, the partition keys read from the directory
names, every file's format told by its first bytes and its footer read (in parallel: on
remote storage each is a round trip), the schema and the format checked to agree across
files, and per-partition column statistics (row count, min, max, null count) aggregated
from the row groups (ORC files give their row counts only: ``storage.orc_files``). Nothing
is written to the metastore until all of that succeeded, and then in one transaction: a
corrupt file or a directory that does not parse leaves the metastore unchanged.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from dataclasses import replace as replace_dataclass

from raptorx_py.cache.listing_cache import is_sealed
from raptorx_py.config.settings import Settings
from raptorx_py.errors import LayoutError, NoSuchObjectError, SchemaError
from raptorx_py.hive.column_types import (
    arrow_to_hive,
    check_partition_key_type,
    decode_value,
    infer_partition_key_type,
)
from raptorx_py.hive.model import (
    EXTERNAL_TABLE,
    Column,
    ColumnStats,
    Partition,
    Table,
)
from raptorx_py.hive.storage_formats import ORC, PARQUET
from raptorx_py.hive.table_parameters import SEALED_PARAM, STATS_FILES_PARAM
from raptorx_py.metastore.catalog import MetastoreCatalog
from raptorx_py.names import parse_table_name
from raptorx_py.storage.file_sets import file_set_fingerprint
from raptorx_py.storage.fs import filesystem_for, join_url, split_url
from raptorx_py.storage.hive_layout import DataFile, walk_table
from raptorx_py.storage.orc_files import (
    file_format,
    is_full_acid,
    orc_column_type,
    read_orc_tail,
)
from raptorx_py.storage.parquet_files import footer_stats, leaf_physical_types, read_metadata
from raptorx_py.tables.file_statistics import summarize

FOOTER_READ_THREADS = 16


@dataclass(frozen=True)
class _FileFacts:
    file: DataFile
    columns: tuple[Column, ...]
    num_rows: int
    stats: dict[str, ColumnStats]
    storage_format: str = PARQUET

    @property
    def size(self) -> int:
        return self.file.size


def read_file_facts(fs, scheme: str, f: DataFile) -> _FileFacts:
    """One file's format, columns, rows and footer statistics (its first bytes read, then its
    footer); a column type raptorx_py cannot read is a SchemaError naming the file."""
    url = join_url(scheme, f.path)
    if file_format(fs, f.path, f.size) == ORC:
        tail = read_orc_tail(fs, f.path, url=url)
        if is_full_acid(tail.schema):
            raise LayoutError(
                f"file {url} is a full-ACID ORC file (a Hive transactional table's, its rows "
                f"inside ACID columns): tiered_hive reads plain and insert-only tables only"
            )
        try:
            orc_columns = tuple(
                Column(f.name, orc_column_type(f, tail.orc_types.get(f.name))) for f in tail.schema
            )
        except SchemaError as e:
            raise SchemaError(f"file {url}: {e}") from e
        return _FileFacts(f, orc_columns, tail.num_rows, tail.stats, ORC)
    md = read_metadata(fs, f.path, size=f.size, etag=f.etag, url=url)
    arrow_schema = md.schema.to_arrow_schema()
    physical = leaf_physical_types(md, arrow_schema)
    try:
        columns = tuple(
            Column(field.name, arrow_to_hive(field.type, field.name, physical[field.name]))
            for field in arrow_schema
        )
    except SchemaError as e:
        raise SchemaError(f"file {url}: {e}") from e
    return _FileFacts(f, columns, md.num_rows, footer_stats(md))


def scan_table_directory(
    settings: Settings,
    qualified_name: str,
    url: str,
    partition_types: dict[str, str] | None = None,
    infer_partition_types: bool = True,
) -> tuple[Table, list[Partition]]:
    """Everything registration learns from ``url``, without touching the metastore.

    Partition keys get the types ``partition_types`` gives them, else the type Spark infers
    from their directory values (``hive.column_types.infer_partition_key_type``; all strings
    when ``infer_partition_types`` is off); every directory value must decode as its key's type.
    """
    database, name = parse_table_name(qualified_name)
    fs, root = filesystem_for(url, settings)
    scheme, _ = split_url(url)
    keys, dirs = walk_table(fs, root, url)
    all_files = [f for d in dirs for f in d.files]
    with ThreadPoolExecutor(max_workers=min(FOOTER_READ_THREADS, len(all_files))) as pool:
        facts = dict(
            zip(
                (f.path for f in all_files),
                pool.map(lambda f: read_file_facts(fs, scheme, f), all_files),
            )
        )

    reference = facts[all_files[0].path]
    for d in dirs:
        # Hive keeps a format per partition (its storage descriptor), not per file.
        first = facts[d.files[0].path]
        for f in d.files[1:]:
            if facts[f.path].storage_format != first.storage_format:
                raise LayoutError(
                    f"file {join_url(scheme, f.path)} is {facts[f.path].storage_format}, but "
                    f"{join_url(scheme, d.files[0].path)} is {first.storage_format}: a "
                    f"partition's files have one format"
                )
    for f in all_files[1:]:
        if facts[f.path].columns != reference.columns:
            raise SchemaError(
                f"file {join_url(scheme, f.path)} has columns "
                f"{_describe(facts[f.path].columns)}, but {join_url(scheme, all_files[0].path)} "
                f"has {_describe(reference.columns)}"
            )
    clash = set(keys) & {c.name for c in reference.columns}
    if clash:
        raise LayoutError(
            f"partition keys {sorted(clash)} of {url} are also columns inside "
            f"its files; Hive layout keeps partition values in directory names only"
        )

    given = {k: check_partition_key_type(t, k) for k, t in (partition_types or {}).items()}
    unknown = set(given) - set(keys)
    if unknown:
        raise SchemaError(
            f"partition types given for {sorted(unknown)}, which are not "
            f"partition keys of {url}; its keys are {keys}"
        )
    key_columns = tuple(
        Column(
            k,
            given.get(k)
            or infer_partition_key_type([d.values[i] for d in dirs], infer_partition_types),
        )
        for i, k in enumerate(keys)
    )
    for i, k in enumerate(key_columns):
        for d in dirs:
            try:
                decode_value(d.values[i], k.type)
            except SchemaError as e:
                raise SchemaError(
                    f"partition directory {join_url(scheme, d.path)}: value "
                    f"'{d.values[i]}' of key '{k.name}' is not a {k.type}"
                ) from e
    _check_one_directory_per_partition(dirs, keys, scheme)
    table_stats: dict[str, ColumnStats] = {}
    table_params: dict[str, str] = {"EXTERNAL": "TRUE"}
    partitions = []
    for d in dirs:
        stats, params = summarize(facts[f.path] for f in d.files)
        params[STATS_FILES_PARAM] = file_set_fingerprint(d.path, d.files)
        if keys:
            fmt = facts[d.files[0].path].storage_format
            own = None if fmt == reference.storage_format else fmt
            partitions.append(
                Partition(d.values, join_url(scheme, d.path), params, stats, None, own)
            )
        else:
            table_stats = stats
            table_params.update(params)
    table = Table(
        database,
        name,
        EXTERNAL_TABLE,
        url.rstrip("/"),
        reference.columns,
        key_columns,
        table_params,
        table_stats,
        storage_format=reference.storage_format,
    )
    return table, partitions


def _check_one_directory_per_partition(dirs, keys, scheme: str) -> None:
    """A LayoutError when two directories name the same partition: ``k=`` and
    ``k=__HIVE_DEFAULT_PARTITION__`` are both null (as in Spark), ``k=%41`` and ``k=A`` both
    ``A``. A Hive partition has one location."""
    seen: dict[tuple, str] = {}
    for d in dirs:
        other = seen.setdefault(d.values, d.path)
        if other != d.path:
            described = ", ".join(
                f"{k}={'null' if v is None else repr(v)}" for k, v in zip(keys, d.values)
            )
            raise LayoutError(
                f"directories {join_url(scheme, other)} and {join_url(scheme, d.path)} are the "
                f"same partition ({described}); a partition has one directory: move the files "
                f"of one into the other"
            )


def _describe(columns) -> str:
    return ", ".join(f"{c.name} {c.type}" for c in columns)


def register_external_table(
    metastore: MetastoreCatalog,
    settings: Settings,
    qualified_name: str,
    url: str,
    *,
    replace: bool = False,
    sealed: bool = False,
    keep_seals: bool = False,
    partition_types: dict[str, str] | None = None,
    infer_partition_types: bool = True,
) -> Table:
    """Register ``url`` as the EXTERNAL table ``qualified_name`` (creating its database).

    ``sealed``: mark every partition complete (parameter ``sealed=true``; an unpartitioned
    table is its own one partition, so the table's parameters carry it), which lets the
    file-listing cache keep their listings (``raptorx partition unseal`` reopens one).
    ``keep_seals`` (with ``replace``): a partition (or unpartitioned table) sealed in the
    table being replaced stays sealed. Statistics are always computed from the files found,
    with their fingerprint (``statsFileSet``).
    """
    table, partitions = scan_table_directory(
        settings, qualified_name, url, partition_types, infer_partition_types
    )
    seal = {SEALED_PARAM: "true"}
    was_sealed = _sealed_before(metastore, table) if replace and keep_seals else set()
    if table.is_partitioned:
        partitions = [
            replace_dataclass(p, parameters={**p.parameters, **seal})
            if sealed or p.values in was_sealed
            else p
            for p in partitions
        ]
    elif sealed or () in was_sealed:
        table = replace_dataclass(table, parameters={**table.parameters, **seal})
    metastore.create_database(table.database)
    return metastore.create_table(table, partitions, replace=replace)


def _sealed_before(metastore: MetastoreCatalog, table: Table) -> set[tuple]:
    """The values of the partitions sealed in the stored table ``table`` replaces (``()``:
    an unpartitioned table that was sealed); none when there is no such table."""
    try:
        old = metastore.get_table(table.database, table.name)
    except NoSuchObjectError:
        return set()
    if not old.is_partitioned:
        return {()} if is_sealed(old.parameters) else set()
    return {p.values for p in metastore.list_partitions(old) if is_sealed(p.parameters)}
