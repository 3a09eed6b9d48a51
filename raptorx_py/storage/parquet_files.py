"""Opening Parquet files through fsspec, with corruption turned into an error that names
the file, and the statistics of a footer as ``ColumnStats``.

This is the seam the footer cache and block cache tiers plug into: everything that reads
Parquet bytes goes through ``open_parquet``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.spec import AbstractBufferedFile

from raptorx_py.errors import (
    CorruptFileError,
    FileChangedError,
    RaptorxError,
    is_storage_failure,
    translate_storage_error,
)
from raptorx_py.hive.column_types import arrow_leaf_count
from raptorx_py.hive.model import ColumnStats
from raptorx_py.metrics import counters
from raptorx_py.storage.file_versions import current_identity, is_another_version
from raptorx_py.storage.fs import CountingFile

#: Errors pyarrow raises for bytes that are not valid Parquet.
_PARQUET_ERRORS = (pa.ArrowInvalid, pa.ArrowIOError, OSError, EOFError, ValueError)


@runtime_checkable
class OpensListedVersions(Protocol):
    """A filesystem that opens a file as the version planning listed, checking what it reads
    against that identity (the block cache). ``enabled`` False: it caches nothing now, and
    its ``target`` is the store's own filesystem."""

    enabled: bool
    target: Any

    def open_listed(
        self, path: str, *, size: int | None, version: str | None, etag: str | None
    ) -> Any: ...


def open_parquet(
    fs,
    path: str,
    *,
    size: int | None = None,
    etag: str | None = None,
    url: str | None = None,
    metadata: pq.FileMetaData | None = None,
    version: str | None = None,
    footer: Callable[[Callable[[], pq.FileMetaData]], pq.FileMetaData] | None = None,
) -> pq.ParquetFile:
    """Open ``path`` as Parquet, reading the footer unless ``metadata`` is given.

    ``size`` and ``etag`` are the file's identity as listed at planning. Handing them to an
    object-store file spares a HEAD request per file, and s3fs checks every ranged read's
    ETag against ``etag``, so an object overwritten since planning fails the read instead
    of mixing old and new bytes.

    The storage tiers plug in here:
    - ``fs`` may be a block cache (``OpensListedVersions``, which the cache layer's
      ``BlockCacheFileSystem`` is: storage does not import the cache); it is given
      the identity (``size``, ``version``: ``storage.file_versions``, and ``etag``) that its
      blocks are keyed by.
    - ``footer``, when given, is asked for the footer with a loader that reads it from this
      very file (through ``fs``, so a footer read also fills the block cache): the footer
      cache's ``get_or_load`` bound to the file's identity. ``metadata`` takes precedence.
    """
    url = url or path
    try:
        if isinstance(fs, OpensListedVersions):
            raw = fs.open_listed(path, size=size, version=version, etag=etag)
            if not fs.enabled and etag is None and version is not None and footer is not None:
                # No blocks to check fetches against: the target's own file, as below.
                _check_opened_version(fs.target, path, raw, url, size, version)
        else:
            raw = fs.open(path, "rb", **({"size": size} if size is not None else {}))
            if size is not None and isinstance(raw, AbstractBufferedFile):
                raw.details = {
                    "name": path,
                    "size": size,
                    **({"ETag": f'"{etag}"'} if etag else {}),
                }
            if etag is None and version is not None and footer is not None:
                _check_opened_version(fs, path, raw, url, size, version)
    except RaptorxError:
        raise
    except Exception as e:
        raise translate_storage_error(e, url, listed=size is not None) from e
    counters.add("reader.files_opened")
    # Reads through an enabled block cache reach the store only for its misses, which it
    # counts as remote itself.
    through_cache = isinstance(fs, OpensListedVersions) and fs.enabled
    handle = CountingFile(raw, remote=not through_cache)
    try:
        if metadata is None and footer is not None:
            metadata = footer(lambda: pq.read_metadata(handle))
        # INT96 (Spark's default timestamp encoding) at microseconds, as Spark reads it: at
        # pyarrow's default (nanoseconds) years before 1677 or after 2262 do not fit, and
        # Spark truncates the nanosecond digits anyway.
        return pq.ParquetFile(
            handle, metadata=metadata, pre_buffer=True, coerce_int96_timestamp_unit="us"
        )
    except RaptorxError:
        handle.close()
        raise
    except _PARQUET_ERRORS as e:
        handle.close()
        raise parquet_read_error(e, url, listed=size is not None) from e
    except BaseException:
        handle.close()
        raise


