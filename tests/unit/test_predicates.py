"""Predicates agree with SQL: Arrow evaluation and Python evaluation are compared with DuckDB
(an engine nobody here wrote) on data with nulls, and statistics pruning is checked to be
sound (never prunes a chunk holding a matching row) on seeded random data."""

import datetime as dt
import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from raptorx_py import predicates as P
from raptorx_py.hive.model import ColumnStats

DATA = pa.table(
    {
        "i": pa.array([1, 2, None, 4, 5, 2], pa.int64()),
        "s": pa.array(["apple", "banana", None, "cherry", "apricot", ""], pa.string()),
        "d": pa.array([dt.date(2024, 1, k) for k in (1, 5, 9, 13, 17)] + [None], pa.date32()),
        "x": pa.array(
            [
                Decimal("0.05"),
                Decimal("0.06"),
                None,
                Decimal("0.07"),
                Decimal("0.10"),
                Decimal("0.06"),
            ],
            pa.decimal128(15, 2),
        ),
    }
)

CASES = [
    (P.Comparison("=", "i", 2), "i = 2"),
    (P.Comparison("<", "i", 4), "i < 4"),
    (P.Comparison("<=", "i", 4), "i <= 4"),
    (P.Comparison(">", "i", 2), "i > 2"),
    (P.Comparison(">=", "d", dt.date(2024, 1, 9)), "d >= DATE '2024-01-09'"),
    (P.Comparison("<=>", "i", 2), "i IS NOT DISTINCT FROM 2"),
    (P.Comparison("<=>", "i", None), "i IS NOT DISTINCT FROM NULL"),
    (P.Not(P.Comparison("<=>", "i", 2)), "NOT (i IS NOT DISTINCT FROM 2)"),
    (P.Not(P.Comparison("=", "i", 2)), "NOT (i = 2)"),
    (P.InList("i", (1, 4)), "i IN (1, 4)"),
    (P.Not(P.InList("i", (1, 4))), "NOT (i IN (1, 4))"),
    (P.InList("s", ("apple", "zzz")), "s IN ('apple', 'zzz')"),
    (P.IsNull("s"), "s IS NULL"),
    (P.IsNotNull("s"), "s IS NOT NULL"),
    (P.Not(P.IsNull("d")), "NOT (d IS NULL)"),
    (P.StringMatch("starts", "s", "ap"), "starts_with(s, 'ap')"),
    (P.StringMatch("ends", "s", "y"), "suffix(s, 'y')"),
    (P.StringMatch("contains", "s", "an"), "contains(s, 'an')"),
    (P.Not(P.StringMatch("contains", "s", "an")), "NOT contains(s, 'an')"),
    (P.Comparison(">=", "x", Decimal("0.06")), "x >= 0.06"),
    (P.Comparison("<", "x", Decimal("0.065")), "x < 0.065"),
    (P.InList("x", (Decimal("0.06"), Decimal("0.10"))), "x IN (0.06, 0.10)"),
    (P.Comparison("<", "s", "b"), "s < 'b'"),
]


def _duck_rows(where: str) -> list[int]:
    con = duckdb.connect()
    con.register("t", DATA.append_column("rid", pa.array(range(DATA.num_rows))))
    return sorted(r[0] for r in con.execute(f"SELECT rid FROM t WHERE {where}").fetchall())


@pytest.mark.parametrize("pred,sql", CASES, ids=[c[1] for c in CASES])
def test_arrow_and_python_agree_with_duckdb(pred, sql):
    expected = _duck_rows(sql)
    tagged = DATA.append_column("rid", pa.array(range(DATA.num_rows)))
    got_arrow = sorted(tagged.filter(P.to_arrow(pred)).column("rid").to_pylist())
    assert got_arrow == expected
    rows = DATA.to_pylist()
    got_python = [k for k, row in enumerate(rows) if P.evaluate(pred, row) is True]
    assert got_python == expected


@pytest.mark.parametrize("seed", range(20))
def test_stats_pruning_is_sound(seed):
    rnd = random.Random(seed)
    for _ in range(200):
        n = rnd.randint(1, 6)
        values = [rnd.choice([None, *range(10)]) for _ in range(n)]
        present = [v for v in values if v is not None]
        stats = {
            "i": ColumnStats(
                values.count(None),
                min(present) if present else None,
                max(present) if present else None,
            )
        }
        v = rnd.randint(-1, 11)
        pred = rnd.choice(
            [
                P.Comparison(rnd.choice(["=", "<", "<=", ">", ">=", "<=>"]), "i", v),
                P.Comparison("<=>", "i", None),
                P.InList("i", (v, rnd.randint(0, 9))),
                P.IsNull("i"),
                P.IsNotNull("i"),
                P.Not(P.Comparison("=", "i", v)),
                P.Not(P.IsNull("i")),
                P.Not(P.IsNotNull("i")),
            ]
        )
        any_match = any(P.evaluate(pred, {"i": x}) is True for x in values)
        if any_match:
            assert P.may_match(pred, stats, n), (pred, values, stats)


def test_stats_prune_what_cannot_match():
    s = {"d": ColumnStats(0, dt.date(1994, 1, 1), dt.date(1994, 1, 31))}
    assert not P.may_match(P.Comparison(">=", "d", dt.date(1994, 2, 1)), s, 10)
    assert P.may_match(P.Comparison(">=", "d", dt.date(1994, 1, 31)), s, 10)
    assert not P.may_match(P.IsNull("d"), s, 10)
    assert not P.may_match(P.Comparison("=", "d", dt.date(1993, 5, 1)), s, 10)
    # unknown bounds or incomparable values never prune
    assert P.may_match(P.Comparison("=", "d", "oops"), s, 10)
    assert P.may_match(P.Comparison("=", "d", dt.date(1990, 1, 1)), {"d": ColumnStats()}, 10)


def test_from_spark_filter_and_exactness():
    from pyspark.sql import datasource as ds

    types = {"a": "bigint", "f": "double", "k": "string"}
    assert P.from_spark_filter(ds.EqualTo(("a",), 1), types) == P.Comparison("=", "a", 1)
    assert P.from_spark_filter(ds.Not(ds.In(("a",), (1, 2))), types) == P.Not(P.InList("a", (1, 2)))
    assert P.from_spark_filter(ds.StringStartsWith(("k",), "x"), types) == P.StringMatch(
        "starts", "k", "x"
    )
    assert P.from_spark_filter(ds.EqualTo(("a", "nested"), 1), types) is None
    assert P.from_spark_filter(ds.In(("a",), (1, None)), types) is None
    with pytest.raises(ValueError, match="column 'nope', which does not exist"):
        P.from_spark_filter(ds.IsNull(("nope",)), types)
    assert P.is_exact(P.Comparison("=", "a", 1), types, set())
    assert not P.is_exact(P.Comparison("=", "f", 1.0), types, set())
