"""TPC-H substitution parameters (raptorx_py/tpch/parameters.py): the validation set gives
the qualification texts unchanged, seeded sets follow the specification's rules (clause
2.4), and every drawn text runs in DuckDB (and, in Spark, equals DuckDB's results)."""

from __future__ import annotations

import datetime as dt
import hashlib
import re

import pytest

from raptorx_py.tpch import oracle, parameters, queries

SEEDS = range(40)


def test_validation_values_give_the_qualification_texts_unchanged():
    # The digests of the 22 texts as they were before the placeholders (commit 6f64441):
    # fragment keys, recorded results and the DuckDB oracle all depend on them.
    for scale, digest in (
        (0.01, "100fc0095a683d6edcba2b3b6004323abffe8c89ed50cf985e4419b8b6ca50be"),
        (1, "525b82698aae811920aac9e0417af7636c0aad366e8b46fb145ea7f0d12ff403"),
    ):
        text = "\n\n".join(queries.query_text(n, scale) for n in queries.QUERY_NUMBERS)
        assert hashlib.sha256(text.encode()).hexdigest() == digest


def test_every_placeholder_has_a_value_in_every_set():
    for n in queries.QUERY_NUMBERS:
        body = "\n".join(
            line for line in queries.raw_query_text(n).splitlines() if not line.startswith("--")
        )
        names = set(re.findall(r"\{([A-Za-z0-9_]+)\}", body)) - {"q11_fraction"}
        assert names == set(parameters.VALIDATION[n]), f"Q{n}"
        for seed in SEEDS:
            drawn = parameters.parameter_set(seed)[n]
            assert set(drawn) == names, f"Q{n} seed {seed}"
            assert "{" not in queries.query_text(n, 1, parameters=drawn)
    with pytest.raises(ValueError, match="Q6: no value for its parameter DISCOUNT"):
        queries.query_text(6, 1, parameters={"DATE": "1994-01-01", "QUANTITY": "24"})


def test_seeded_sets_follow_the_rules_and_repeat_by_seed():
    sets = [parameters.parameter_set(seed) for seed in SEEDS]
    assert parameters.parameter_set(7) == sets[7]
    assert len({repr(s) for s in sets}) == len(sets)
    assert len(parameters.COLORS) == 92 and len(parameters.NATIONS) == 25
    for s in sets:
        assert 60 <= int(s[1]["DELTA"]) <= 120
        assert 1 <= int(s[2]["SIZE"]) <= 50
        assert dt.date(1995, 3, 1) <= dt.date.fromisoformat(s[3]["DATE"]) <= dt.date(1995, 3, 31)
        for n, first, last in ((4, (1993, 1), (1997, 10)), (10, (1993, 2), (1995, 1))):
            day = dt.date.fromisoformat(s[n]["DATE"])
            assert day.day == 1 and first <= (day.year, day.month) <= last
        for n in (5, 6, 12, 20):
            day = dt.date.fromisoformat(s[n]["DATE"])
            assert (day.month, day.day) == (1, 1) and 1993 <= day.year <= 1997
        assert 0.02 <= float(s[6]["DISCOUNT"]) <= 0.09 and s[6]["QUANTITY"] in ("24", "25")
        assert s[7]["NATION1"] != s[7]["NATION2"]
        assert parameters.NATIONS[s[8]["NATION"]] == s[8]["REGION"]
        assert len(s[8]["TYPE"].split()) == 3
        assert s[12]["SHIPMODE1"] != s[12]["SHIPMODE2"]
        assert len({s[16][f"SIZE{i}"] for i in range(1, 9)}) == 8
        assert all(re.fullmatch(r"Brand#[1-5][1-5]", s[19][f"BRAND{i}"]) for i in (1, 2, 3))
        assert 312 <= int(s[18]["QUANTITY"]) <= 315
        codes = [int(s[22][f"I{i}"]) for i in range(1, 8)]
        assert len(set(codes)) == 7 and all(10 <= c <= 34 for c in codes)


@pytest.fixture(scope="module")
def seeded_duckdb(tpch_sf001_dir, tpch_scale):
    chosen = parameters.parameter_set(1)
    return chosen, oracle.duckdb_results(
        tpch_sf001_dir, queries.QUERY_NUMBERS, tpch_scale, threads=2, parameters=chosen
    )


def test_every_seeded_text_runs_in_duckdb_and_answers_otherwise(
    seeded_duckdb, tpch_sf001_dir, tpch_scale
):
    chosen, results = seeded_duckdb
    assert set(results) == set(queries.QUERY_NUMBERS)
    validation = oracle.duckdb_results(tpch_sf001_dir, [1, 6], tpch_scale, threads=2)
    assert chosen[1]["DELTA"] != "90" and results[1] != validation[1]
    assert results[6] != validation[6]


@pytest.mark.spark
@pytest.mark.parametrize("n", [1, 3, 6, 14, 19], ids=lambda n: f"q{n:02d}")
def test_seeded_text_in_spark_equals_duckdb(n, seeded_duckdb, spark, tpch_sf001_dir, tpch_scale):
    chosen, results = seeded_duckdb
    queries.register_views(spark, queries.parquet_reader(spark, tpch_sf001_dir))
    actual = oracle.spark_rows(spark.sql(queries.query_text(n, tpch_scale, "spark", chosen[n])))
    diff = oracle.compare_results(
        results[n], actual, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"Q{n} with {chosen[n]}: {diff}"
