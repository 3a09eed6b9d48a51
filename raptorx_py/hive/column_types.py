"""Hive column types: how they map to Arrow and Spark, and how their values are written as
text (partition directory values, min/max statistics in the metastore).

The metastore stores types as Hive type strings (``bigint``, ``decimal(15,2)``, ``date``,
``string`` ...), which Spark's DDL parser also accepts. Nested types are Hive's too:
``struct<a:int,b:string>``, ``array<bigint>``, ``map<string,int>``, nested in any way, a
struct field's name in backticks where Spark's DDL quotes it (``struct<`a b`:int>``); they
are parsed here (``parse_type``), without Spark's parser and its JVM. Statistics are stored
as text in a canonical form per type and decoded back to Python values that compare
correctly with the values Spark pushes in filters (int, Decimal, datetime.date, str ...).
A nested column has none (``is_nested``): a struct's min/max orders nothing Spark filters by.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from raptorx_py.errors import SchemaError

if TYPE_CHECKING:
    # Annotations only: pyspark is imported inside the functions that build Spark types, so
    # the layers that use this module without Spark do not load it.
    from pyspark.sql.types import StructType

_INTEGER_TYPES = {"tinyint", "smallint", "int", "bigint"}
_DECIMAL_RE = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_CHAR_VARCHAR_RE = re.compile(r"^(char|varchar)\(\s*(\d+)\s*\)$")

#: The field metadata key by which Spark marks a string column declared ``char(n)`` or
#: ``varchar(n)`` (``CharVarcharUtils.CHAR_VARCHAR_TYPE_STRING_METADATA_KEY``); its value is
#: the declared type. Spark's analyzer pads a ``char(n)`` column's values to ``n`` when it
#: reads them (``spark.sql.readSideCharPadding``) and pads literals compared with it.
CHAR_VARCHAR_METADATA_KEY = "__CHAR_VARCHAR_TYPE_STRING"


#: The widest decimal Spark has (and Arrow's decimal128).
MAX_DECIMAL_PRECISION = 38


#: The Arrow types that map to one Hive type whatever their parameters: the pyarrow
#: predicates recognising them, and that Hive type.
_ONE_HIVE_TYPE = (
    ((pa.types.is_int8,), "tinyint"),
    ((pa.types.is_int16,), "smallint"),
    ((pa.types.is_int32,), "int"),
    ((pa.types.is_int64,), "bigint"),
    ((pa.types.is_float32,), "float"),
    ((pa.types.is_float64,), "double"),
    ((pa.types.is_boolean,), "boolean"),
    ((pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view), "string"),
    ((pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view), "binary"),
    ((pa.types.is_date32, pa.types.is_date64), "date"),
)


def arrow_to_hive(
    t: pa.DataType, column: str = "?", physical_type: str | Sequence[str] | None = None
) -> str:
    """The Hive type for an Arrow type found in a Parquet file, as Spark's Parquet reader
    types it.

    ``physical_type`` is the Parquet physical type of the column when known (for a nested
    column, the physical types of its leaves in the file's order, ``arrow_leaf_count`` of
    them): INT96 (which pyarrow presents as a time-zone-less ``timestamp[ns]``) is Spark's
    ``timestamp``. Other timestamps follow Parquet's ``isAdjustedToUTC`` as pyarrow presents
    it: with a time zone ``timestamp``, without ``timestamp_ntz``. Nanosecond timestamps and
    decimals wider than 38 digits are refused (Spark's reader refuses them too), naming the
    column. Structs, lists and maps are ``struct<...>``, ``array<...>`` and ``map<...>`` of
    their fields' types, mapped by the same rules.
    """
    if physical_type is None or isinstance(physical_type, str):
        leaves = iter([physical_type] * arrow_leaf_count(t))
    else:
        leaves = iter(physical_type)
    return _arrow_to_hive(t, column, leaves)


def arrow_leaf_count(t: pa.DataType) -> int:
    """How many Parquet leaf columns hold an Arrow type: one for a flat type, the sum of its
    children's for a struct, list or map (pyarrow lists leaves in this depth-first order)."""
    if pa.types.is_struct(t):
        return sum(arrow_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return arrow_leaf_count(t.key_type) + arrow_leaf_count(t.item_type)
    if _is_arrow_list(t):
        return arrow_leaf_count(t.value_type)
    return 1


def _is_arrow_list(t: pa.DataType) -> bool:
    return (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def _arrow_to_hive(t: pa.DataType, column: str, leaves: Iterator[str | None]) -> str:
    """``arrow_to_hive`` of ``t``, whose leaves' physical types ``leaves`` yields in order."""
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        if not fields:
            raise SchemaError(
                f"column '{column}' is a struct of no fields, which Spark's reader does not read"
            )
        inner = ",".join(
            f"{quote_field_name(f.name)}:{_arrow_to_hive(f.type, f'{column}.{f.name}', leaves)}"
            for f in fields
        )
        return f"struct<{inner}>"
    if pa.types.is_map(t):
        key = _arrow_to_hive(t.key_type, f"{column}.key", leaves)
        value = _arrow_to_hive(t.item_type, f"{column}.value", leaves)
        return f"map<{key},{value}>"
    if _is_arrow_list(t):
        return f"array<{_arrow_to_hive(t.value_type, f'{column}.element', leaves)}>"
    physical_type = next(leaves, None)
    for arrow_kinds, hive_type in _ONE_HIVE_TYPE:
        if any(is_kind(t) for is_kind in arrow_kinds):
            return hive_type
    if pa.types.is_timestamp(t):
        if physical_type == "INT96":
            return "timestamp"
        if t.unit == "ns":
            raise SchemaError(
                f"column '{column}' holds nanosecond timestamps ({t}), which Spark's Parquet "
                f"reader does not read and tiered_hive does not either; write them in "
                f"microseconds (e.g. pyarrow's coerce_timestamps='us')"
            )
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(t):
        if t.precision > MAX_DECIMAL_PRECISION:
            raise SchemaError(
                f"column '{column}' has Arrow type {t}: decimals of more than "
                f"{MAX_DECIMAL_PRECISION} digits are not supported by Spark or tiered_hive"
            )
        return f"decimal({t.precision},{t.scale})"
    raise SchemaError(f"column '{column}' has Arrow type {t}, which tiered_hive does not support")


def char_varchar(hive_type: str) -> str | None:
    """``hive_type`` normalized (``char(5)``, ``varchar(4)``) when it is a char or varchar
    type, else None. Spark reads both as strings, marked by ``CHAR_VARCHAR_METADATA_KEY``."""
    m = _CHAR_VARCHAR_RE.match(hive_type.strip().lower())
    return None if m is None else f"{m.group(1)}({int(m.group(2))})"


#: The first word of a nested Hive type.
_NESTED_KINDS = ("struct", "array", "map")


def is_nested(hive_type: str) -> bool:
    """Whether ``hive_type`` is a struct, array or map (of anything): a column with no
    statistics, no pushed filter and no pushed aggregation (``docs/design/types.md``)."""
    return base_type(hive_type) in _NESTED_KINDS


def base_type(hive_type: str) -> str:
    """The type's first word, lower case: ``decimal`` of ``decimal(15,2)``, ``struct`` of
    ``struct<a:int>``."""
    return re.split(r"[(<]", hive_type, maxsplit=1)[0].strip().lower()


def is_integer(hive_type: str) -> bool:
    return base_type(hive_type) in _INTEGER_TYPES


def is_exactly_comparable(hive_type: str) -> bool:
    """Whether Arrow's comparisons on this type agree with Spark's for every value.

    Floating point is excluded (Spark orders NaN above everything and NaN = NaN is true;
    Arrow does neither), and so is timestamp (session time zone semantics); timestamp_ntz
    has none, and compares as Spark does. A char or varchar column's filters reach the
    reader on its values as stored (Spark pads a char column above the scan, and compares
    a padded value in its own filter, which is never pushed), compared as strings. A nested
    column (``is_nested``) is not: its filters (``s IS NULL``) are left to Spark.
    """
    return base_type(hive_type) in _INTEGER_TYPES | {
        "decimal",
        "date",
        "string",
        "char",
        "varchar",
        "boolean",
        "timestamp_ntz",
    }


def encode_value(value: Any, hive_type: str) -> str:
    """Canonical text of a value of ``hive_type`` (statistics, partition values)."""
    b = base_type(hive_type)
    if b == "boolean":
        return "true" if value else "false"
    if b == "date":
        return value.isoformat()
    if b in ("timestamp", "timestamp_ntz"):
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
        if b in ("timestamp", "timestamp_ntz"):
            return dt.datetime.fromisoformat(text)
        if b == "binary":
            return bytes.fromhex(text)
    except ValueError as e:
        raise SchemaError(f"value '{text}' is not a valid {hive_type}") from e
    return text


_INT_RE = re.compile(r"[+-]?[0-9]+")
# What both Java's Double.parseDouble and Python's float() read the same (no hex floats, no
# "d"/"f" suffixes, no "_" separators).
_DOUBLE_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Infinity|NaN")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_INT32 = 2**31
_INT64 = 2**63

#: Types ``--partition-type`` may give a partition key: those whose directory text decodes to
#: the value Spark would see.
PARTITION_KEY_TYPES = (
    "tinyint",
    "smallint",
    "int",
    "bigint",
    "float",
    "double",
    "boolean",
    "date",
    "timestamp_ntz",
    "string",
    "decimal(p,s)",
)


def infer_partition_value_type(text: str) -> str:
    """The type Spark's ``PartitioningUtils.inferPartitionColumnValue`` gives one directory
    value: int, bigint, decimal(n,0) (integers beyond bigint), double, date, else string.

    Timestamps are left as strings: Spark types them ``timestamp`` in the session's time zone,
    which a registration cannot know (``--partition-type k=timestamp_ntz`` reads them as
    wall-clock values).
    """
    if _INT_RE.fullmatch(text):
        n = int(text)
        if -_INT32 <= n < _INT32:
            return "int"
        if -_INT64 <= n < _INT64:
            return "bigint"
        digits = len(str(abs(n)))
        if digits <= MAX_DECIMAL_PRECISION:
            return f"decimal({digits},0)"
        return "double"
    if _DOUBLE_RE.fullmatch(text):
        return "double"
    if _DATE_RE.fullmatch(text):
        try:
            dt.date.fromisoformat(text)
            return "date"
        except ValueError:
            return "string"
    return "string"


def _wider(a: str, b: str) -> str:
    """Spark's ``TypeCoercion.findWiderCommonType`` over the inferred partition types."""
    if a == b:
        return a
    order = {"int": 0, "bigint": 1}
    if a in order and b in order:
        return a if order[a] > order[b] else b
    numeric = ("int", "bigint", "double")
    if {a, b} <= set(numeric) | {x for x in (a, b) if x.startswith("decimal")}:
        if "double" in (a, b):
            return "double"
        return f"decimal({max(_integral_digits(a), _integral_digits(b))},0)"
    return "string"


def _integral_digits(t: str) -> int:
    """The integral digits of ``int``, ``bigint`` or ``decimal(p,...)`` as ``_wider`` counts
    them: 10, 20, or the precision ``p``."""
    digits = {"int": 10, "bigint": 20}
    if t in digits:
        return digits[t]
    m = _DECIMAL_RE.match(t)
    if m is None:
        raise ValueError(f"not an integer or decimal partition type: {t!r}")
    return int(m.group(1))


def infer_partition_key_type(values: list[str | None], inference: bool = True) -> str:
    """A partition key's type from its directory values (None is null), as Spark infers it
    (``spark.sql.sources.partitionColumnTypeInference.enabled``; ``inference=False`` is that
    setting off: every key a string): each value's type (:func:`infer_partition_value_type`),
    widened across values as Spark does; a key with only nulls is a string."""
    present = [v for v in values if v is not None]
    if not inference or not present:
        return "string"
    out = infer_partition_value_type(present[0])
    for v in present[1:]:
        if out == "string":
            break
        out = _wider(out, infer_partition_value_type(v))
    return out


def check_partition_key_type(hive_type: str, key: str) -> str:
    """``hive_type`` normalized, or a SchemaError naming ``key`` when a partition key cannot
    have that type."""
    t = hive_type.strip().lower().replace(" ", "")
    m = _DECIMAL_RE.match(t)
    if m:
        p, sc = int(m.group(1)), int(m.group(2))
        if 1 <= p <= MAX_DECIMAL_PRECISION and sc <= p:
            return t
    elif t in PARTITION_KEY_TYPES:
        return t
    raise SchemaError(
        f"partition key '{key}' cannot have type '{hive_type}'; partition keys "
        f"may be {', '.join(PARTITION_KEY_TYPES)}"
    )


#: Hive's flat types whose name is the whole type, and the pyspark type class of each.
_SIMPLE_SPARK_TYPES = {
    "tinyint": "ByteType",
    "smallint": "ShortType",
    "int": "IntegerType",
    "integer": "IntegerType",
    "bigint": "LongType",
    "float": "FloatType",
    "double": "DoubleType",
    "boolean": "BooleanType",
    "string": "StringType",
    "binary": "BinaryType",
    "date": "DateType",
    "timestamp": "TimestampType",
    "timestamp_ntz": "TimestampNTZType",
}
#: A struct field's name Spark's DDL writes without quotes (``QuotingUtils.quoteIfNeeded``).
_PLAIN_NAME_RE = re.compile(r"[A-Za-z0-9_]+")


def quote_field_name(name: str) -> str:
    """A struct field's name as Spark's DDL writes it: as is when it is letters, digits and
    underscores (not digits only), else in backticks, a backtick in it doubled."""
    if _PLAIN_NAME_RE.fullmatch(name) and not name.isdigit():
        return name
    return "`" + name.replace("`", "``") + "`"


class _TypeText:
    """A recursive-descent reader of one Hive type string (``parse_type``): ``pos`` moves
    along ``text`` as each part is read."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> SchemaError:
        return SchemaError(
            f"Hive type '{self.text}' is not supported by tiered_hive: {what} at "
            f"character {self.pos + 1}"
        )

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expect(self, char: str) -> None:
        self.skip_space()
        if not self.text.startswith(char, self.pos):
            raise self.fail(f"expected '{char}'")
        self.pos += 1

    def peek(self, char: str) -> bool:
        self.skip_space()
        return self.text.startswith(char, self.pos)

    def word(self) -> str:
        self.skip_space()
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.text, self.pos)
        if m is None:
            raise self.fail("expected a type name")
        self.pos = m.end()
        return m.group(0).lower()

    def field_name(self) -> str:
        self.skip_space()
        if self.text.startswith("`", self.pos):
            out = []
            i = self.pos + 1
            while i < len(self.text):
                if self.text[i] == "`":
                    if self.text.startswith("``", i):
                        out.append("`")
                        i += 2
                        continue
                    self.pos = i + 1
                    return "".join(out)
                out.append(self.text[i])
                i += 1
            raise self.fail("unclosed backtick")
        m = re.compile(r"[A-Za-z0-9_$]+").match(self.text, self.pos)
        if m is None:
            raise self.fail("expected a field name")
        self.pos = m.end()
        return m.group(0)

    def number(self) -> int:
        self.skip_space()
        m = re.compile(r"[0-9]+").match(self.text, self.pos)
        if m is None:
            raise self.fail("expected a number")
        self.pos = m.end()
        return int(m.group(0))

    def parse(self) -> HiveType:
        name = self.word()
        if name == "struct":
            self.expect("<")
            fields: list[tuple[str, HiveType]] = []
            while True:
                field = self.field_name()
                self.expect(":")
                fields.append((field, self.parse()))
                if not self.peek(","):
                    break
                self.expect(",")
            self.expect(">")
            return HiveType("struct", fields=tuple(fields))
        if name == "array":
            self.expect("<")
            element = self.parse()
            self.expect(">")
            return HiveType("array", fields=(("element", element),))
        if name == "map":
            self.expect("<")
            key = self.parse()
            self.expect(",")
            value = self.parse()
            self.expect(">")
            return HiveType("map", fields=(("key", key), ("value", value)))
        if name in ("decimal", "char", "varchar"):
            params: tuple[int, ...] = ()
            if self.peek("("):
                self.expect("(")
                params = (self.number(),)
                if name == "decimal" and self.peek(","):
                    self.expect(",")
                    params += (self.number(),)
                self.expect(")")
            elif name != "decimal":
                raise self.fail(f"{name} needs a length")
            if name == "decimal":
                # Hive's defaults: decimal is decimal(10,0), decimal(p) is decimal(p,0).
                precision, scale = (params + (10, 0)[len(params) :])[:2]
                if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
                    raise self.fail(f"decimal({precision},{scale}) has no Spark type")
                return HiveType("decimal", params=(precision, scale))
            return HiveType(name, params=params)
        if name not in _SIMPLE_SPARK_TYPES:
            raise self.fail(f"unknown type '{name}'")
        return HiveType("int" if name == "integer" else name)


class HiveType:
    """A parsed Hive type (``parse_type``): its kind (``int``, ``decimal``, ``char``,
    ``struct``, ``array``, ``map`` ...), its numbers (a decimal's precision and scale, a
    char's length) and its named parts (a struct's fields; an array's ``element``; a map's
    ``key`` and ``value``)."""

    __slots__ = ("fields", "kind", "params")

    def __init__(
        self,
        kind: str,
        params: tuple[int, ...] = (),
        fields: tuple[tuple[str, HiveType], ...] = (),
    ):
        self.kind = kind
        self.params = params
        self.fields = fields

    @property
    def has_char_varchar(self) -> bool:
        """Whether a ``char(n)`` or ``varchar(n)`` is this type or inside it."""
        return self.kind in ("char", "varchar") or any(t.has_char_varchar for _, t in self.fields)

    def kinds(self) -> set[str]:
        """The kinds of this type and of every part inside it."""
        return {self.kind}.union(*(t.kinds() for _, t in self.fields))

    def text(self, quote: bool = True) -> str:
        """The type's canonical Hive text: lower-case type names, no spaces, field names as
        Spark's DDL quotes them (``quote``) or as its ``catalogString`` leaves them (which
        is how Spark marks a char or varchar inside a nested field)."""
        if self.kind == "struct":
            name = quote_field_name if quote else (lambda n: n)
            inner = ",".join(f"{name(n)}:{t.text(quote)}" for n, t in self.fields)
            return f"struct<{inner}>"
        if self.kind == "array":
            return f"array<{self.fields[0][1].text(quote)}>"
        if self.kind == "map":
            return f"map<{self.fields[0][1].text(quote)},{self.fields[1][1].text(quote)}>"
        if self.params:
            return f"{self.kind}({','.join(str(n) for n in self.params)})"
        return self.kind

    def spark(self):
        """The Spark type (char and varchar read as strings, every nested part nullable, as
        Spark's file readers type what they read)."""
        from pyspark.sql import types as T

        if self.kind == "struct":
            return T.StructType([T.StructField(n, t.spark(), True) for n, t in self.fields])
        if self.kind == "array":
            return T.ArrayType(self.fields[0][1].spark(), containsNull=True)
        if self.kind == "map":
            key, value = self.fields[0][1], self.fields[1][1]
            return T.MapType(key.spark(), value.spark(), valueContainsNull=True)
        if self.kind == "decimal":
            return T.DecimalType(*self.params)
        if self.kind in ("char", "varchar"):
            return T.StringType()
        return getattr(T, _SIMPLE_SPARK_TYPES[self.kind])()


def parse_type(hive_type: str) -> HiveType:
    """``hive_type`` parsed (flat or nested, type names in any case, spaces anywhere between
    parts); a SchemaError naming it and where it stops making sense when it is not a type
    tiered_hive reads."""
    reader = _TypeText(hive_type)
    out = reader.parse()
    reader.skip_space()
    if reader.pos != len(hive_type):
        raise reader.fail("unexpected text")
    return out


def normalized_type(hive_type: str) -> str:
    """``hive_type``'s canonical text (``HiveType.text``): ``STRUCT< a : INT >`` is
    ``struct<a:int>``."""
    return parse_type(hive_type).text()


def spark_type(hive_type: str):
    """The Spark type of a Hive type string (no JVM needed, unlike Spark's DDL parser):
    ``char(n)`` and ``varchar(n)`` are strings, as Spark reads them (``spark_struct`` marks
    their fields); structs, arrays and maps of any of these, every part nullable."""
    return parse_type(hive_type).spark()


def spark_field(name: str, hive_type: str):
    """The Spark field (nullable) of a column: a ``char(n)``/``varchar(n)`` column is a
    string field whose metadata says its declared type, as Spark's own readers give it
    (``CharVarcharUtils.replaceCharVarcharWithStringInSchema``); so is a nested column with
    a char or varchar inside, marked with its whole type as Spark's ``catalogString``
    writes it (``struct<c:char(5)>``)."""
    from pyspark.sql.types import StructField

    parsed = parse_type(hive_type)
    declared = parsed.text(quote=False) if parsed.has_char_varchar else None
    metadata = {CHAR_VARCHAR_METADATA_KEY: declared} if declared else None
    return StructField(name, parsed.spark(), True, metadata)


def spark_struct(columns) -> StructType:
    """Spark schema (every field nullable) for ``(name, hive_type)`` columns
    (``spark_field``)."""
    from pyspark.sql.types import StructType

    return StructType([spark_field(c.name, c.type) for c in columns])


def arrow_type_for_spark(hive_type: str) -> pa.DataType:
    """The exact Arrow type Spark expects for a column of ``hive_type``."""
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(spark_type(hive_type), timezone="UTC")


def arrow_schema_for_spark(columns) -> pa.Schema:
    """The Arrow schema (every field nullable) Spark expects for ``(name, hive_type)``
    columns: what a reader hands Spark, and what a writer puts in its Parquet files."""
    return pa.schema(
        [pa.field(c.name, arrow_type_for_spark(c.type), nullable=True) for c in columns]
    )
