"""A managed table's data files, written in its format (``hive.storage_formats``): Parquet
with pyarrow's Parquet writer, ORC with pyarrow's ORC writer (ZSTD, Spark's default ORC
codec). ``DataFileWriter`` is one file a write task fills with rows and closes, giving its
size, row count and statistics, read back from the file as registration reads them
(``storage.parquet_files.footer_stats``, ``storage.orc_files``); ``write_empty_file`` makes
the file of no rows an overwrite leaves in each partition it empties.

Both formats are read back by Spark's own readers in the executors' JVM, so a file written
here holds exactly the Arrow types the table's Hive types read as (``write_task.conform``
casts to them first).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pyarrow.parquet as pq

from raptorx_py.errors import UnsupportedValueError
from raptorx_py.hive.model import ColumnStats
from raptorx_py.hive.storage_formats import ORC
from raptorx_py.storage.fs import join_url, split_url
from raptorx_py.storage.orc_files import GREGORIAN_START, read_orc_tail
from raptorx_py.storage.parquet_files import footer_stats, read_metadata

#: ORC's codec here: Spark's default for ORC (``spark.sql.orc.compression.codec``).
ORC_COMPRESSION = "zstd"

SUFFIXES = {ORC: ".orc"}


def suffix(storage_format: str) -> str:
    """The file name suffix of a data file of ``storage_format``."""
    return SUFFIXES.get(storage_format, ".parquet")


class DataFileWriter:
    """One data file of ``storage_format`` at ``path`` on ``fs`` (``url``'s scheme names its
    store), written a table of rows at a time. ``close`` returns the file's size, and its
    statistics read back from it."""

    def __init__(self, fs, path: str, schema: pa.Schema, storage_format: str):
        self.fs, self.path, self.storage_format = fs, path, storage_format
        self.handle = fs.open(path, "wb")
        self.rows = 0
        if storage_format == ORC:
            self.writer = orc.ORCWriter(self.handle, compression=ORC_COMPRESSION)
        else:
            self.writer = pq.ParquetWriter(self.handle, schema)

    def write(self, table: pa.Table) -> None:
        if self.storage_format == ORC:
            check_orc_calendar(table, self.path)
            self.writer.write(table)
        else:
            self.writer.write_table(table)
        self.rows += table.num_rows

    def close(self, scheme: str) -> tuple[int, dict[str, ColumnStats]]:
        """Close the file: its size and its columns' statistics."""
        self.writer.close()
        metadata = getattr(getattr(self.writer, "writer", None), "metadata", None)
        size = self.handle.tell()
        self.handle.close()
        url = join_url(scheme, self.path)
        if self.storage_format == ORC:
            return size, read_orc_tail(self.fs, self.path, url=url).stats
        if metadata is None:
            metadata = read_metadata(self.fs, self.path, size=size, url=url)
        return size, footer_stats(metadata)


def check_orc_calendar(table: pa.Table, path: str) -> None:
    """``UnsupportedValueError`` for a date or timestamp before 1582-10-15 bound for an ORC
    file: pyarrow's ORC writer does not mark its files' calendar as proleptic Gregorian, so
    Spark's ORC reader takes such a value as a Julian one and reads another day back (1500-02-28
    as 1500-02-19). Spark's own ORC writer marks it; this writer refuses rather than write a
    value that would read back wrong. Dates and timestamps inside nested columns are checked
    alike (``s.day``, ``arr.element``, ``m.value``)."""
    for top, whole in zip(table.column_names, table.columns):
        for name, column in _calendar_leaves(top, whole):
            _check_calendar_leaf(name, column)


def _calendar_leaves(name: str, column):
    """``(name, values)`` of each date or timestamp in ``column``: itself, or its leaves
    inside structs, lists and maps, flattened (a null parent's children may be included:
    checked too, which at worst refuses a write)."""
    t = column.type
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _calendar_leaves(f"{name}.{t.field(i).name}", pc.struct_field(column, [i]))
    elif pa.types.is_map(t):
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        keys = pa.chunked_array([c.keys for c in chunks], t.key_type)
        items = pa.chunked_array([c.items for c in chunks], t.item_type)
        yield from _calendar_leaves(f"{name}.key", keys)
        yield from _calendar_leaves(f"{name}.value", items)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        yield from _calendar_leaves(f"{name}.element", pc.list_flatten(column))
    elif pa.types.is_date(t) or pa.types.is_timestamp(t):
        yield name, column


def _check_calendar_leaf(name: str, column) -> None:
    """``check_orc_calendar`` of one date or timestamp column (or nested leaf)."""
    t = column.type
    if column.null_count < len(column):
        cutoff = pa.scalar(GREGORIAN_START, pa.date32()).cast(t)
        low = pc.min(column)
        if low.is_valid and pc.less(low, cutoff).as_py():
            raise UnsupportedValueError(
                f"column '{name}' holds {low.as_py()}, before 1582-10-15, which an ORC file "
                f"written by tiered_hive (pyarrow's ORC writer) would give back as another "
                f"day to Spark's ORC reader (Julian, not proleptic Gregorian): nothing was "
                f"written. Write the table as Parquet (hive.storage-format=PARQUET), or keep "
                f"such values out of ORC tables"
            )


def write_empty_file(fs, url: str, schema: pa.Schema, storage_format: str) -> None:
    """A file of no rows of ``schema`` at ``url``, in ``storage_format``."""
    _, path = split_url(url)
    empty = schema.empty_table()
    with fs.open(path, "wb") as f:
        if storage_format == ORC:
            orc.write_table(empty, f, compression=ORC_COMPRESSION)
        else:
            pq.write_table(empty, f)