def _check_opened_version(fs, path, raw, url, size, version) -> None:
    """A footer from the footer cache is the listed version's; a file opened without an
    ETag check (local files) may be another version by now, and its data decoded with the
    old footer would be a torn read. So the opened file must still be the listed version
    (size and version as ``file_versions.current_identity`` reads them: a local file's
    inode, change and modification times); else ``FileChangedError``."""
    found_size, found = current_identity(fs, path)
    changed = (
        size is not None and found_size is not None and found_size != int(size)
    ) or is_another_version(version, found)
    if changed:
        raw.close()
        raise FileChangedError(
            f"{url} was listed as version {version} (size {size}) but is now version "
            f"{found} (size {found_size}): the file changed after it was listed"
        )


def parquet_read_error(e: BaseException, url: str, *, listed: bool = True) -> RaptorxError:
    """What an error raised while reading Parquet bytes of ``url`` means: the store failed
    (translated), the file changed under us, or the bytes are not valid Parquet. ``listed``
    (a file read at the size and version a plan or a cache key holds): the store's "not
    found" and "range not satisfiable" are a changed file (``translate_storage_error``)."""
    if isinstance(e, RaptorxError):
        return translate_storage_error(e, url, listed=listed)
    if is_storage_failure(e):
        return translate_storage_error(e, url, listed=listed)
    return CorruptFileError(url, str(e))


def read_metadata(
    fs, path: str, *, size: int | None = None, etag: str | None = None, url: str | None = None
) -> pq.FileMetaData:
    pf = open_parquet(fs, path, size=size, etag=etag, url=url)
    try:
        return pf.metadata
    finally:
        pf.close()


def footer_stats(
    metadata: pq.FileMetaData,
    columns: Iterable[str] | None = None,
    row_groups: Iterable[int] | None = None,
) -> dict[str, ColumnStats]:
    """Statistics per top-level column over the given row groups (default: all).

    A column with a row group lacking min/max has unknown bounds; lacking a null count, an
    unknown null count.
    """
    names = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    wanted = set(columns) if columns is not None else None
    groups = list(range(metadata.num_row_groups)) if row_groups is None else list(row_groups)
    out: dict[str, ColumnStats] = {}
    for ci, name in enumerate(names):
        if "." in name or (wanted is not None and name not in wanted):
            continue
        low = high = None
        nulls: int | None = 0
        # INT96 min/max are not ordered as the timestamps are (nor does Spark write them).
        known = bool(groups) and metadata.schema.column(ci).physical_type != "INT96"
        for rg in groups:
            st = metadata.row_group(rg).column(ci).statistics
            if st is None:
                known, nulls = False, None
                break
            if st.has_null_count and nulls is not None:
                nulls += st.null_count
            else:
                nulls = None
            if not st.has_min_max:
                if metadata.row_group(rg).num_rows > (st.null_count if st.has_null_count else -1):
                    known = False
                continue
            try:
                # pyarrow turns min/max into Python values, which cannot hold every value
                # Arrow can (dates after 9999-12-31, timestamps before year 1): unknown.
                lo, hi = st.min, st.max
            except (ValueError, OverflowError):
                known = False
                continue
            try:
                low = lo if low is None or lo < low else low
                high = hi if high is None or hi > high else high
            except TypeError:
                known = False
        out[name] = ColumnStats(nulls, low if known else None, high if known else None)
    return out


