"""What a Spark user sees of a tiered_hive scan: the scan node's SQL
metrics, per query, read back from Spark's status store as the UI and the REST API show them,
and EXPLAIN's description of the scan.

Over the S3 endpoint with every tier on: a cold query's node counts its fragment misses,
block misses and remote requests (as many as the endpoint served), a warm one makes 0
remote requests and serves every split from the fragment cache, and a second identical
query reports the same figures, not their sum."""

from __future__ import annotations

import io
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.tables.table_registration import register_external_table
from tests.support.spark_sql_metrics import (
    last_execution_id,
    node_metrics,
    scan_metrics,
    stage_input,
)

pytestmark = [pytest.mark.spark, pytest.mark.s3]

DAYS = [f"2021-01-0{d}" for d in range(1, 6)]
ROWS = 1000
#: The scan node's text for the block cache's hits: a hit is any block read from the cache,
#: the ones this scan fetched moments before included (so a cold scan's hits are not taken
#: for a fault).
BLOCK_HITS = "block cache hits (blocks this scan fetched, read again, included)"


def _day(i: int) -> bytes:
    ids = range(i * ROWS, (i + 1) * ROWS)
    table = pa.table(
        {
            "x": pa.array(ids, pa.int64()),
            "s": pa.array([f"s{v}" for v in ids]),
            "f": pa.array([v / 7 for v in ids], pa.float64()),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


@pytest.fixture(scope="module")
def s3_table(env, s3_endpoint):
    """Five daily partitions of one file each in a bucket of the S3 endpoint, registered
    sealed; returns the table's name and the S3 properties."""
    bucket = f"raptorx-scan-metrics-{os.getpid()}"
    s3_endpoint.create_bucket(bucket)
    client = s3_endpoint.client()
    for i, day in enumerate(DAYS):
        client.put_object(Bucket=bucket, Key=f"t/ds={day}/part-0.parquet", Body=_day(i))
    props = s3_endpoint.s3_properties()
    name = f"{env.unique_db('scanm')}.t"
    with env.metastore(**props) as ms:
        register_external_table(ms, env.settings(**props), name, f"s3://{bucket}/t", sealed=True)
    return name, props


def _reader(spark, tmp_path, table, props, **extra):
    options = {
        **props,
        "hive.file-status-cache-tables": "*",
        "hive.parquet.metadata-cache-enabled": "true",
        "cache.enabled": "true",
        "cache.base-directory": str(tmp_path / "cache"),
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
        **extra,
    }
    return spark.read.format("tiered_hive").options(**options).load(table)


def _one_scan(spark, table) -> dict[str, str]:
    scans = scan_metrics(spark, table)
    assert len(scans) == 1, node_metrics(spark)
    return scans[0]


def _counts(metrics: dict[str, str]) -> dict[str, int]:
    """The tiers' count metrics of a scan node, as integers."""
    names = (
        "splits read",
        "fragment cache hits",
        "fragment cache misses",
        BLOCK_HITS,
        "block cache misses",
        "footer cache hits",
        "footer cache misses",
        "remote requests",
        "files opened",
        "rows out of the source",
        "partitions in the table",
        "partitions after partition pruning",
        "partitions after statistics pruning",
        "metastore round trips",
        "listing cache hits",
    )
    return {n: int(metrics[n]) for n in names}


def test_cold_then_warm_over_s3_each_query_its_own_figures(
    spark, tmp_path, s3_table, s3_endpoint, counted
):
    table, props = s3_table
    view = _reader(spark, tmp_path, table, props)
    view.createOrReplaceTempView("scan_metrics_t")
    # ``s NOT LIKE '%7'`` leaves every split a row filter (no statistics decide it), so each
    # keeps a fragment; a split whose filters statistics all made true would keep none.
    sql = (
        "SELECT x, s FROM scan_metrics_t WHERE x >= 1500 AND s NOT LIKE '%7' AND ds >= '2021-01-02'"
    )
    expected_rows = (len(DAYS) * ROWS - 1500) * 9 // 10

    s3_endpoint.reset_stats()
    with counted() as c:
        assert len(spark.sql(sql).collect()) == expected_rows
    served = s3_endpoint.stats()["requests"]
    # Spark's reader (AUTO's first run) asks the store for each file's identity once (a HEAD)
    gets = served.get("GET", 0) + served.get("RANGED_GET", 0) + served.get("HEAD", 0)
    cold = _counts(_one_scan(spark, table))
    assert gets > 0, served
    assert cold["splits read"] == 4 and cold["files opened"] == 4
    assert (cold["fragment cache hits"], cold["fragment cache misses"]) == (0, 4)
    assert cold["remote requests"] == gets  # what the node says the store served, it served
    # the node's figures are the query's counts (every process's, through the metrics sink)
    assert cold["remote requests"] == c["storage.remote_requests"]
    assert cold["block cache misses"] == c["block_cache.misses"]
    assert cold["metastore round trips"] == c["metastore.round_trips"] > 0
    assert cold["block cache misses"] > 0 and cold[BLOCK_HITS] == c["block_cache.hits"]
    assert cold["rows out of the source"] == expected_rows
    assert cold["partitions in the table"] == 5
    assert cold["partitions after partition pruning"] == 4
    assert cold["partitions after statistics pruning"] == 4  # day 2 holds 1000..1999
    assert _one_scan(spark, table)["remote bytes read"] != "0.0 B"
    nbytes, records = stage_input(spark)
    # the stage's input: the Parquet bytes the readers read, and the rows the scan returned
    assert nbytes == c["reader.bytes_read"] > 0 and records == expected_rows, (nbytes, records)

    assert c["reader.spark_splits"] == 4 and c["reader.python_tasks"] == 0

    # A query's second run: Spark's reader reads it from the block cache the first filled,
    # and the JVM stores the fragments (no Python worker).
    s3_endpoint.reset_stats()
    with counted() as second:
        assert len(spark.sql(sql).collect()) == expected_rows
    assert s3_endpoint.stats()["total_requests"] == 0
    assert second["reader.spark_splits"] == 4 and second["reader.python_tasks"] == 0
    assert second["fragment_cache.stores"] == second["fragment_cache.jvm_stores"] == 4
    filled = _counts(_one_scan(spark, table))
    assert filled["remote requests"] == 0 and filled["block cache misses"] == 0

    s3_endpoint.reset_stats()
    with counted() as w:
        assert len(spark.sql(sql).collect()) == expected_rows
    assert s3_endpoint.stats()["total_requests"] == 0
    # a warm stage reads the fragment entries the JVM served
    assert stage_input(spark) == (w["fragment_cache.bytes_read"], expected_rows)
    assert w["fragment_cache.bytes_read"] > 0
    warm = _counts(_one_scan(spark, table))
    assert warm["remote requests"] == 0 and warm["files opened"] == 0
    assert (warm["fragment cache hits"], warm["fragment cache misses"]) == (4, 0)
    assert warm["splits read"] == 4 and warm["rows out of the source"] == expected_rows
    assert warm["listing cache hits"] == 4  # sealed partitions, listed by the cold query

    # The same query again: the same figures, not their sum (and not the planning's either).
    assert len(spark.sql(sql).collect()) == expected_rows
    again = _counts(_one_scan(spark, table))
    assert again == warm


def test_pysparks_python_worker_metrics_are_per_query(spark, tmp_path, s3_table):
    """pyspark keeps "data sent to Python workers" in one map per JVM; the node showed their
    running total (growing with each query). Now each query shows its own."""
    table, props = s3_table
    # the Python reader's (under AUTO the JVM reads and aggregates: no Python worker runs)
    options = {"fragment-result-cache.enabled": "false", "hive.parquet.reader": "PYTHON"}
    df = _reader(spark, tmp_path, table, props, **options)
    figures = []
    for _ in range(3):
        assert df.where("x < 2500").count() == 2500
        figures.append(_one_scan(spark, table))
    # ("total (min, med, max ...)\n4.8 KiB (...)": the total; a few bytes may differ, as
    # the query's token rides in what is sent)
    sent = [_kib(f["data sent to Python workers"]) for f in figures]
    assert max(sent) < 1.2 * min(sent), sent  # a running total would be 1x, 2x, 3x
    assert figures[1]["remote requests"] == figures[2]["remote requests"] == "0"


def _kib(figure: str) -> float:
    number, unit = figure.split("\n")[1].split(" (")[0].split()
    return float(number) * {"B": 1 / 1024, "KiB": 1, "MiB": 1024}[unit]


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _section(plan: str, key: str) -> str:
    """What ``key: [...]`` lists in a plan's scan description."""
    assert f"{key}: [" in plan, (key, plan)
    return plan.split(f"{key}: [", 1)[1].split("]", 1)[0]


def test_explain_names_the_table_filters_snapshot_and_tiers(spark, tmp_path, s3_table):
    table, props = s3_table
    df = (
        _reader(spark, tmp_path, table, props)
        .where("x > 45 AND ds = date '2021-01-03' AND f > 1.5")
        .select("x", "s")
    )
    plan = _plan(df)
    assert f"BatchScan tiered_hive {table}[" in plan, plan
    assert "TieredHiveScan " in plan
    # the source prunes partitions on ds and evaluates x > 45 itself ...
    assert "ds = DATE '2021-01-03'" in _section(plan, "PartitionFilters")
    assert "x > 45" in _section(plan, "PushedFilters")
    # ... and f is a double: Spark evaluates its filter after the scan, and EXPLAIN says so
    assert "f > 1.5" in _section(plan, "PostScanFilters")
    assert "x > 45" not in _section(plan, "PostScanFilters")
    assert "Snapshot: external, no write ids" in plan
    # the test session turns the metastore cache off (TIERS_OFF); the read turns the others on
    assert "Tiers: [listing, footer, block, fragment]" in plan
    assert "Partitions: 1 of 5 (pruned: 4 by partition values, 0 by statistics)" in plan

    df.createOrReplaceTempView("scan_explain_t")
    formatted = spark.sql("EXPLAIN FORMATTED SELECT * FROM scan_explain_t").collect()[0][0]
    assert f"BatchScan tiered_hive {table}" in formatted, formatted
    assert "\nPartitionFilters: [" in formatted, formatted
    assert "\nPostScanFilters: [" in formatted, formatted
    assert "\nTiers: [listing, footer, block, fragment]\n" in formatted, formatted
    assert "\nReadSchema: struct<x:bigint,s:string" in formatted, formatted


def test_explain_names_both_sides_of_a_join(spark, env, tmp_path, s3_table):
    table, props = s3_table
    other = f"{env.unique_db('scanj')}.u"
    root = tmp_path / "u"
    (root / "k=1").mkdir(parents=True)
    pq.write_table(pa.table({"x": pa.array([1, 2], pa.int64())}), str(root / "k=1" / "p.parquet"))
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), other, str(root))
    left = _reader(spark, tmp_path, table, props)
    right = spark.read.format("tiered_hive").load(other)
    plan = _plan(left.join(right, "x").where("s = 's1'"))
    assert f"BatchScan tiered_hive {table}[" in plan, plan
    assert f"BatchScan tiered_hive {other}[" in plan, plan
    assert "s = 's1'" in _section(plan, "PushedFilters")


