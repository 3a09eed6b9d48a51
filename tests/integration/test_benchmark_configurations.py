"""The benchmark's configurations share one SparkSession: what one leaves in it must not
serve another's runs (``benchmarks/configurations.py``)."""

from __future__ import annotations

from benchmarks import configurations
from benchmarks.configurations import BenchContext
from raptorx_py.tpch import queries


def _served_from_memory(spark, table: str) -> bool:
    """Whether Spark's cache replaces the scan of the view ``table`` (``CacheManager``)."""
    return "InMemoryRelation" in str(spark.table(table)._jdf.queryExecution().withCachedData())


def test_cache_table_serves_its_own_configuration_alone(spark, tpch_sf001_dir):
    ctx = BenchContext(
        spark=spark,
        database="tpch",
        local_data_dir=tpch_sf001_dir,
        properties={},
        work_dir="",
    )
    local, cached = configurations.get_configurations(["spark-parquet-local", "spark-cache-table"])
    try:
        cached.register_views(ctx)  # fills Spark's cache
        assert all(_served_from_memory(spark, t) for t in queries.TABLES)

        # The baseline, its DataFrames made after the fill, reads the files.
        local.register_views(ctx)
        assert not any(_served_from_memory(spark, t) for t in queries.TABLES)

        # What the option guards against: Spark's cache matches plans, so a read of the
        # same files with the same options, made anew, is served from memory.
        same = queries.parquet_reader(
            spark, tpch_sf001_dir, configurations.CACHE_TABLE_READ_OPTIONS
        )
        same("nation").createOrReplaceTempView("nation")
        assert _served_from_memory(spark, "nation")
    finally:
        for frame in ctx.state.get(("spark-cache-table", tpch_sf001_dir), {}).values():
            frame.unpersist()
