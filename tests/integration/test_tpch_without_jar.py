"""Without the native jar (the Python source registered with pushdown off, as ``register``
does when the provider cannot load), all 22 TPC-H queries still equal DuckDB's results, and
every scan reads every column of its table: that is what the jar buys. By default the
queries of ``tests.support.tpch_fixtures.DEFAULT_QUERIES`` (every table); all 22 under ``make
stress``."""

from __future__ import annotations

import pytest

from raptorx_py.datasource.source import configured_source_class
from raptorx_py.tpch import oracle, queries
from tests.support.tpch_fixtures import DEFAULT_QUERIES
from tests.support.tpch_loading import load_cached_tpch

pytestmark = pytest.mark.spark

DATABASE = "tpch_nojar"
NOJAR_NAME = "tiered_hive_nojar_tpch"


@pytest.fixture(scope="module")
def nojar_tpch(request, spark, env, tmp_path_factory, tpch_sf001_dir, tpch_scale):
    warehouse = str(tmp_path_factory.mktemp("nojar-wh"))
    load_cached_tpch(request, tpch_scale, warehouse, env.settings(), database=DATABASE)
    spark.dataSource.register(
        configured_source_class(env.settings(), name=NOJAR_NAME, pushdown=False)
    )
    queries.register_views(spark, lambda t: spark.read.format(NOJAR_NAME).load(f"{DATABASE}.{t}"))
    with env.metastore() as ms:
        return {t: len(ms.get_table(DATABASE, t).all_columns) for t in queries.TABLES}


@pytest.mark.parametrize(
    "numbers",
    [DEFAULT_QUERIES, pytest.param(tuple(queries.QUERY_NUMBERS), marks=pytest.mark.stress)],
    ids=["default", "all"],
)
def test_all_queries_match_duckdb_and_read_every_column(
    numbers, spark, nojar_tpch, duckdb_expected, tpch_scale, counted
):
    for n in numbers:
        with counted() as c:
            actual = oracle.spark_rows(spark.sql(queries.query_text(n, tpch_scale, "spark")))
        diff = oracle.compare_results(
            duckdb_expected[n],
            actual,
            ordered=queries.ordered(n),
            sort_key=queries.ORDER_BY_COLUMNS[n],
        )
        assert diff is None, f"Q{n} without the jar: {diff}"
        for table, width in nojar_tpch.items():
            scans = c[f"scan.planned.{DATABASE}.{table}"]
            prefix = f"scan.column.{DATABASE}.{table}."
            columns = {k for k in c.delta if k.startswith(prefix)}
            assert len(columns) == (width if scans else 0), f"Q{n} {table}: {sorted(columns)}"