def test_explain_shows_a_pushed_aggregation(spark, tmp_path, s3_table):
    table, props = s3_table
    df = _reader(spark, tmp_path, table, props).where("x > 10").groupBy("ds").sum("x")
    plan = _plan(df)
    assert "PushedAggregates: [SUM(x)]" in plan, plan
    assert "PushedGroupByExpressions: [ds]" in plan, plan
    assert f"BatchScan tiered_hive {table}[" in plan
    assert "x > 10" in _section(plan, "PushedFilters")
    rows = df.collect()
    assert len(rows) == 5
    metrics = _one_scan(spark, table)
    assert int(metrics["rows out of the source"]) == 5  # one partial row per split
    assert last_execution_id(spark) >= 0


def test_explain_shows_a_managed_tables_write_ids(spark, env):
    """A managed table's snapshot is its write ids: two appends, the second visible."""
    name = f"{env.unique_db('scanw')}.m"
    for lo in (0, 10):
        spark.range(lo, lo + 10).selectExpr("id AS x").write.format("tiered_hive").mode(
            "append"
        ).save(name)
    df = spark.read.format("tiered_hive").load(name).where("x > 3")
    plan = _plan(df)
    assert f"BatchScan tiered_hive {name}[" in plan, plan
    assert "Snapshot: write ids [2:] (table id " in plan, plan
    assert df.count() == 16


def test_a_misspelled_read_option_gets_a_did_you_mean_through_spark(spark, s3_table):
    """As a misspelled property in a file does."""
    table, props = s3_table
    reader = spark.read.format("tiered_hive").options(**props)
    with pytest.raises(Exception, match=r"did you mean 'fragment-result-cache.enabled'\?"):
        reader.option("raptorx.fragment-result-chache.enabled", "true").load(table)
