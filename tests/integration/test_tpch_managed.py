"""TPC-H loaded as MANAGED tables through the Spark write path: the queries equal DuckDB's
over the generated files, and the tables carry write ids, ACID directories and statistics."""

from __future__ import annotations

import os

import pytest

from raptorx_py.storage.acid_layout import base_dir_name
from raptorx_py.tpch import oracle, queries
from raptorx_py.tpch.load import load_tpch_managed
from tests.support.tpch_fixtures import tpch_work_dir

pytestmark = pytest.mark.spark

DATABASE = "tpch_managed_test"
QUERIES = (1, 3, 6, 12, 18, 22)


@pytest.fixture(scope="module")
def managed_tpch(request, spark, env, tpch_sf001_dir, tpch_scale, tmp_path_factory):
    warehouse = str(tmp_path_factory.mktemp("managed-wh"))
    urls = load_tpch_managed(
        spark,
        tpch_scale,
        env.settings(),
        database=DATABASE,
        warehouse_url=warehouse,
        work_dir=str(tpch_work_dir(request)),
        progress=False,
    )
    queries.register_views(
        spark, lambda t: spark.read.format("tiered_hive").load(f"{DATABASE}.{t}")
    )
    return urls


def test_tables_are_managed_with_acid_layout(managed_tpch, env, tpch_sf001_dir):
    with env.metastore() as ms:
        lineitem = ms.get_table(DATABASE, "lineitem")
        nation = ms.get_table(DATABASE, "nation")
        parts = ms.list_partitions(lineitem)
        snaps = ms.get_valid_write_ids([f"{DATABASE}.{t}" for t in queries.TABLES])
    assert lineitem.table_type == nation.table_type == "MANAGED_TABLE"
    assert [k.name for k in lineitem.partition_keys] == ["l_shipmonth"]
    generated = sorted(n for n in os.listdir(f"{tpch_sf001_dir}/lineitem") if "=" in n)
    assert sorted(f"l_shipmonth={p.values[0]}" for p in parts) == generated
    assert all(p.parameters["writeId"] == "1" and p.row_count > 0 for p in parts)
    assert all(s.committed_count() == 1 for s in snaps.values())
    assert base_dir_name(1) in os.listdir(nation.location.removeprefix("file://"))
    assert nation.parameters["numRows"] == "25"


@pytest.mark.parametrize("n", QUERIES, ids=lambda n: f"q{n:02d}")
def test_query_matches_duckdb(n, spark, managed_tpch, duckdb_expected, tpch_scale):
    actual = oracle.spark_rows(spark.sql(queries.query_text(n, tpch_scale, "spark")))
    diff = oracle.compare_results(
        duckdb_expected[n], actual, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"Q{n} over managed tables: {diff}"
