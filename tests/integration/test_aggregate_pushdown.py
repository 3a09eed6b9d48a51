"""Partial aggregation pushed into tiered_hive scans (``SupportsPushDownAggregates``): the plan
shows it, each split returns its groups (counted), and every query equals both DuckDB's
answer on the same files and Spark's own answer with pushdown off (the property
``hive.aggregation-pushdown-enabled``), over every column type, with nulls, empty splits,
all-null groups, a partition-column key, decimals of precision 18 and 38, and partial sums
that overflow their type under ANSI on and off. What Spark must not push is not pushed."""

from __future__ import annotations

import os
import random
import re
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch import oracle

pytestmark = pytest.mark.spark

ROWS = 3_000  # per partition: 3 row groups each, 3 partitions
OFF = "hive.aggregation-pushdown-enabled"
# Every aggregation this file checks is pushed to the Python reader, whatever its keys
# (under AUTO only keys that fold a split into few groups are: table_schema.group_keys).
READER = "hive.parquet.reader"
D18_TOP = Decimal("9999999999999999.99")  # the largest decimal(18,2)


def _column_data(part: int, n: int, seed: int) -> dict[str, pa.Array]:
    rng = random.Random(seed)
    ids = list(range(part * n, (part + 1) * n))

    def maybe(i, v, every=7):
        return None if i % every == 0 else v

    return {
        "id": pa.array(ids, pa.int64()),
        "g": pa.array([maybe(i, i % 5, 11) for i in ids], pa.int32()),
        # a group whose values are all null: g2 = 9 has only null i's
        "g2": pa.array([9 if i % 10 == 0 else i % 3 for i in ids], pa.int32()),
        "i": pa.array(
            [None if i % 10 == 0 else maybe(i, rng.randint(-(10**6), 10**6)) for i in ids],
            pa.int32(),
        ),
        "big": pa.array([maybe(i, rng.randint(-(2**62), 2**62)) for i in ids], pa.int64()),
        "sm": pa.array([maybe(i, rng.randint(-30000, 30000)) for i in ids], pa.int16()),
        "d15": pa.array(
            [maybe(i, Decimal(rng.randint(-(10**8), 10**8)).scaleb(-2)) for i in ids],
            pa.decimal128(15, 2),
        ),
        # near decimal(18,2)'s top: any two of them overflow a partial sum of that type
        "d18": pa.array(
            [maybe(i, D18_TOP - Decimal(rng.randint(0, 10**6)).scaleb(-2)) for i in ids],
            pa.decimal128(18, 2),
        ),
        "d38": pa.array(
            [maybe(i, Decimal(rng.randint(-(10**30), 10**30)).scaleb(-10)) for i in ids],
            pa.decimal128(38, 10),
        ),
        "s": pa.array([maybe(i, f"s{rng.randint(0, 999):03d}") for i in ids], pa.string()),
        "day": pa.array([maybe(i, rng.randint(18000, 20000)) for i in ids], pa.int32()).cast(
            pa.date32()
        ),
        "b": pa.array([maybe(i, i % 3 == 0) for i in ids], pa.bool_()),
        "x": pa.array([maybe(i, rng.random() * 100) for i in ids], pa.float64()),
    }


def _on_and_off_views(spark, table: str, prefix: str) -> None:
    """``<prefix>_on`` and ``<prefix>_off``: ``table`` through the Python reader with
    aggregation pushdown on and off."""
    python = spark.read.format("tiered_hive").option(READER, "PYTHON")
    python.load(table).createOrReplaceTempView(f"{prefix}_on")
    python.option(OFF, "false").load(table).createOrReplaceTempView(f"{prefix}_off")


@pytest.fixture(scope="module")
def agg_table(env, tmp_path_factory, spark):
    root = str(tmp_path_factory.mktemp("aggpush") / "t")
    for part, k in enumerate(("a", "b", "c")):
        d = os.path.join(root, f"k={k}")
        os.makedirs(d)
        pq.write_table(
            pa.table(_column_data(part, ROWS, seed=part)),
            os.path.join(d, "part-0.parquet"),
            row_group_size=1000,
        )
    db = env.unique_db("aggpush")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.t", root)
    _on_and_off_views(spark, f"{db}.t", "agg")
    # the default reader (AUTO)
    spark.read.format("tiered_hive").load(f"{db}.t").createOrReplaceTempView("agg_auto")
    return root


