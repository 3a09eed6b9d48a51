"""An ORC file's tail as registration needs it: its schema, row count and column statistics,
with damage turned into an error that names the file.

Only registration reads ORC in Python; the rows of an ORC table are read by Spark's own
ORC reader in the JVM (``docs/design/reading-splits.md``). The tail (postscript, footer,
metadata; no stripe) is read through one open file by pyarrow's ORC reader (the schema as
Arrow types, with Spark's type marks) and by ``pyorc`` (the file's column statistics).

Statistics are taken only where ORC's are exact and ordered as Spark compares: null counts
of every column, and bounds of integers, decimals and dates from 1582-10-15 on (earlier
dates may be counted in Hive's hybrid calendar). Strings (ordered by UTF-16 code units by
Java writers), floating point (NaN is left out of ORC's bounds, and Spark orders it above
every number), timestamps (time zone handling differs between writers) and booleans get
no bounds, so a predicate on them never prunes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.orc as orc
import pyorc

from raptorx_py.errors import (
    CorruptFileError,
    SchemaError,
    is_storage_failure,
    translate_storage_error,
)
from raptorx_py.hive.column_types import (
    arrow_to_hive,
    char_varchar,
    is_nested,
    normalized_type,
    quote_field_name,
)
from raptorx_py.hive.model import ColumnStats
from raptorx_py.hive.storage_formats import ORC_MAGIC, PARQUET, format_of_file

#: Errors pyarrow raises for bytes that are not valid ORC.
_ORC_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowIOError,
    OSError,
    EOFError,
    ValueError,
    pyorc.ParseError,
)


@dataclass(frozen=True)
class OrcTail:
    """What an ORC file's tail says of its rows; ``stats`` by top-level column, one for each
    flat column (``ColumnStats``: bounds None where not exact), none for a nested one;
    ``orc_types`` ORC's own type of each top-level column (``orc_type_text``), which says
    what Arrow's does not (``char(5)``, ``varchar(4)``, ``uniontype<...>``, a char inside a
    struct)."""

    schema: pa.Schema
    num_rows: int
    num_stripes: int
    stats: dict[str, ColumnStats]
    orc_types: dict[str, str] = field(default_factory=dict)


#: The first date ORC's readers count alike in every calendar (the Gregorian reform).
GREGORIAN_START = dt.date(1582, 10, 15)
_BOUNDED_KINDS = frozenset(
    [
        pyorc.TypeKind.BYTE,
        pyorc.TypeKind.SHORT,
        pyorc.TypeKind.INT,
        pyorc.TypeKind.LONG,
        pyorc.TypeKind.DECIMAL,
        pyorc.TypeKind.DATE,
    ]
)


def column_stats(statistics: dict, num_rows: int, marked_ntz: bool = False) -> ColumnStats:
    """A top-level column's ``ColumnStats`` from pyorc's ``statistics`` of it, over a file
    of ``num_rows`` rows (see the module docstring for which bounds are kept)."""
    values = statistics.get("number_of_values")
    nulls = None if values is None else num_rows - int(values)
    kind = statistics.get("kind")
    low, high = statistics.get("minimum"), statistics.get("maximum")
    if kind not in _BOUNDED_KINDS or marked_ntz or low is None or high is None:
        return ColumnStats(nulls, None, None)
    if kind == pyorc.TypeKind.DATE and low < GREGORIAN_START:
        return ColumnStats(nulls, None, None)
    return ColumnStats(nulls, low, high)


#: The columns of a full-ACID ORC file (Hive's transactional tables): the event's fields, the
#: table's own columns inside ``row``.
ACID_COLUMNS = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")


def is_full_acid(schema: pa.Schema) -> bool:
    """Whether ``schema`` is a full-ACID ORC file's (``ACID_COLUMNS``)."""
    return tuple(schema.names) == ACID_COLUMNS


def _statistics(reader: pyorc.Reader, column_id: int) -> dict:
    """pyorc's statistics of a column, or none where it cannot convert them (a bound outside
    Python's dates, ``OverflowError``): that column is then not pruned by."""
    try:
        return dict(reader[column_id].statistics)
    except (OverflowError, ValueError):
        return {}


def orc_type_text(t) -> str:
    """ORC's text of the type pyorc describes as ``t``: ``char(5)``, ``varchar(4)``,
    ``uniontype<int,string>``, ``decimal(10,3)``, ...; a struct, list or map in Hive's form
    as Spark's ORC reader types it (``_nested_orc_text``)."""
    if t.kind in _NESTED_KINDS:
        return _nested_orc_text(t)
    if t.kind == pyorc.TypeKind.CHAR:
        return f"char({t.max_length})"
    if t.kind == pyorc.TypeKind.VARCHAR:
        return f"varchar({t.max_length})"
    return str(t)


_NESTED_KINDS = frozenset([pyorc.TypeKind.STRUCT, pyorc.TypeKind.LIST, pyorc.TypeKind.MAP])