def physical_types(metadata: pq.FileMetaData) -> dict[str, str]:
    """The Parquet physical type (``INT96``, ``INT64``, ...) of each top-level leaf column."""
    out = {}
    for i in range(metadata.num_columns):
        col = metadata.schema.column(i)
        if "." not in col.path:
            out[col.path] = col.physical_type
    return out


def leaf_physical_types(metadata: pq.FileMetaData, arrow_schema: pa.Schema) -> dict[str, tuple]:
    """The Parquet physical types of each top-level column's leaves, in the file's order
    (one for a flat column; ``hive.column_types.arrow_leaf_count`` for a nested one): what
    tells an INT96 timestamp inside a struct from another."""
    physical = [metadata.schema.column(i).physical_type for i in range(metadata.num_columns)]
    out: dict[str, tuple] = {}
    at = 0
    for field in arrow_schema:
        n = arrow_leaf_count(field.type)
        out[field.name] = tuple(physical[at : at + n])
        at += n
    return out


#: Footer keys Spark writes: its version, and the markers of values written in the legacy
#: hybrid (Julian + Gregorian) calendar.
SPARK_VERSION_KEY = b"org.apache.spark.version"
SPARK_LEGACY_INT96_KEY = b"org.apache.spark.legacyINT96"
SPARK_LEGACY_DATETIME_KEY = b"org.apache.spark.legacyDateTime"

#: Where Spark's LEGACY rebase (``RebaseDateTime``) stops moving values: days since the epoch
#: before the Gregorian switch (1582-10-15), and microseconds before 1900-01-01 UTC (after it
#: the two calendars and every zone's offsets agree).
LEGACY_SAFE_FROM_DAY = -141427
LEGACY_SAFE_FROM_MICROS = -2208988800 * 1_000_000
_PER_MICRO = {"s": 1 / 1_000_000, "ms": 1 / 1000, "us": 1, "ns": 1000}


def _spark_legacy(metadata: pq.FileMetaData, before: str, marker: bytes) -> bool:
    meta = metadata.metadata or {}
    version = meta.get(SPARK_VERSION_KEY)
    if version is None:
        return False
    # A string comparison, as Spark's own.
    return version.decode("utf-8", "replace") < before or marker in meta


def int96_is_legacy(metadata: pq.FileMetaData) -> bool:
    """Whether Spark reads this file's INT96 values with the LEGACY rebase (Julian to
    proleptic Gregorian calendar): Spark's ``DataSourceUtils.int96RebaseSpec`` does for files
    written by Spark before 3.1 or marked ``legacyINT96``. Files other writers made (no Spark
    version) are read as ``spark.sql.parquet.int96RebaseModeInRead`` says, CORRECTED (no
    rebase) by default in Spark 4."""
    return _spark_legacy(metadata, "3.1.0", SPARK_LEGACY_INT96_KEY)


def datetime_is_legacy(metadata: pq.FileMetaData) -> bool:
    """The same for DATE and INT64 timestamps (``DataSourceUtils.datetimeRebaseSpec``): files
    Spark before 3.0 wrote, or marked ``legacyDateTime``."""
    return _spark_legacy(metadata, "3.0.0", SPARK_LEGACY_DATETIME_KEY)


def legacy_calendar_bounds(
    metadata: pq.FileMetaData, arrow_schema: pa.Schema, names
) -> dict[str, int]:
    """{column: the value (days, or the column's timestamp unit) below which Spark would
    rebase it} for the columns of ``names`` this file stores in the legacy hybrid calendar."""
    physical = physical_types(metadata)
    int96, other = int96_is_legacy(metadata), datetime_is_legacy(metadata)
    out = {}
    for name in names:
        if name not in arrow_schema.names:
            continue
        t = arrow_schema.field(name).type
        is_int96 = physical.get(name) == "INT96"
        if pa.types.is_timestamp(t) and (int96 if is_int96 else other):
            out[name] = int(LEGACY_SAFE_FROM_MICROS * _PER_MICRO[t.unit])
        elif pa.types.is_date32(t) and other:
            out[name] = LEGACY_SAFE_FROM_DAY
    return out