def _duckdb(root: str, sql: str) -> list[tuple]:
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET threads = 1")
    con.execute(
        f"CREATE VIEW t AS SELECT * FROM read_parquet('{root}/*/*.parquet', "
        "hive_partitioning = true)"
    )
    return [tuple(r) for r in con.execute(sql.format(t="t")).fetchall()]


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _both(spark, sql: str):
    on = spark.sql(sql.format(t="agg_on"))
    off = spark.sql(sql.format(t="agg_off"))
    return on, off


# Queries a DuckDB answer can check exactly (integers, decimals, strings, dates, booleans).
ORACLE_QUERIES = {
    "every_function_and_type": "SELECT g, sum(i), count(i), max(big), sum(sm), sum(d15), "
    "count(*), sum(d38), min(d15), max(d38), min(s), max(s), "
    "min(day), max(day), min(b), max(b), min(sm), count(x) "
    "FROM {t} GROUP BY g",
    "expressions_after_filters": "SELECT g, sum(d15 * (1 - d15)), "
    "sum((d15 - 1) * (d15 + 1) * 3), sum(i + 5), sum(i * 3 - i), "
    "sum(cast(i AS bigint) * 1000000), count(d15 - 1) FROM {t} "
    "WHERE k <> 'c' AND id >= 1000 AND s >= 's100' "
    "AND day > date '2020-01-01' AND b IS NOT NULL GROUP BY g",
    "partition_key_and_all_null_group": "SELECT k, g2, count(*), sum(i), min(i), max(i), "
    "count(i), min(s) FROM {t} GROUP BY k, g2",
    "global": "SELECT count(*), count(s), sum(d15), min(day), max(d38) FROM {t}",
    "count_star_only": "SELECT count(*) FROM {t} WHERE k = 'b'",
    "empty_splits": "SELECT k, count(*), sum(d15) FROM {t} WHERE id < 10 GROUP BY k",
    "no_rows_at_all": "SELECT count(*), sum(d15), max(s) FROM {t} WHERE id < 0",
    "no_split_at_all": "SELECT count(*), count(s), sum(i) FROM {t} WHERE k = 'z'",
}


@pytest.mark.parametrize("name", list(ORACLE_QUERIES))
def test_pushed_query_equals_duckdb_and_spark_without_pushdown(name, spark, agg_table, counted):
    sql = ORACLE_QUERIES[name]
    on, off = _both(spark, sql)
    assert "PushedAggregates" in _plan(on), name
    with counted() as c:
        got = oracle.spark_rows(on)
    assert oracle.compare_results(oracle.spark_rows(off), got, ordered=False) is None
    assert oracle.compare_results(_duckdb(agg_table, sql), got, ordered=False) is None
    # what reached Spark: the groups of each split (at most all groups), not its rows, plus
    # the extra rows of sums split to fit their type (sum(sm): smallint partials)
    assert c["reader.rows_to_spark"] == c["aggregation.groups_out"]
    groups = c["aggregation.groups_out"] - c["aggregation.sums_split"]
    assert groups <= max(1, c["aggregation.splits"]) * max(1, len(got))


@pytest.mark.parametrize(
    ("sql", "pushed"),
    [
        ("SELECT sum(i), count(*) FROM {t}", True),  # global: one row per split
        ("SELECT k, sum(i) FROM {t} GROUP BY k", True),  # partition key: one group per split
        ("SELECT s, b, sum(i) FROM {t} GROUP BY s, b", True),  # string and boolean keys
        ("SELECT g, sum(i) FROM {t} GROUP BY g", False),  # a numeric key: left to Spark
        ("SELECT s, g, sum(i) FROM {t} GROUP BY s, g", False),
    ],
)
def test_with_sparks_reader_only_keys_that_fold_a_split_are_pushed(
    sql, pushed, spark, agg_table, counted
):
    """Under AUTO every split is read by Spark's own reader in the JVM; an aggregation is
    pushed (and computed in the JVM, over that reader's batches) only when its keys fold each
    split into few groups, and either way the answer is DuckDB's and no Python worker runs."""
    df = spark.sql(sql.format(t="agg_auto"))
    assert ("PushedAggregates" in _plan(df)) is pushed
    with counted() as c:
        got = oracle.spark_rows(df)
    assert oracle.compare_results(_duckdb(agg_table, sql), got, ordered=False) is None
    assert c.get("reader.python_tasks", 0) == 0 and c.get("reader.python_splits", 0) == 0
    if pushed:
        assert c["aggregation.splits"] == c["aggregation.jvm_splits"] == c["reader.spark_splits"]
        assert c["aggregation.splits"] > 0
    else:
        assert c["reader.spark_splits"] > 0 and c.get("aggregation.splits", 0) == 0


