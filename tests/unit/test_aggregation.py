"""The pushed partial aggregation's Arrow evaluation (datasource/aggregation.py), without
Spark: Spark's decimal rounding and overflow, one row per group with nulls as a group, sums
split over rows when they do not fit the type Spark casts them to, filters from JSON."""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from raptorx_py import predicates as preds
from raptorx_py.datasource.planning.table_schema import group_keys
from raptorx_py.datasource.reading import aggregation as A
from raptorx_py.errors import AggregateOverflowError


def col(name, t):
    return {"op": "column", "name": name, "type": t}


def lit(v, t):
    return {"op": "literal", "value": v, "type": t}


def op(o, left, right, t):
    return {"op": o, "left": left, "right": right, "type": t}


def agg_json(group_by, aggregates, filters=()):
    return json.dumps(
        {
            "version": 1,
            "group_by": [{"column": c, "type": t} for c, t in group_by],
            "aggregates": aggregates,
            "filters": list(filters),
        }
    )


def out_schema(fields):
    return pa.schema([pa.field(n, t, nullable=True) for n, t in fields])


def test_decimal_product_rounds_half_away_from_zero_to_sparks_scale():
    # decimal(38,6) = decimal(32,4) * decimal(16,2) under precision loss: exact 8 digits of
    # scale, rounded to 6 as Spark's HALF_UP (away from zero) does.
    t = pa.table(
        {
            "a": pa.array([Decimal("1.0005"), Decimal("-1.0005"), None], pa.decimal128(32, 4)),
            "b": pa.array(
                [Decimal("0.01"), Decimal("0.01"), Decimal("1.00")], pa.decimal128(16, 2)
            ),
        }
    )
    e = A.Expr.from_json(
        op("*", col("a", "decimal(32,4)"), col("b", "decimal(16,2)"), "decimal(38,6)")
    )
    got = A.evaluate(e, t)
    assert got.type == pa.decimal128(38, 6)
    assert got.to_pylist() == [Decimal("0.010005"), Decimal("-0.010005"), None]
    e = A.Expr.from_json(
        op("*", col("a", "decimal(32,4)"), col("b", "decimal(16,2)"), "decimal(20,5)")
    )
    assert A.evaluate(e, t).to_pylist() == [Decimal("0.01001"), Decimal("-0.01001"), None]


def test_arithmetic_overflow_fails_as_spark_ansi_does():
    t = pa.table(
        {
            "i": pa.array([2**31 - 1], pa.int32()),
            "d": pa.array([Decimal("99.99")], pa.decimal128(4, 2)),
        }
    )
    e = A.Expr.from_json(op("+", col("i", "int"), lit("1", "int"), "int"))
    with pytest.raises(AggregateOverflowError, match=r"\(i \+ 1\) overflows int"):
        A.evaluate(e, t)
    e = A.Expr.from_json(
        op("*", col("d", "decimal(4,2)"), lit("10", "decimal(2,0)"), "decimal(4,2)")
    )
    with pytest.raises(AggregateOverflowError, match=r"overflows decimal\(4,2\)"):
        A.evaluate(e, t)


def test_one_row_per_group_with_nulls_all_null_groups_and_count_star():
    t = pa.table(
        {
            "k": pa.array(["a", "a", None, "b", "b"]),
            "v": pa.array([1, 2, 3, None, None], pa.int32()),
        }
    )
    agg = A.PushedAggregation.from_json(
        agg_json(
            [("k", "string")],
            [
                {"fn": "sum", "type": "int", "input": col("v", "int")},
                {"fn": "count", "type": "bigint", "input": col("v", "int")},
                {"fn": "min", "type": "int", "input": col("v", "int")},
                {"fn": "count_star", "type": "bigint"},
            ],
        )
    )
    schema = out_schema(
        [
            ("k", pa.string()),
            ("s", pa.int32()),
            ("c", pa.int64()),
            ("m", pa.int32()),
            ("n", pa.int64()),
        ]
    )
    batch = A.aggregate_split(agg, t, t.num_rows, schema)
    assert batch.schema == schema
    assert sorted(batch.to_pylist(), key=repr) == sorted(
        [
            {"k": "a", "s": 3, "c": 2, "m": 1, "n": 2},
            {"k": None, "s": 3, "c": 1, "m": 3, "n": 1},
            {"k": "b", "s": None, "c": 0, "m": None, "n": 2},
        ],
        key=repr,
    )