def _nested_orc_text(t) -> str:
    """The Hive type of a part of a nested ORC column as Spark's ORC reader types it
    (``OrcUtils.toCatalystSchema``): a struct's, list's or map's parts in Hive's syntax,
    field names quoted as Spark's DDL quotes them; both ORC timestamps are ``timestamp``,
    a bigint Spark's writer marked ``timestamp_ntz`` (an ORC type attribute) is that. A union
    stays ``uniontype<...>``, for ``orc_column_type`` to refuse."""
    if t.kind == pyorc.TypeKind.STRUCT:
        fields = ",".join(
            f"{quote_field_name(name)}:{_nested_orc_text(f)}" for name, f in t.fields.items()
        )
        return f"struct<{fields}>"
    if t.kind == pyorc.TypeKind.LIST:
        return f"array<{_nested_orc_text(t.type)}>"
    if t.kind == pyorc.TypeKind.MAP:
        return f"map<{_nested_orc_text(t.key)},{_nested_orc_text(t.value)}>"
    if t.kind == pyorc.TypeKind.TIMESTAMP_INSTANT:
        return "timestamp"
    marked = (t.attributes or {}).get(SPARK_TYPE_ATTRIBUTE.decode())
    if marked == "timestamp_ntz" and t.kind == pyorc.TypeKind.LONG:
        return "timestamp_ntz"
    return orc_type_text(t)


def read_orc_tail(fs, path: str, *, url: str) -> OrcTail:
    """The tail of the ORC file ``path`` on ``fs``; ``CorruptFileError`` naming ``url`` when
    it is not readable ORC, the storage error (``translate_storage_error``) when the store
    fails."""
    try:
        with fs.open(path, "rb") as f:
            reader = orc.ORCFile(f)
            schema, rows, stripes = reader.schema, int(reader.nrows), int(reader.nstripes)
            f.seek(0)
            described = pyorc.Reader(f)
            top = described.schema
            if not isinstance(top, pyorc.Struct):
                raise ValueError(f"its root type is {top}, not a struct of columns")
            fields = top.fields
            # A nested column has no statistics: its bounds order nothing a filter names.
            stats = {
                field.name: column_stats(
                    _statistics(described, fields[field.name].column_id),
                    rows,
                    marked_ntz=marked_ntz(field),
                )
                for field in schema
                if fields[field.name].kind not in _NESTED_KINDS
            }
            orc_types = {name: orc_type_text(t) for name, t in fields.items()}
            return OrcTail(schema, rows, stripes, stats, orc_types)
    except _ORC_ERRORS as e:
        if is_storage_failure(e):
            raise translate_storage_error(e, url) from e
        raise CorruptFileError(url, f"not readable ORC ({e})", file_format="ORC") from e


#: The ORC type attribute Spark's ORC writer gives a column (``OrcUtils``), which pyarrow
#: reads into the field's metadata: ``timestamp_ntz`` marks a TIMESTAMP_NTZ column, stored as
#: ORC's bigint.
SPARK_TYPE_ATTRIBUTE = b"spark.sql.catalyst.type"


def marked_ntz(field: pa.Field) -> bool:
    """Whether Spark's ORC writer stored ``field`` as a TIMESTAMP_NTZ (a marked bigint)."""
    marked = (field.metadata or {}).get(SPARK_TYPE_ATTRIBUTE)
    return marked == b"timestamp_ntz" and pa.types.is_integer(field.type)


def orc_column_type(field: pa.Field, orc_type: str | None = None) -> str:
    """The Hive type of an ORC column pyarrow reads as ``field`` and whose ORC type is
    ``orc_type`` (``OrcTail.orc_types``), as Spark's ORC reader types it
    (``OrcUtils.toCatalystSchema``): ``char(n)`` and ``varchar(n)`` keep their declared type
    (pyarrow reads both as ``string``; Spark reads them as strings it marks with it); a
    union is refused, since Spark's ORC reader does not read one; a column Spark's writer
    marked ``timestamp_ntz`` is ``timestamp_ntz``; every other ORC timestamp (with or
    without local time zone, which pyarrow reads in nanoseconds) is ``timestamp``; a
    struct, list or map is the Hive type ``orc_type_text`` wrote for it (a union inside it
    refused as above); the rest maps as Parquet's columns do
    (``hive.column_types.arrow_to_hive``)."""
    declared = None if orc_type is None else char_varchar(orc_type)
    if declared is not None:
        return declared
    if orc_type is not None and "uniontype<" in orc_type:
        raise SchemaError(
            f"column '{field.name}' has ORC type {orc_type}: Spark's ORC reader does not "
            f"read union types (spark.read.orc fails on them), and tiered_hive does not "
            f"either; rewrite the column as one type, or as a struct of its alternatives"
        )
    if orc_type is not None and is_nested(orc_type):
        return normalized_type(orc_type)
    if marked_ntz(field):
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
