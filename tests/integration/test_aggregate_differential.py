"""Aggregation pushdown against Spark, on random tables and random queries.

The rule: a pushed aggregation returns what the same query returns without pushdown, for
every function, type and value, in both ANSI modes, or it is not pushed. Each query of
``aggregate_differential.random_query`` runs four ways, ``tiered_hive`` with pushdown on
under the Python reader, under the default reader (which computes what it pushes in the
JVM), with it off (``hive.aggregation-pushdown-enabled=false``) and Spark's own Parquet reader on
the same files, under ANSI on and off, with a drawn session time zone and decimal
precision-loss setting; the rows (or the error condition) must be equal: exactly, doubles
within ``DOUBLE_REL_TOL`` (Spark's own double sums depend on the order of additions).
Seeded: a failure names the seed and the query.

The default suite runs one table and ``QUERIES`` queries (about half a minute on two
cores); ``make stress`` (``-m stress``) runs the same table with ``STRESS_QUERIES`` queries
(the same draw, continued: the first ``QUERIES`` are the default run's) and more tables,
larger, with more queries.
"""

from __future__ import annotations

import random

import pytest

from raptorx_py.tables.table_registration import register_external_table
from tests.support import aggregate_differential as gen

pytestmark = pytest.mark.spark

OFF = "hive.aggregation-pushdown-enabled"
# Every aggregation this file checks is pushed to the Python reader, whatever its keys
# (under AUTO only keys that fold a split into few groups are: table_schema.group_keys).
READER = "hive.parquet.reader"
PRECISION_LOSS = "spark.sql.decimalOperations.allowPrecisionLoss"
SEED = 27
#: Seed 27's first 7 queries give 4 pushed (query, ANSI mode) pairs, 10 not pushed and 3
#: failing in Spark too (the fewest that meet the test's checks: 6 give 2 pushed); its first
#: 10 (the default until 2026-11-27), 8, 12 and 3; its first 30 (the stress run), 26, 34
#: and 9.
QUERIES = 7
STRESS_QUERIES = 30


def _views(spark, env, root: str, seed: int) -> dict[str, str]:
    db = env.unique_db(f"aggdiff{seed}_")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.t", root)
    names = {way: f"aggdiff_{seed}_{way}" for way in ("on", "jvm", "off", "spark")}
    spark.read.format("tiered_hive").option(READER, "PYTHON").load(
        f"{db}.t"
    ).createOrReplaceTempView(names["on"])
    # the default reader: the aggregations it pushes are computed in the JVM
    spark.read.format("tiered_hive").load(f"{db}.t").createOrReplaceTempView(names["jvm"])
    spark.read.format("tiered_hive").option(READER, "PYTHON").option(OFF, "false").load(
        f"{db}.t"
    ).createOrReplaceTempView(names["off"])
    spark.read.parquet(root).createOrReplaceTempView(names["spark"])
    # one table: the same columns and types every way (the partition keys as Spark infers)
    columns = {
        way: sorted((f.name, f.dataType.simpleString()) for f in spark.table(v).schema)
        for way, v in names.items()
    }
    assert columns["on"] == columns["jvm"] == columns["off"] == columns["spark"]
    return names


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def run_differential(spark, env, tmp_path_factory, seed: int, queries: int, max_rows: int):
    """Draw a table and ``queries`` queries from ``seed``; every query, in both ANSI modes,
    must answer the same three ways. Returns how many (query, mode) pairs were pushed."""
    root = str(tmp_path_factory.mktemp(f"aggdiff{seed}") / "t")
    assert gen.write_table(root, seed, max_rows) > 6  # a partition of several files (splits)
    views = _views(spark, env, root, seed)
    rng = random.Random(seed)
    pushed = not_pushed = errors = jvm_pushed = 0
    failures = []
    try:
        for q in range(queries):
            query = gen.random_query(rng)
            spark.conf.set("spark.sql.session.timeZone", query.zone)
            spark.conf.set(PRECISION_LOSS, str(query.precision_loss).lower())
            for ansi in ("true", "false"):
                spark.conf.set("spark.sql.ansi.enabled", ansi)
                dfs = {way: spark.sql(query.sql.format(t=v)) for way, v in views.items()}
                if "PushedAggregates" in _plan(dfs["on"]):
                    pushed += 1
                else:
                    not_pushed += 1
                jvm_pushed += "PushedAggregates" in _plan(dfs["jvm"])
                got = {way: gen.outcome(df) for way, df in dfs.items()}
                errors += got["spark"][0] == "error"
                for way in ("on", "jvm", "off"):
                    diff = gen.difference(got["spark"], got[way])
                    if diff:
                        failures.append(
                            f"seed {seed} query {q} ansi={ansi} zone={query.zone} "
                            f"precision_loss={query.precision_loss} [{way}] {query.sql}: {diff}"
                        )
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
        spark.conf.unset(PRECISION_LOSS)
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert not failures, "\n".join(failures[:10])
    print(
        f"seed {seed}: {pushed} pushed ({jvm_pushed} under AUTO, computed in the JVM), "
        f"{not_pushed} not, {errors} failing in Spark too"
    )
    return pushed, not_pushed, errors, jvm_pushed


@pytest.mark.parametrize(
    "queries", [QUERIES, pytest.param(STRESS_QUERIES, marks=pytest.mark.stress)]
)
def test_pushed_aggregates_equal_spark_on_random_tables_and_queries(
    queries, spark, env, tmp_path_factory
):
    pushed, not_pushed, errors, jvm_pushed = run_differential(
        spark, env, tmp_path_factory, SEED, queries, max_rows=120
    )
    # the draw exercises both sides of the rule, and failures as well as answers
    assert pushed >= queries // 2, (pushed, not_pushed)
    assert jvm_pushed >= 2, jvm_pushed  # and the JVM's own partial aggregation
    assert not_pushed >= queries // 5, (pushed, not_pushed)
    assert 0 < errors < queries, errors


@pytest.mark.stress
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_pushed_aggregates_equal_spark_stress(seed, spark, env, tmp_path_factory):
    pushed, _, _, _ = run_differential(spark, env, tmp_path_factory, seed, 120, max_rows=2_000)
    assert pushed > 0