def test_empty_split_gives_no_group_but_one_row_for_a_global_aggregation():
    grouped = A.PushedAggregation.from_json(
        agg_json([("k", "string")], [{"fn": "count_star", "type": "bigint"}])
    )
    assert (
        A.aggregate_split(grouped, None, 0, out_schema([("k", pa.string()), ("n", pa.int64())]))
        is None
    )
    total = A.PushedAggregation.from_json(
        agg_json(
            [],
            [
                {"fn": "count_star", "type": "bigint"},
                {"fn": "sum", "type": "int", "input": col("v", "int")},
            ],
        )
    )
    schema = out_schema([("n", pa.int64()), ("s", pa.int32())])
    assert A.aggregate_split(total, None, 0, schema).to_pylist() == [{"n": 0, "s": None}]
    # count(*) alone reads no column: the row count is all there is
    assert A.aggregate_split(
        total.__class__(total.group_by, total.aggregates[:1]),
        None,
        7,
        out_schema([("n", pa.int64())]),
    ).to_pylist() == [{"n": 7}]


@pytest.mark.parametrize(
    "spark_type,arrow_type,values",
    [
        ("smallint", pa.int16(), [30_000] * 5 + [-1, 2]),
        (
            "decimal(18,2)",
            pa.decimal128(18, 2),
            [
                Decimal("9999999999999999.99"),
                Decimal("9000000000000000.00"),
                Decimal("-1.50"),
                Decimal("9999999999999999.99"),
            ],
        ),
    ],
)
def test_a_sum_that_does_not_fit_its_type_is_split_over_rows_that_do(
    spark_type, arrow_type, values
):
    rng = random.Random(7)
    rows = [(rng.choice("xy"), v) for v in values] + [("z", values[-1])]
    t = pa.table(
        {"k": pa.array([k for k, _ in rows]), "v": pa.array([v for _, v in rows], arrow_type)}
    )
    agg = A.PushedAggregation.from_json(
        agg_json(
            [("k", "string")],
            [
                {"fn": "sum", "type": spark_type, "input": col("v", spark_type)},
                {"fn": "count", "type": "bigint", "input": col("v", spark_type)},
            ],
        )
    )
    schema = out_schema([("k", pa.string()), ("s", arrow_type), ("c", pa.int64())])
    out = A.aggregate_split(agg, t, t.num_rows, schema).to_pylist()
    lo, hi = A._bound(spark_type)
    for key in "xyz":
        mine = [r for r in out if r["k"] == key]
        want = [v for k, v in rows if k == key]
        if not want:
            continue
        assert sum(Decimal(r["s"]) for r in mine) == sum(Decimal(v) for v in want)
        assert all(lo <= Decimal(r["s"]) <= hi for r in mine)
        assert sum(r["c"] for r in mine) == len(want)
    assert len(out) > len({k for k, _ in rows})  # some group did need more than one row


def test_filters_come_as_the_predicates_pyspark_filters_would_make():
    agg = A.PushedAggregation.from_json(
        agg_json(
            [],
            [{"fn": "count_star", "type": "bigint"}],
            [
                {"op": ">=", "column": "day", "value": {"type": "date", "value": "1994-01-01"}},
                {"op": "in", "column": "d", "values": [{"type": "decimal", "value": "0.05"}]},
                {"op": "not", "child": {"op": "is_null", "column": "s"}},
                {"op": "<=>", "column": "i", "value": None},
                {"op": "starts", "column": "s", "value": "ab"},
                {"op": "=", "column": "b", "value": {"type": "boolean", "value": "true"}},
                {"op": "<", "column": "i", "value": {"type": "integer", "value": "-3"}},
            ],
        )
    )
    assert agg.filters == (
        preds.Comparison(">=", "day", dt.date(1994, 1, 1)),
        preds.InList("d", (Decimal("0.05"),)),
        preds.Not(preds.IsNull("s")),
        preds.Comparison("<=>", "i", None),
        preds.StringMatch("starts", "s", "ab"),
        preds.Comparison("=", "b", True),
        preds.Comparison("<", "i", -3),
    )


def test_group_keys_by_reader():
    """Under PYTHON any column may be a group key; under AUTO and SPARK only partition keys
    and strings, booleans and dates (keys that fold a split into few groups)."""
    from pyspark.sql.types import (
        BooleanType,
        DateType,
        DecimalType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    schema = StructType(
        [
            StructField("orderkey", LongType()),
            StructField("flag", StringType()),
            StructField("open", BooleanType()),
            StructField("day", DateType()),
            StructField("price", DecimalType(15, 2)),
            StructField("year", LongType()),
        ]
    )
    assert group_keys(schema, ["year"], "PYTHON") is None
    for reader in ("AUTO", "SPARK"):
        assert group_keys(schema, ["year"], reader) == ["flag", "open", "day", "year"]
    assert group_keys(StructType([StructField("k", LongType())]), [], "AUTO") == []
