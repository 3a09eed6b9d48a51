"""A file's identity through Spark: an unsealed external file rewritten with the same size
and its mtime put back is read in its new version by ``tiered_hive`` with each cache tier
on (block, footer, fragment) and with all of them, as with every tier off. The Spark-free
half: ``tests/unit/test_file_identity.py``."""

from __future__ import annotations

import pytest

from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch import oracle
from tests.unit.test_file_identity import (
    BOUND,
    ROWS,
    TIERS,
    rewrite_keeping_mtime,
    write_ids,
)

pytestmark = pytest.mark.spark

SQL = f"SELECT id FROM {{t}} WHERE id > {BOUND}"


@pytest.mark.parametrize("tier", sorted(TIERS))
def test_a_rewrite_with_its_mtime_put_back_is_read_in_its_new_version(
    spark, env, tmp_path, counted, tier
):
    part = tmp_path / "t" / "k=1"
    part.mkdir(parents=True)
    path = str(part / "part-0.parquet")
    write_ids(path, 1)
    name = f"{env.unique_db('ident')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, str(tmp_path / "t"))
    # Statistics would prune the file (no id above BOUND) and nothing would be read: the
    # tiers are what this test is about (the statistics' own trust: test_stats_trust.py).
    no_stats = {"hive.partition-statistics-based-optimization-enabled": "false"}
    on = spark.read.format("tiered_hive")
    # The footer cache is the Python reader's tier (Spark's reader reads footers through the
    # block cache), and with AUTO a fragment is stored at a query's second run, not its first.
    python = {"hive.parquet.reader": "PYTHON"} if tier in ("footer", "fragment") else {}
    for option, value in {
        **no_stats,
        **python,
        **TIERS[tier],
        # This test's own directories: Spark's Python workers outlive a test.
        "cache.base-directory": str(tmp_path / "cache"),
        "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
    }.items():
        on = on.option(option, value)
    on.load(name).createOrReplaceTempView("ident_on")
    spark.read.format("tiered_hive").options(**no_stats).load(name).createOrReplaceTempView(
        "ident_off"
    )

    def rows(view: str) -> list:
        return oracle.spark_rows(spark.sql(SQL.format(t=view)))

    assert rows("ident_on") == [] == rows("ident_off")
    with counted() as warm:
        assert rows("ident_on") == []
    assert sum(v for k, v in warm.items() if k.endswith("hits") or "hits_" in k) > 0
    rewrite_keeping_mtime(path, BOUND + 1, in_place=True)
    expected = [(i,) for i in range(BOUND + 1, BOUND + 1 + ROWS)]
    assert oracle.compare_results(expected, rows("ident_off"), ordered=False) is None
    assert oracle.compare_results(expected, rows("ident_on"), ordered=False) is None
