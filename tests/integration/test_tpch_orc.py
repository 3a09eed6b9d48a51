"""TPC-H over ORC (``raptorx tpch load --format orc``: the generated Parquet rewritten as ORC
in the same Hive layout): every table registers as ORC, and the queries
(``tests.support.tpch_fixtures.DEFAULT_QUERIES`` by default, all 22 under ``make stress``)
through ``tiered_hive`` equal DuckDB's over the Parquet, with every storage tier on; a
repeat is served from the caches. Counts, not timings."""

from __future__ import annotations

import pytest

from raptorx_py.tpch import oracle, queries
from tests.support.tpch_fixtures import query_difference, tpch_query_params
from tests.support.tpch_loading import load_cached_tpch

pytestmark = pytest.mark.spark

DATABASE = "tpch_orc"


@pytest.fixture(scope="module")
def orc_views(request, spark, env, tmp_path_factory, tpch_scale):
    warehouse = tmp_path_factory.mktemp("orc_warehouse")
    urls = load_cached_tpch(
        request,
        tpch_scale,
        f"file://{warehouse}",
        env.settings(),
        database=DATABASE,
        storage_format="ORC",
    )
    assert all(list((warehouse / f"{DATABASE}.db" / t).rglob("*.orc")) for t in urls)
    with env.metastore() as ms:
        assert {ms.get_table(DATABASE, t).storage_format for t in urls} == {"ORC"}
    caches = tmp_path_factory.mktemp("orc_caches")
    options = {
        "cache.enabled": "true",
        "cache.base-directory": str(caches / "blocks"),
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": str(caches / "fragments"),
        "hive.orc.file-tail-cache-enabled": "true",
        "hive.orc.stripe-metadata-cache-enabled": "true",
        "hive.file-handle-cache-enabled": "true",
    }
    queries.register_views(
        spark, lambda t: spark.read.format("tiered_hive").options(**options).load(f"{DATABASE}.{t}")
    )


@pytest.mark.parametrize("n", tpch_query_params())
def test_tpch_over_orc_matches_duckdb(n, spark, orc_views, duckdb_expected, tpch_scale, counted):
    for run in ("first", "repeat"):
        with counted() as c:
            actual = oracle.spark_rows(spark.sql(queries.query_text(n, tpch_scale, "spark")))
        diff = query_difference(n, duckdb_expected[n], actual)
        assert diff is None, f"Q{n} {run}: {diff}"
        assert c.get("reader.python_tasks", 0) == 0, (n, run, dict(c))
    assert c.get("block_cache.misses", 0) == 0, (n, dict(c))  # the repeat: from the caches
