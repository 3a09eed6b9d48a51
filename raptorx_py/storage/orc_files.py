"""An ORC file's tail as registration needs it: its schema and row count, with damage
turned into an error that names the file.

Only registration reads ORC in Python; the rows of an ORC table are read by Spark's own
ORC reader in the JVM (``docs/design/reading-splits.md``). The tail is read through
pyarrow's ORC reader, which reads the postscript, footer and metadata and no stripe.
Limits: no column statistics are taken from ORC files yet, so an ORC table's partitions
carry a row count and no min/max (statistics-based pruning skips them).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.orc as orc

from raptorx_py.errors import CorruptFileError, is_storage_failure, translate_storage_error
from raptorx_py.hive.column_types import arrow_to_hive
from raptorx_py.hive.storage_formats import ORC_MAGIC, PARQUET, format_of_file

#: Errors pyarrow raises for bytes that are not valid ORC.
_ORC_ERRORS = (pa.ArrowInvalid, pa.ArrowIOError, OSError, EOFError, ValueError)


@dataclass(frozen=True)
class OrcTail:
    """What an ORC file's tail says of its rows."""

    schema: pa.Schema
    num_rows: int
    num_stripes: int


#: The columns of a full-ACID ORC file (Hive's transactional tables): the event's fields, the
#: table's own columns inside ``row``.
ACID_COLUMNS = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")


def is_full_acid(schema: pa.Schema) -> bool:
    """Whether ``schema`` is a full-ACID ORC file's (``ACID_COLUMNS``)."""
    return tuple(schema.names) == ACID_COLUMNS


def read_orc_tail(fs, path: str, *, url: str) -> OrcTail:
    """The tail of the ORC file ``path`` on ``fs``; ``CorruptFileError`` naming ``url`` when
    it is not readable ORC, the storage error (``translate_storage_error``) when the store
    fails."""
    try:
        with fs.open(path, "rb") as f:
            reader = orc.ORCFile(f)
            return OrcTail(reader.schema, int(reader.nrows), int(reader.nstripes))
    except _ORC_ERRORS as e:
        if is_storage_failure(e):
            raise translate_storage_error(e, url) from e
        raise CorruptFileError(url, f"not readable ORC ({e})") from e


#: The ORC type attribute Spark's ORC writer gives a column (``OrcUtils``), which pyarrow
#: reads into the field's metadata: ``timestamp_ntz`` marks a TIMESTAMP_NTZ column, stored as
#: ORC's bigint.
SPARK_TYPE_ATTRIBUTE = b"spark.sql.catalyst.type"


def orc_column_type(field: pa.Field) -> str:
    """The Hive type of an ORC column pyarrow reads as ``field``, as Spark's ORC reader types
    it (``OrcUtils.toCatalystType``): a column Spark's writer marked ``timestamp_ntz`` is
    ``timestamp_ntz``; every other ORC timestamp (with or without local time zone, which
    pyarrow reads in nanoseconds) is ``timestamp``; the rest maps as Parquet's columns do
    (``hive.column_types.arrow_to_hive``)."""
    marked = (field.metadata or {}).get(SPARK_TYPE_ATTRIBUTE)
    if marked == b"timestamp_ntz" and pa.types.is_integer(field.type):
        return "timestamp_ntz"
    if pa.types.is_timestamp(field.type):
        return "timestamp"
    return arrow_to_hive(field.type, field.name, None)


def file_format(fs, path: str, size: int) -> str:
    """The format of the data file ``path`` (``storage_formats``) by its first bytes: ORC
    when it begins with ORC's magic, else Parquet (whose own reader names a file that is
    neither). One ranged read of 3 bytes."""
    if size < len(ORC_MAGIC):
        return PARQUET
    with fs.open(path, "rb") as f:
        head = f.read(len(ORC_MAGIC))
    return format_of_file(head, b"") or PARQUET
