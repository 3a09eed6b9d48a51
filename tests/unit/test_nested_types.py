"""Nested column types (struct, array, map): the Hive type strings registration gives them
(from Parquet's Arrow types and ORC's own types), the parser that turns a Hive string into
Spark's type without a JVM, and what nested columns do not get: statistics, exact filters,
partition keys. Spark's own DDL parser checks the same strings in
``tests/integration/test_nested_columns.py``."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from raptorx_py import predicates as preds
from raptorx_py.errors import SchemaError
from raptorx_py.hive.column_types import (
    CHAR_VARCHAR_METADATA_KEY,
    arrow_to_hive,
    arrow_type_for_spark,
    check_partition_key_type,
    is_nested,
    normalized_type,
    parse_type,
    quote_field_name,
    spark_field,
    spark_type,
)
from raptorx_py.tables.table_registration import register_external_table
from tests.support import nested_data


@pytest.fixture
def ms(env):
    with env.metastore() as m:
        yield m


# -- the parser ------------------------------------------------------------------------------
ROUND_TRIPS = [
    # (Hive text as written, canonical text; Spark's simpleString is the canonical text)
    ("struct<a:int,b:string>", "struct<a:int,b:string>"),
    ("array<bigint>", "array<bigint>"),
    ("map<string,int>", "map<string,int>"),
    ("STRUCT< a : DECIMAL(10, 2) , b:Array<Map<String,Array<Date>>> >",
     "struct<a:decimal(10,2),b:array<map<string,array<date>>>>"),
    ("array<struct<x:timestamp,y:timestamp_ntz,z:binary>>",
     "array<struct<x:timestamp,y:timestamp_ntz,z:binary>>"),
    ("map<int,struct<inner:struct<v:bigint>,tags:array<string>>>",
     "map<int,struct<inner:struct<v:bigint>,tags:array<string>>>"),
    ("struct<A_1:tinyint,b:smallint,c:float,d:double,e:boolean>",
     "struct<A_1:tinyint,b:smallint,c:float,d:double,e:boolean>"),
]  # fmt: skip


@pytest.mark.parametrize("text,canonical", ROUND_TRIPS)
def test_a_nested_hive_type_parses_to_sparks_type_and_back(text, canonical):
    assert normalized_type(text) == canonical
    assert spark_type(text).simpleString() == canonical
    assert normalized_type(canonical) == canonical  # canonical is a fixed point
    assert is_nested(text)


def test_every_part_of_a_nested_spark_type_is_nullable_as_spark_reads_files():
    t = spark_type("map<string,array<struct<a:int>>>")
    assert t == T.MapType(
        T.StringType(),
        T.ArrayType(T.StructType([T.StructField("a", T.IntegerType(), True)]), True),
        True,
    )


def test_field_names_are_quoted_as_sparks_ddl_quotes_them():
    assert quote_field_name("plain_1") == "plain_1"
    assert quote_field_name("a b") == "`a b`"
    assert quote_field_name("123") == "`123`"
    assert quote_field_name("x`y") == "`x``y`"
    text = "struct<`a b`:int,`x``y`:array<string>,`123`:int>"
    assert normalized_type(text) == text
    names = [f.name for f in spark_type(text).fields]
    assert names == ["a b", "x`y", "123"]


def test_a_char_inside_a_nested_type_marks_the_field_with_the_whole_type():
    """As Spark's ``replaceCharVarcharWithStringInSchema``: the field's type is Spark's
    with strings, its metadata the declared type as ``catalogString`` writes it."""
    f = spark_field("s", "struct<`a b`:char(5),v:array<varchar(3)>>")
    assert f.dataType == spark_type("struct<`a b`:string,v:array<string>>")
    assert f.metadata == {CHAR_VARCHAR_METADATA_KEY: "struct<a b:char(5),v:array<varchar(3)>>"}
    assert spark_field("s", "struct<a:int>").metadata == {}


@pytest.mark.parametrize(
    "bad",
    [
        "struct<>",
        "struct<a int>",
        "array<int",
        "map<string>",
        "array<int>>",
        "uniontype<int,string>",
        "struct<a:decimal(39,2)>",
        "struct<`a:int>",
        "array<char>",
    ],
)
def test_a_malformed_or_unsupported_type_is_a_schema_error_naming_it(bad):
    with pytest.raises(SchemaError, match="is not supported by tiered_hive"):
        spark_type(bad)


def test_flat_types_parse_as_before():
    assert spark_type("decimal(15,2)") == T.DecimalType(15, 2)
    assert spark_type("integer") == T.IntegerType()
    assert spark_type("varchar(4)") == T.StringType()
    assert not is_nested("decimal(15,2)") and not is_nested("string")


def test_the_arrow_type_spark_expects_for_a_nested_type():
    t = arrow_type_for_spark("struct<ts:timestamp,m:map<string,array<decimal(10,2)>>>")
    assert t == pa.struct(
        [
            ("ts", pa.timestamp("us", tz="UTC")),
            ("m", pa.map_(pa.string(), pa.list_(pa.decimal128(10, 2)))),
        ]
    )


# -- from Arrow (Parquet registration) -----------------------------------------------------
def test_arrow_nested_types_map_to_hive_strings():
    t = pa.struct(
        [
            ("a", pa.int16()),
            ("l", pa.large_list(pa.string_view())),
            ("m", pa.map_(pa.string(), pa.struct([("d", pa.date32())]))),
        ]
    )
    assert (
        arrow_to_hive(t, "s") == "struct<a:smallint,l:array<string>,m:map<string,struct<d:date>>>"
    )
    assert arrow_to_hive(pa.list_(pa.timestamp("ms")), "x") == "array<timestamp_ntz>"
    # An INT96 leaf inside (pyarrow presents it in nanoseconds) is Spark's timestamp.
    nanos = pa.struct([("i", pa.int32()), ("t", pa.timestamp("ns"))])
    assert arrow_to_hive(nanos, "s", ("INT32", "INT96")) == "struct<i:int,t:timestamp>"
    with pytest.raises(SchemaError, match=r"column 's\.t' holds nanosecond timestamps"):
        arrow_to_hive(nanos, "s", ("INT32", "INT64"))


def test_a_parquet_table_with_nested_columns_registers_with_hive_types(tmp_path, env, ms):
    root = str(tmp_path / "t")
    nested_data.write_pyarrow(root, nested_data.rows())
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    assert {c.name: c.type for c in t.all_columns} == nested_data.HIVE_TYPES
    # No statistics of a nested column: only the flat ``id`` has any.
    for p in ms.list_partitions(t):
        assert set(p.stats) == {"id"}, p.stats
        assert p.stats["id"].low is not None


def test_spark_int96_timestamps_inside_a_struct_are_timestamps(tmp_path, env, ms):
    root = tmp_path / "t"
    root.mkdir()
    table = pa.table(
        {
            "s": pa.array(
                [{"t": dt.datetime(2020, 1, 1), "n": 1}],
                pa.struct([("t", pa.timestamp("us")), ("n", pa.int64())]),
            )
        }
    )
    pq.write_table(table, str(root / "f.parquet"), use_deprecated_int96_timestamps=True)
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", str(root))
    assert t.columns[0].type == "struct<t:timestamp,n:bigint>"


# -- from ORC (pyorc's types) ----------------------------------------------------------------
def _pyorc_file(path, type_text, rows):
    import pyorc

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f, pyorc.Writer(f, type_text) as w:
        for r in rows:
            w.write(r)


def test_an_orc_table_with_nested_columns_registers_with_hive_types(tmp_path, env, ms):
    root = str(tmp_path / "t")
    nested_data.write_pyorc(root, nested_data.rows())
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    types = {c.name: c.type for c in t.all_columns}
    assert types == {
        **nested_data.HIVE_TYPES,
        "s": "struct<a:int,b:string,d:decimal(10,2),ts:timestamp,day:date,c:char(5)>",
    }
    assert all(set(p.stats) == {"id"} for p in ms.list_partitions(t))


def test_orc_nested_timestamps_and_odd_names_read_as_sparks_orc_reader_types_them(
    tmp_path, env, ms
):
    path = str(tmp_path / "t" / "000000_0")
    _pyorc_file(
        path,
        "struct<s:struct<`a b`:timestamp with local time zone,t:timestamp,v:varchar(3)>>",
        [((None, None, None),)],
    )
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", str(tmp_path / "t"))
    assert t.columns[0].type == "struct<`a b`:timestamp,t:timestamp,v:varchar(3)>"


def test_a_union_inside_a_nested_orc_column_is_refused_naming_the_column(tmp_path, env, ms):
    root = tmp_path / "t"
    _pyorc_file(str(root / "000000_0"), "struct<s:array<uniontype<int,string>>>", [([7],)])
    with pytest.raises(SchemaError, match=r"column 's' has ORC type array<uniontype<int,string>>"):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", str(root))


# -- what nested columns do not get -------------------------------------------------------------
def test_filters_on_nested_columns_are_not_exact():
    types = {"s": "struct<a:int>", "arr": "array<int>", "m": "map<string,int>", "i": "int"}
    for column in ("s", "arr", "m"):
        for p in (preds.IsNull(column), preds.IsNotNull(column)):
            assert not preds.is_exact(p, types, set()), p
    assert preds.is_exact(preds.IsNotNull("i"), types, set())


def test_a_nested_type_is_no_partition_key_type():
    for t in ("struct<a:int>", "array<int>", "map<string,int>"):
        with pytest.raises(SchemaError, match="partition key 'k' cannot have type"):
            check_partition_key_type(t, "k")


def test_parse_type_keeps_field_order_and_kinds():
    parsed = parse_type("struct<z:int,a:map<string,array<int>>>")
    assert [n for n, _ in parsed.fields] == ["z", "a"]
    assert parsed.fields[1][1].kind == "map"
    assert parsed.fields[1][1].fields[1][1].text() == "array<int>"


def test_writes_refuse_chars_and_orc_timestamp_ntz_inside_nested_columns():
    from raptorx_py.hive.model import Column
    from raptorx_py.tables.write_target import check_writable

    with pytest.raises(SchemaError, match="char/varchar column"):
        check_writable("d.t", [Column("s", "struct<c:char(5)>")], "PARQUET")
    with pytest.raises(SchemaError, match=r"timestamp_ntz column\(s\) a"):
        check_writable("d.t", [Column("a", "array<timestamp_ntz>")], "ORC")
    check_writable("d.t", [Column("a", "array<timestamp_ntz>")], "PARQUET")


def test_orc_writes_refuse_old_dates_inside_nested_columns(tmp_path):
    from raptorx_py.errors import UnsupportedValueError
    from raptorx_py.tables.data_files import check_orc_calendar

    old = dt.date(1500, 3, 1)
    table = pa.table(
        {
            "m": pa.array(
                [{"k": [dt.date(2020, 1, 1), old]}], pa.map_(pa.string(), pa.list_(pa.date32()))
            ),
        }
    )
    with pytest.raises(UnsupportedValueError, match=r"column 'm\.value\.element' holds 1500-03-01"):
        check_orc_calendar(table, "x")
    check_orc_calendar(pa.table({"s": pa.array([{"d": dt.date(2020, 1, 1)}])}), "x")
