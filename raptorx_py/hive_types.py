"""Hive column types: how they map to Arrow and Spark, and how their values are written as
text (partition directory values, min/max statistics in the metastore).

The metastore stores types as Hive type strings (``bigint``, ``decimal(15,2)``, ``date``,
``string`` ...), which Spark's DDL parser also accepts. Statistics are stored as text in a
canonical form per type and decoded back to Python values that compare correctly with the
values Spark pushes in filters (int, Decimal, datetime.date, str ...).
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa

from raptorx_py.errors import SchemaError

_INTEGER_TYPES = {"tinyint", "smallint", "int", "bigint"}
_DECIMAL_RE = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def arrow_to_hive(t: pa.DataType, column: str = "?") -> str:
    """The Hive type for an Arrow type found in a Parquet file."""
    if pa.types.is_int8(t):
        return "tinyint"
    if pa.types.is_int16(t):
        return "smallint"
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "bigint"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    raise SchemaError(f"column '{column}' has Arrow type {t}, which tiered_hive does not support")


def base_type(hive_type: str) -> str:
    return hive_type.split("(", 1)[0].strip().lower()


def is_integer(hive_type: str) -> bool:
    return base_type(hive_type) in _INTEGER_TYPES


def is_exactly_comparable(hive_type: str) -> bool:
    """Whether Arrow's comparisons on this type agree with Spark's for every value.

    Floating point is excluded (Spark orders NaN above everything and NaN = NaN is true;
    Arrow does neither), and so is timestamp (session time zone semantics).
    """
    return base_type(hive_type) in _INTEGER_TYPES | {"decimal", "date", "string", "boolean"}


def encode_value(value: Any, hive_type: str) -> str:
    """Canonical text of a value of ``hive_type`` (statistics, partition values)."""
    b = base_type(hive_type)
    if b == "boolean":
        return "true" if value else "false"
    if b == "date":
        return value.isoformat()
    if b == "timestamp":
        return value.isoformat()
    if b == "decimal":
        return str(Decimal(value))
    if b in ("float", "double"):
        return repr(float(value))
    if b == "binary":
        return bytes(value).hex()
    return str(value)


def decode_value(text: str | None, hive_type: str) -> Any:
    """Inverse of :func:`encode_value`; ``None`` stays ``None``."""
    if text is None:
        return None
    b = base_type(hive_type)
    try:
        if b in _INTEGER_TYPES:
            return int(text)
        if b == "decimal":
            return Decimal(text)
        if b in ("float", "double"):
            return float(text)
        if b == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if b == "date":
            return dt.date.fromisoformat(text)
        if b == "timestamp":
            return dt.datetime.fromisoformat(text)
        if b == "binary":
            return bytes.fromhex(text)
    except ValueError as e:
        raise SchemaError(f"value '{text}' is not a valid {hive_type}") from e
    return text


def infer_partition_key_type(values: list[str | None]) -> str:
    """Hive-style inference of a partition key's type from its directory values:
    ``bigint`` when every non-null value is an integer literal, else ``string``."""
    present = [v for v in values if v is not None]
    if present and all(re.fullmatch(r"[+-]?\d{1,18}", v) for v in present):
        return "bigint"
    return "string"


def spark_type(hive_type: str):
    """The Spark type of a Hive type string (no JVM needed, unlike Spark's DDL parser)."""
    from pyspark.sql import types as T

    simple = {"tinyint": T.ByteType, "smallint": T.ShortType, "int": T.IntegerType,
              "integer": T.IntegerType, "bigint": T.LongType, "float": T.FloatType,
              "double": T.DoubleType, "boolean": T.BooleanType, "string": T.StringType,
              "binary": T.BinaryType, "date": T.DateType, "timestamp": T.TimestampType}
    t = hive_type.strip().lower()
    if t in simple:
        return simple[t]()
    m = _DECIMAL_RE.match(t)
    if m:
        return T.DecimalType(int(m.group(1)), int(m.group(2)))
    raise SchemaError(f"Hive type '{hive_type}' is not supported by tiered_hive")


def spark_struct(columns) -> "StructType":  # noqa: F821 - pyspark imported lazily
    """Spark schema (every field nullable) for ``(name, hive_type)`` columns."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(c.name, spark_type(c.type), True) for c in columns])


def arrow_type_for_spark(hive_type: str) -> pa.DataType:
    """The exact Arrow type Spark expects for a column of ``hive_type``."""
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(spark_type(hive_type), timezone="UTC")


def arrow_schema_for_spark(columns) -> pa.Schema:
    """The Arrow schema (every field nullable) Spark expects for ``(name, hive_type)``
    columns: what a reader hands Spark, and what a writer puts in its Parquet files."""
    return pa.schema([pa.field(c.name, arrow_type_for_spark(c.type), nullable=True)
                      for c in columns])
