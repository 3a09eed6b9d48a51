"""Spark's own Parquet reader over ``s3a://`` (hadoop-aws, resolved by devservers/s3a_jars.py)
and ``tiered_hive`` read the same TPC-H tables on one S3 endpoint and get the same rows (two
tables by default, all eight under ``make stress``); the endpoint counts what s3a sent beside
what tiered_hive sent (the benchmark's ``spark-parquet-s3`` baseline,
benchmarks/configurations.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from devservers import s3a_jars
from raptorx_py.tpch import oracle, queries
from tests.support.tpch_loading import load_tpch_into_bucket

pytestmark = [pytest.mark.spark, pytest.mark.s3]

DATABASE = "tpch_s3a"
BUCKET = "raptorx-tpch-s3a"


@pytest.fixture(scope="module")
def s3a_tables(request, spark, env, s3_endpoint, tpch_scale):
    """SF 0.01 in s3://BUCKET/wh, registered for tiered_hive; the session's Hadoop
    configuration points s3a at the same endpoint (set before the first s3a:// access)."""
    props = load_tpch_into_bucket(
        request, env, s3_endpoint, tpch_scale, bucket=BUCKET, database=DATABASE
    )
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3_endpoint.s3a_settings().items():
        hadoop.set(key, value)
    return props


def _tiered(spark, props, table):
    reader = spark.read.format("tiered_hive")
    for key, value in props.items():
        reader = reader.option(key, value)
    return reader.load(f"{DATABASE}.{table}")


def _s3a(spark, table):
    return queries.parquet_reader(spark, f"s3a://{BUCKET}/wh/{DATABASE}.db")(table)


def test_the_session_carries_hadoop_aws_of_pysparks_hadoop(spark):
    jars = spark.sparkContext.getConf().get("spark.jars")
    version = s3a_jars.pyspark_hadoop_version()
    assert f"hadoop-aws-{version}.jar" in jars
    assert "bundle-" not in jars  # the 640 MB SDK bundle is not needed to read
    # No second copy of a library pyspark already ships (devservers/s3a_jars.py).
    assert not any(
        name in jars for name in ("slf4j-api-", "httpclient-", "commons-logging-", "netty-")
    )


#: The tables read whole by both by default: lineitem (partitioned; every column type of the
#: eight: int64, int32, decimal, date, string) and region (unpartitioned, one file); the
#: other six under ``make stress``.
DEFAULT_TABLES = ("region", "lineitem")


@pytest.mark.parametrize(
    "table",
    [
        pytest.param(t, marks=() if t in DEFAULT_TABLES else pytest.mark.stress)
        for t in queries.TABLES
    ],
)
def test_s3a_and_tiered_hive_read_the_same_rows(spark, s3a_tables, s3_endpoint, table):
    s3_endpoint.reset_stats()
    through_s3a = _s3a(spark, table)
    expected = oracle.spark_rows(through_s3a)
    s3a_requests = s3_endpoint.stats()["requests"]
    tiered = _tiered(spark, s3a_tables, table)
    assert sorted(through_s3a.columns) == sorted(tiered.columns)
    actual = oracle.spark_rows(tiered.select(*through_s3a.columns))
    assert len(expected) > 0
    # Exactly the same rows, value for value (no tolerance: both read the same files).
    assert Counter(map(tuple, actual)) == Counter(map(tuple, expected))
    # s3a's requests reached this endpoint and were counted like tiered_hive's: it opens
    # each file with a HEAD and reads ranges (vectored IO).
    assert s3a_requests["RANGED_GET"] > 0
    assert s3a_requests["HEAD"] > 0


@pytest.mark.parametrize("n", [1, 6, 14], ids=lambda n: f"q{n:02d}")
def test_tpch_query_over_s3a_equals_tiered_hive(spark, s3a_tables, tpch_scale, n):
    sql = queries.query_text(n, tpch_scale, "spark")
    queries.register_views(spark, lambda t: _s3a(spark, t))
    over_s3a = oracle.spark_rows(spark.sql(sql))
    queries.register_views(spark, lambda t: _tiered(spark, s3a_tables, t))
    tiered = oracle.spark_rows(spark.sql(sql))
    assert len(over_s3a) > 0
    diff = oracle.compare_results(
        over_s3a, tiered, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"Q{n}: {diff}"