def test_pushdown_off_is_the_plain_scan(spark, agg_table):
    _, off = _both(spark, ORACLE_QUERIES["global"])
    plan = _plan(off)
    assert "PushedAggregates" not in plan and "HashAggregate" in plan


def _normalized(plan: str) -> str:
    return re.sub(r"#\d+|plan_id=\d+", "", plan)


@pytest.mark.parametrize(
    "sql",
    [
        # aggregates after a join (TPC-H Q9's shape) and over a distinct count (Q16's)
        "SELECT a.g, sum(b.i) FROM {t} a JOIN {t} b ON a.id = b.id "
        "WHERE a.s >= 's100' AND b.k <> 'c' GROUP BY a.g",
        "SELECT g, count(DISTINCT i) FROM {t} WHERE day > date '2020-01-01' GROUP BY g",
    ],
)
def test_a_query_that_pushes_no_aggregation_plans_and_reads_as_without_pushdown(
    sql, spark, agg_table, counted
):
    """Turning pushdown on changes nothing for a query it cannot push: the same physical
    plan (filters, columns, joins) and the same reads, counted."""
    on, off = _both(spark, sql)
    assert "PushedAggregates" not in _plan(on)
    assert _normalized(_plan(on)) == _normalized(_plan(off))
    with counted() as c_on:
        rows_on = oracle.spark_rows(on)
    with counted() as c_off:
        rows_off = oracle.spark_rows(off)
    assert oracle.compare_results(rows_off, rows_on, ordered=False) is None
    reads = ("planner.splits", "planner.tasks", "reader.rows_read", "reader.rows_to_spark")
    assert {k: c_on[k] for k in reads} == {k: c_off[k] for k in reads}
    assert c_on["reader.rows_to_spark"] > 0


def test_avg_is_pushed_as_sum_and_count_where_that_keeps_its_answer(spark, agg_table):
    """Over smallint and decimal(15,2) Spark's SUM/COUNT rewrite cannot overflow where AVG
    does not; over int (bigint sum) and decimal(38,10) (try_avg) it can, so those are not."""
    sql = "SELECT g, avg(d15), avg(sm), sum(i) FROM {t} GROUP BY g"
    on, off = _both(spark, sql)
    plan = _plan(on)
    pushed = re.search(r"PushedAggregates: \[([^]]*)\]", plan)
    assert pushed, plan
    assert sorted(pushed.group(1).split(", ")) == sorted(
        ["SUM(d15)", "COUNT(d15)", "SUM(sm)", "COUNT(sm)", "SUM(i)"]
    )
    assert sorted(oracle.spark_rows(on), key=repr) == sorted(oracle.spark_rows(off), key=repr)
    for refused in ("avg(i)", "avg(d38)", "avg(big)"):
        on, off = _both(spark, f"SELECT g, avg(d15), {refused} FROM {{t}} GROUP BY g")
        assert "PushedAggregates" not in _plan(on), refused
        assert sorted(oracle.spark_rows(on), key=repr) == sorted(oracle.spark_rows(off), key=repr)


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_partial_sums_that_overflow_their_type_behave_as_spark(ansi, spark, agg_table, counted):
    """Every d18 value is near decimal(18,2)'s top, so a split's sum does not fit the type
    Spark casts partial sums to; the split returns it over several rows, and the total
    (within decimal(28,2)) is Spark's. The same for smallint partial sums. Bigint sums
    overflow (wrap-around with ANSI off, an error with it on), as Spark's own."""
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        # smallint partials overflow too (Spark translates arithmetic only under ANSI)
        sql = "SELECT k, sum(d18), count(d18), sum(sm), max(sm) FROM {t} GROUP BY k"
        on, off = _both(spark, sql)
        assert "PushedAggregates" in _plan(on)
        with counted() as c:
            got = oracle.spark_rows(on)
        assert got and sorted(got, key=repr) == sorted(oracle.spark_rows(off), key=repr)
        assert c["aggregation.sums_split"] > 0
        big = "SELECT k, sum(big * 4) FROM {t} GROUP BY k"
        on, off = _both(spark, big)
        if ansi == "true":
            assert "PushedAggregates" in _plan(on)
            for df in (on, off):
                with pytest.raises(Exception, match="(?i)overflow"):
                    df.collect()
        else:
            assert sorted(oracle.spark_rows(on)) == sorted(oracle.spark_rows(off))
            wrap = "SELECT k, sum(big) FROM {t} GROUP BY k"
            on, off = _both(spark, wrap)
            assert sorted(oracle.spark_rows(on)) == sorted(oracle.spark_rows(off))
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


