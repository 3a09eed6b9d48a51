"""The file formats a table's data files may have, and the names Hive gives them.

A Hive storage descriptor names a format by its input format, output format and SerDe
classes; Spark's Hive catalog adds ``spark.sql.sources.provider`` for a table it created
with ``USING``. ``format_of`` reads a format from either, ``hive_classes`` gives the classes
a table of a format is stored with, and ``format_of_file`` tells a data file's format by its
magic bytes (Parquet ends with ``PAR1``, ORC begins with ``ORC``).

Only formats raptorx_py reads are named here; any other is refused where it is met, by
the caller, naming the table.
"""

from __future__ import annotations

from typing import NamedTuple

PARQUET = "PARQUET"
ORC = "ORC"
FORMATS = (PARQUET, ORC)


class HiveClasses(NamedTuple):
    """The classes of a Hive storage descriptor of one format."""

    input_format: str
    output_format: str
    serde: str


HIVE_CLASSES = {
    PARQUET: HiveClasses(
        "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
    ),
    ORC: HiveClasses(
        "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
    ),
}

#: Spark's ``USING`` provider names (``spark.sql.sources.provider``) of each format.
_PROVIDERS = {"parquet": PARQUET, "orc": ORC, "org.apache.spark.sql.hive.orc": ORC}

#: A Parquet file's last four bytes; an ORC file's first three.
PARQUET_MAGIC = b"PAR1"
ORC_MAGIC = b"ORC"


def hive_classes(storage_format: str) -> HiveClasses:
    """The storage descriptor's classes of a table stored as ``storage_format``."""
    return HIVE_CLASSES[storage_format]


def format_of(input_format: str | None, serde: str | None, provider: str | None) -> str | None:
    """The format a storage descriptor names (Spark's provider first, then the input format,
    then the SerDe), or None: a format raptorx_py does not read (text, Avro, ...)."""
    if provider:
        return _PROVIDERS.get(provider.lower())
    for storage_format, classes in HIVE_CLASSES.items():
        if input_format == classes.input_format:
            return storage_format
    if not input_format:
        for storage_format, classes in HIVE_CLASSES.items():
            if serde == classes.serde:
                return storage_format
    return None


def format_of_file(head: bytes, tail: bytes) -> str | None:
    """A data file's format by its first and last bytes, or None (neither format)."""
    if tail.endswith(PARQUET_MAGIC):
        return PARQUET
    if head.startswith(ORC_MAGIC):
        return ORC
    return None


def parse_format(text: str, *, what: str = "storage format") -> str:
    """``text`` (any case) as one of ``FORMATS``; ValueError naming the choices."""
    value = text.strip().upper()
    if value not in FORMATS:
        raise ValueError(f"{what} {text!r}: expected one of {', '.join(FORMATS)}")
    return value
