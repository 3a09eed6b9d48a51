"""Reading one split into Arrow record batches that match Spark's schema exactly.

For a split (one Parquet file of one partition, or a byte range of it) ``read_split``
- opens the file through the storage seam (``storage.parquet_files.open_parquet``), behind
  the footer and block caches that are on (``datasource.reading.storage_tiers``),
- reads the row groups of its range (``row_groups_of``), skipping those whose statistics
  cannot match the data predicates,
- decodes only the columns the output and the predicates need,
- casts them to the exact Arrow types Spark expects (``string_view`` -> ``string``, every
  field nullable), evaluates the predicates in Arrow, and
- appends the partition columns as constants.

Usable without Spark (pyspark is imported only for its type mapping).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from raptorx_py import predicates as preds
from raptorx_py.datasource.reading.storage_tiers import NO_TIERS, StorageTiers
from raptorx_py.errors import (
    CorruptFileError,
    FileChangedError,
    SchemaError,
    StorageNotFoundError,
    UnsupportedValueError,
    translate_storage_error,
)
from raptorx_py.hive.column_types import arrow_schema_for_spark, arrow_type_for_spark
from raptorx_py.hive.model import Column
from raptorx_py.metrics import counters
from raptorx_py.storage.changed_files import changed_file_advice as changed_file_advice_for
from raptorx_py.storage.changed_files import partition_spec
from raptorx_py.storage.file_versions import current_identity, is_another_version
from raptorx_py.storage.fs import filesystem_for
from raptorx_py.storage.parquet_files import (
    footer_stats,
    legacy_calendar_bounds,
    open_parquet,
    parquet_read_error,
)

log = logging.getLogger(__name__)

BATCH_ROWS = 65536


def read_split(
    split, table, columns: tuple[Column, ...], data_predicates, settings, fill_caches: bool = True
) -> Iterator[pa.RecordBatch]:
    """The rows of ``split`` that satisfy ``data_predicates``, as batches of ``columns``.

    The file is read through the footer and block caches when they are on. Should the
    cached copy not decode (bytes a checksum could not catch), the file is read again
    straight from its store, resuming after the batches already produced, so a cache fault
    costs a second read, never the query; only an error the store's own bytes give fails.
    (Which cache held the bad bytes is not known, so they stay: a later read of the file
    falls back again, counted each time in ``reader.cache_fallbacks``.)

    ``fill_caches`` False (a soft-affinity task on another host than its preferred
    executor's): the file is read straight from its store, so it takes no room in this
    node's caches.
    """
    schema = arrow_schema_for_spark(columns)
    key_index = {k.name: i for i, k in enumerate(table.partition_keys)}
    file_types = {c.name: c.type for c in table.columns}
    needed = [c.name for c in columns if c.name not in key_index]
    for p in data_predicates:
        needed += [c for c in preds.columns_of(p) if c not in needed]
    read_types = {n: arrow_type_for_spark(file_types[n]) for n in needed}
    expr = preds.conjunction(list(data_predicates))

    def output(raw: pa.RecordBatch) -> pa.RecordBatch | None:
        counters.add("reader.rows_read", raw.num_rows)
        counters.add("reader.bytes_decoded", raw.nbytes)
        try:
            batch = _cast(raw, needed, read_types)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise _cast_error(e, raw, needed, read_types, split, table) from e
        if expr is not None:
            batch = batch.filter(expr)
        if batch.num_rows == 0:
            return None
        out = _assemble(batch, columns, schema, key_index, split.partition_values)
        counters.add("reader.rows_out", out.num_rows)
        return out

    tiers = StorageTiers.for_settings(settings) if fill_caches else NO_TIERS
    try:
        for raw in raw_batches(split, table, needed, data_predicates, settings, tiers):
            out = output(raw)
            if out is not None:
                yield out
    except (FileChangedError, StorageNotFoundError) as e:
        # A listed file the store no longer has changed after it was listed (the tiers
        # that translated the store's answer did not know the file was listed).
        changed = translate_storage_error(e, split.url, listed=True)
        counters.add("reader.files_changed")
        raise FileChangedError(f"{changed}. {changed_file_advice(split, table, settings)}") from e


#: What ``raw_batches`` tells its caller of a file it opened: the footer, the row groups it
#: reads and how many the statistics ruled out (a second call, after a fallback to the
#: store, replaces the first).
FileReport = Callable[[pq.FileMetaData, list[int], int], None]


def raw_batches(
    split,
    table,
    needed: list[str],
    data_predicates,
    settings,
    tiers: StorageTiers,
    report: FileReport | None = None,
) -> Iterator[pa.RecordBatch]:
    """The one way a file is read through the node's tiers, by the scan (``read_split``)
    and by ``raptorx cache warm`` (``cache_management.warm_table``): the batches of the
    ``needed`` columns of ``split``'s row groups that ``data_predicates`` do not rule out,
    as the file stores them, read through ``tiers`` (``StorageTiers``: a tier that cannot be
    set up is left out). A cache fault never fails it: a corrupt block or footer entry is a
    counted miss in its tier, and should the cached copy not decode (bytes a checksum could
    not catch), the file is read again straight from its store, resuming after the batches
    already produced (``reader.cache_fallbacks``)."""
    done = 0  # raw batches already handed out
    try:
        for raw in _raw_batches(split, table, needed, data_predicates, settings, tiers, report):
            done += 1
            yield raw
    except CorruptFileError as e:
        if not tiers.caching:
            raise
        counters.add("reader.cache_fallbacks")
        log.warning(
            "%s did not decode from the local caches (%s); reading it from the store",
            split.url,
            e.reason,
        )
        for i, raw in enumerate(
            _raw_batches(split, table, needed, data_predicates, settings, NO_TIERS, report)
        ):
            if i >= done:  # the same footer, row groups and batch size: the same batches
                yield raw


def changed_file_advice(split, table, settings) -> str:
    """What to do about a file of ``split`` that changed after the plan listed it
    (``storage.changed_files``: the text both readers give)."""
    spec = partition_spec(table, split.partition_values) if table.partition_keys else None
    return changed_file_advice_for(
        table.qualified_name, spec, settings.file_status_cache_expire_time
    )


def check_listed_version(target, path: str, split) -> None:
    """``FileChangedError`` unless the file opened for ``split`` is still the version its
    plan listed (``file_versions.current_identity``: one ``stat`` for a local file). Needed
    where the plan dropped predicates its partition's statistics made always true
    (``split.predicates``): those statistics describe the listed files, and rows of a version
    written since may fail the dropped predicates. (With an ETag the object store checks
    every ranged read itself.)"""
    version = split.version
    try:
        size, found = current_identity(target, path)
    except FileNotFoundError as e:
        raise FileChangedError(f"{split.url} was listed but no longer exists ({e})") from e
    if (size is not None and size != split.size) or (
        version is not None and is_another_version(version, found)
    ):
        raise FileChangedError(
            f"{split.url} was listed as version {version} (size {split.size}) but is now "
            f"version {found} (size {size}): the file changed after it was listed"
        )


def _raw_batches(
    split,
    table,
    needed: list[str],
    data_predicates,
    settings,
    tiers: StorageTiers,
    report: FileReport | None = None,
) -> Iterator[pa.RecordBatch]:
    """The file's batches of the ``needed`` columns, in the row groups its footer statistics
    do not rule out, as the file stores them (not yet cast or filtered)."""
    target, path = filesystem_for(split.url, settings)
    pf = open_parquet(
        tiers.filesystem(target),
        path,
        size=split.size,
        etag=split.etag,
        url=split.url,
        version=split.version,
        footer=tiers.footer_source(split),
    )
    try:
        if split.predicates is not None and split.etag is None:
            check_listed_version(target, path, split)
        md = pf.metadata
        missing = [n for n in needed if n not in pf.schema_arrow.names]
        if missing:
            raise SchemaError(
                f"file {split.url} lacks columns {missing} of table {table.qualified_name}"
            )
        listed = row_groups_of(md, split)
        groups = listed
        if data_predicates and settings.stats_pruning_enabled:
            groups = [
                rg
                for rg in listed
                if all(
                    preds.may_match(
                        p, footer_stats(md, preds.columns_of(p), [rg]), md.row_group(rg).num_rows
                    )
                    for p in data_predicates
                )
            ]
            counters.add("reader.row_groups_pruned", len(listed) - len(groups))
        counters.add("reader.row_groups_read", len(groups))
        counters.add("reader.column_chunks_read", len(groups) * len(needed))
        if report is not None:
            report(md, groups, len(listed) - len(groups))
        if not groups:
            return
        legacy = legacy_calendar_bounds(md, pf.schema_arrow, needed)
        try:
            if needed:
                for raw in pf.iter_batches(
                    batch_size=BATCH_ROWS, row_groups=groups, columns=needed, use_threads=False
                ):
                    _check_legacy_calendar(raw, legacy, split.url)
                    yield raw
            else:  # count(*) or partition columns only: the footer knows the row counts
                yield from _row_count_batches(md, groups)
        except (pa.ArrowInvalid, pa.ArrowIOError, OSError, EOFError) as e:
            raise parquet_read_error(e, split.url) from e
    finally:
        pf.close()


def _check_legacy_calendar(raw: pa.RecordBatch, bounds: dict[str, int], url: str) -> None:
    """Refuses dates and timestamps a legacy Spark stored in the hybrid calendar where Spark
    would rebase them (``parquet_files.legacy_calendar_bounds``: dates before 1582-10-15,
    timestamps before 1900), naming the file and column, rather than read them days or
    hours off; later values are the same in both calendars and are read."""
    for name, bound in bounds.items():
        col = raw.column(name)
        low = pc.min(col.cast(pa.int32() if pa.types.is_date32(col.type) else pa.int64()))
        if low.is_valid and low.as_py() < bound:
            raise UnsupportedValueError(
                f"file {url}: column '{name}' holds {col.type} values before "
                f"{'1582-10-15' if pa.types.is_date32(col.type) else '1900'} written in "
                f"Spark's legacy hybrid calendar (Spark before 3.0/3.1, or a LEGACY rebase "
                f"mode in write), which tiered_hive does not rebase; read this table with "
                f"spark.read.parquet"
            )


def row_groups_of(md, split) -> list[int]:
    """The row groups ``split`` reads: every one of a whole file; of a piece of the file
    (``Split.offset``/``length``), those whose middle byte lies in its range, so that the
    pieces of a file read each row group once."""
    if split.length is None:
        return list(range(md.num_row_groups))
    end = split.offset + split.length
    return [
        rg
        for rg in range(md.num_row_groups)
        if split.offset <= _middle_byte(md.row_group(rg)) < end
    ]


def _middle_byte(rg) -> int:
    """Where a row group's bytes (its column chunks, dictionary pages first) are half read."""
    start, size = None, 0
    for i in range(rg.num_columns):
        chunk = rg.column(i)
        first = chunk.data_page_offset
        if chunk.has_dictionary_page and chunk.dictionary_page_offset:
            first = min(first, chunk.dictionary_page_offset)
        start = first if start is None else min(start, first)
        size += chunk.total_compressed_size
    return (start or 0) + size // 2


def _row_count_batches(md, groups) -> Iterator[pa.RecordBatch]:
    """Column-less batches carrying the row counts of ``groups`` (pyarrow yields nothing for
    an empty column list)."""
    for rg in groups:
        rows = md.row_group(rg).num_rows
        for start in range(0, rows, BATCH_ROWS):
            n = min(BATCH_ROWS, rows - start)
            yield _rows_only(n)


def _rows_only(n: int) -> pa.RecordBatch:
    """A batch of ``n`` rows and no columns (what count(*) needs)."""
    return pa.RecordBatch.from_struct_array(pa.nulls(n, pa.struct([])))


def _cast(raw: pa.RecordBatch, names: list[str], types: dict[str, pa.DataType]) -> pa.RecordBatch:
    if not names:
        return raw
    arrays = [raw.column(n) for n in names]
    arrays = [a if a.type == types[n] else a.cast(types[n]) for a, n in zip(arrays, names)]
    return pa.RecordBatch.from_arrays(
        arrays, schema=pa.schema([pa.field(n, types[n], nullable=True) for n in names])
    )


def _assemble(
    batch: pa.RecordBatch,
    columns,
    schema: pa.Schema,
    key_index: dict[str, int],
    partition_values: tuple,
) -> pa.RecordBatch:
    n = batch.num_rows
    if not columns:
        # Zero columns still carry a row count (e.g. count(*)).
        return _rows_only(n)
    arrays = []
    for c, f in zip(columns, schema):
        if c.name in key_index:
            value = partition_values[key_index[c.name]]
            arrays.append(
                pa.nulls(n, f.type) if value is None else pa.array([value] * n, type=f.type)
            )
        else:
            arrays.append(batch.column(c.name))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _cast_error(
    e: Exception, raw: pa.RecordBatch, names: list[str], types: dict[str, pa.DataType], split, table
) -> SchemaError:
    """A file's column that does not convert to the table's type (a double with fractions
    in a bigint column, a decimal(10,3) in a decimal(10,2) one): names the file, column,
    table and both types, instead of Arrow's bare message."""
    hive_types = {c.name: c.type for c in table.columns}
    for n in names:
        column = raw.column(n)
        if column.type == types[n]:
            continue
        try:
            column.cast(types[n])
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as cause:
            return SchemaError(
                f"file {split.url}: column '{n}' holds {column.type} values that do not fit "
                f"the type {hive_types.get(n, types[n])} of table {table.qualified_name} "
                f"(read as {types[n]}): {cause}"
            )
    return SchemaError(
        f"file {split.url} of table {table.qualified_name} does not convert "
        f"to the table's types: {e}"
    )