NOT_PUSHED = {
    "count_distinct": "SELECT g, count(DISTINCT s), sum(i) FROM {t} GROUP BY g",
    "double_filter": "SELECT g, sum(i) FROM {t} WHERE x > 50 GROUP BY g",
    "double_sum": "SELECT g, sum(x) FROM {t} GROUP BY g",
    "expression_key": "SELECT g + 1, sum(i) FROM {t} GROUP BY g + 1",
}


@pytest.mark.parametrize("name", list(NOT_PUSHED))
def test_what_spark_must_not_push_is_not_pushed_and_right(name, spark, agg_table):
    sql = NOT_PUSHED[name]
    on = spark.sql(sql.format(t="agg_on"))
    assert "PushedAggregates" not in _plan(on)
    assert (
        oracle.compare_results(_duckdb(agg_table, sql), oracle.spark_rows(on), ordered=False)
        is None
    )


# -- AVG: Spark's rewrite into SUM and COUNT must not change the answer ----------------------
B_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def avg_edge_table(env, tmp_path_factory, spark):
    """Two files (two splits): bigint values whose exact sum passes the bigint range, ints at
    their maximum, decimals of precision 38 whose sum passes decimal(38)'s range."""
    root = str(tmp_path_factory.mktemp("avgedge") / "t")
    os.makedirs(root)
    d38 = Decimal("9" * 34 + ".1234")
    files = [
        {
            "g": pa.array([1, 1, 2], pa.int32()),
            "big": pa.array([B_MAX - 5, B_MAX - 7, 3], pa.int64()),
            "i": pa.array([2**31 - 1, 2**31 - 1, -(2**31)], pa.int32()),
            "d38": pa.array([d38, d38, Decimal(1)], pa.decimal128(38, 4)),
        },
        {
            "g": pa.array([1, 2], pa.int32()),
            "big": pa.array([B_MAX - 9, 4], pa.int64()),
            "i": pa.array([5, 7], pa.int32()),
            "d38": pa.array([Decimal("1.0001"), Decimal(2)], pa.decimal128(38, 4)),
        },
    ]
    for n, cols in enumerate(files):
        pq.write_table(pa.table(cols), os.path.join(root, f"part-{n}.parquet"))
    db = env.unique_db("avgedge")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.t", root)
    _on_and_off_views(spark, f"{db}.t", "avg")
    spark.read.parquet(root).createOrReplaceTempView("avg_pq")
    return root


def _outcome(df):
    """The rows, or the error's class (Spark's error condition) when the query fails."""
    try:
        return sorted(oracle.spark_rows(df), key=repr)
    except Exception as err:  # noqa: BLE001 - the error is the outcome compared
        m = re.search(r"\[([A-Z_]+)\]", str(err))
        return f"error {m.group(1) if m else type(err).__name__}"


@pytest.mark.parametrize("ansi", ["true", "false"])
@pytest.mark.parametrize(
    "sql",
    [
        # Spark's AVG of an integral column adds in double; the SUM it substitutes is a
        # bigint, which the exact sum of these bigints (or of 2^32 ints) passes
        "SELECT avg(big) FROM {t}",
        "SELECT g, avg(big), count(*) FROM {t} GROUP BY g",
        "SELECT g, avg(i), sum(i) FROM {t} GROUP BY g",
        # try_avg is null on overflow where the substituted SUM under ANSI fails
        "SELECT try_avg(d38) FROM {t}",
        "SELECT try_avg(big) FROM {t}",
    ],
)
def test_an_average_the_rewrite_could_overflow_is_not_pushed_and_right(
    sql, ansi, spark, avg_edge_table
):
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        on = spark.sql(sql.format(t="avg_on"))
        assert "PushedAggregates" not in _plan(on)
        got = _outcome(on)
        assert got == _outcome(spark.sql(sql.format(t="avg_off")))
        assert got == _outcome(spark.sql(sql.format(t="avg_pq")))
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_sum_and_count_of_the_same_bigint_are_still_pushed(ansi, spark, avg_edge_table):
    """Only AVG is refused: the same SUM and COUNT asked for themselves are exact (the
    partial sums are split to fit bigint; the final SUM wraps or fails as Spark's own)."""
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        sql = "SELECT g, sum(big), count(big), min(big) FROM {t} GROUP BY g"
        on = spark.sql(sql.format(t="avg_on"))
        assert "PushedAggregates: [SUM(big), COUNT(big), MIN(big)]" in _plan(on)
        got = _outcome(on)
        assert got == _outcome(spark.sql(sql.format(t="avg_pq")))
        assert got == ("error ARITHMETIC_OVERFLOW" if ansi == "true" else got)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
