"""The fragment result cache through Spark, shown by counts: RaptorX's sliding
date window, rows and partial aggregations, an overwritten external file, a damaged entry,
and an append to one partition of a managed table. Every result is checked against the same
query with the cache off."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch import oracle

pytestmark = pytest.mark.spark

DAYS = [f"2021-01-0{d}" for d in range(1, 6)]
ROWS = 5000


def _write_day(root: str, day: str, offset: int) -> str:
    d = os.path.join(root, f"ds={day}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "part-0.parquet")
    ids = range(offset, offset + ROWS)
    pq.write_table(
        pa.table({"x": pa.array(ids, pa.int64()), "s": pa.array([f"s{i}" for i in ids])}), path
    )
    return path


def _daily_table(env, tmp_path, spark, sealed: bool = False):
    root = str(tmp_path / "t")
    for i, day in enumerate(DAYS):
        _write_day(root, day, i * ROWS)
    db = env.unique_db("frag")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.t", root, sealed=sealed)
    cache_dir = str(tmp_path / "fragments")
    # The Python reader computes and stores fragments (AUTO would read a query's first run
    # with Spark's reader and store at its second: tests/integration/test_spark_reader.py).
    spark.read.format("tiered_hive").option("fragment-result-cache.enabled", "true").option(
        "fragment-result-cache.base-directory", cache_dir
    ).option("hive.parquet.reader", "PYTHON").load(f"{db}.t").createOrReplaceTempView("frag_on")
    spark.read.format("tiered_hive").load(f"{db}.t").createOrReplaceTempView("frag_off")
    return root, cache_dir


@pytest.fixture
def daily(env, tmp_path, spark):
    """An external table of five daily partitions, and readers with the cache on and off."""
    return _daily_table(env, tmp_path, spark)


def test_a_moving_lower_bound_before_a_partitions_rows_still_hits(spark, env, tmp_path, counted):
    """Sealed partitions (trusted statistics): ``x >= 10`` and then ``x >= 20`` are always
    true on the days whose rows all lie above 20, so those days' splits evaluate no
    predicate and share their entries; only the first day, where the bound cuts its rows,
    is computed again."""
    _daily_table(env, tmp_path, spark, sealed=True)
    sql = "SELECT sum(x), count(*) FROM {{t}} WHERE x >= {lo}"
    first = both(spark, sql.format(lo=10), counted)
    # x >= 10 on four days, and Spark's own IsNotNull(x) on all five (no nulls)
    assert first["planner.predicates_dropped_by_stats"] == 4 + 5
    assert first["fragment_cache.stores"] == 5
    moved = both(spark, sql.format(lo=20), counted)
    assert (moved["fragment_cache.hits"], moved["fragment_cache.misses"]) == (4, 1)
    assert moved["reader.rows_read"] == ROWS  # the first day's only


def both(spark, sql: str, counted):
    with counted() as c:
        got = oracle.spark_rows(spark.sql(sql.format(t="frag_on")))
    expected = oracle.spark_rows(spark.sql(sql.format(t="frag_off")))
    assert oracle.compare_results(expected, got, ordered=False) is None, sql
    return c


def window(lo: str, hi: str) -> str:
    return f"SELECT sum(x), count(*) FROM {{t}} WHERE ds BETWEEN date '{lo}' AND date '{hi}'"


def test_a_wider_window_computes_only_its_new_days(spark, daily, counted):
    """RaptorX's example: after 01-01..01-03, the query over 01-01..01-05 computes the
    splits of 01-04 and 01-05 and serves the other three from the cache."""
    first = both(spark, window(DAYS[0], DAYS[2]), counted)
    assert (first["fragment_cache.misses"], first["fragment_cache.stores"]) == (3, 3)
    assert first["fragment_cache.hits"] == 0
    second = both(spark, window(DAYS[0], DAYS[4]), counted)
    assert (second["fragment_cache.hits"], second["fragment_cache.misses"]) == (3, 2)
    assert second["reader.fragments_computed"] == 2
    # the pushed partial aggregation is what is cached: no row is read for a hit
    assert second["reader.rows_read"] == 2 * ROWS


def test_rows_are_cached_too_and_a_filter_is_part_of_the_key(spark, daily, counted):
    sql = "SELECT x, s FROM {t} WHERE ds = date '2021-01-02' AND x % 7 = 0 AND x > 6000"
    first = both(spark, sql.replace(" AND x % 7 = 0", ""), counted)
    assert first["fragment_cache.stores"] == 1
    again = both(spark, sql.replace(" AND x % 7 = 0", ""), counted)
    assert again["fragment_cache.hits"] == 1 and again["reader.rows_read"] == 0
    other = both(spark, sql.replace("x > 6000", "x > 6001").replace(" AND x % 7 = 0", ""), counted)
    assert other["fragment_cache.misses"] == 1  # another predicate: another result


def test_an_overwritten_file_misses_and_the_others_hit(spark, daily, counted):
    root, _ = daily
    all_days = window(DAYS[0], DAYS[4])
    both(spark, all_days, counted)
    path = _write_day(root, DAYS[1], 10 * ROWS)  # new rows in place
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    after = both(spark, all_days, counted)
    assert (after["fragment_cache.hits"], after["fragment_cache.misses"]) == (4, 1)


def test_a_damaged_entry_is_recomputed(spark, daily, counted):
    _, cache_dir = daily
    sql = "SELECT x, s FROM {t} WHERE ds = date '2021-01-03'"
    both(spark, sql, counted)
    values = [
        os.path.join(d, f) for d, _, fs in os.walk(cache_dir) for f in fs if f.endswith(".arrow")
    ]
    assert values, "a 5000-row result is stored as an entry file"
    for path in values:
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    damaged = both(spark, sql, counted)
    assert damaged["fragment_cache.corrupt"] == 1 and damaged["fragment_cache.stores"] == 1


def test_an_append_to_one_partition_misses_only_its_new_file(spark, env, tmp_path, counted):
    name = f"{env.unique_db('fragm')}.t"

    def frame(lo, hi, regions):
        return spark.range(lo, hi).withColumn(
            "region",
            F.element_at(
                F.array(*[F.lit(r) for r in regions]), (F.col("id") % len(regions) + 1).cast("int")
            ),
        )

    frame(0, 300, ("EU", "US", "ASIA")).write.format("tiered_hive").option(
        "partition_by", "region"
    ).mode("append").save(name)
    cache_dir = str(tmp_path / "fragments")
    sql = "SELECT region, sum(id), count(*) FROM {t} GROUP BY region"

    def run():
        spark.read.format("tiered_hive").option("fragment-result-cache.enabled", "true").option(
            "fragment-result-cache.base-directory", cache_dir
        ).load(name).createOrReplaceTempView("frag_on")
        spark.read.format("tiered_hive").load(name).createOrReplaceTempView("frag_off")
        return both(spark, sql, counted)

    first = run()
    files = first["fragment_cache.misses"]
    assert files >= 3 and first["fragment_cache.hits"] == 0
    frame(300, 330, ("EU",)).write.format("tiered_hive").mode("append").save(name)
    after = run()
    # the earlier files, in every partition, are served; only the new delta's file is read
    assert after["fragment_cache.hits"] == files
    assert after["fragment_cache.misses"] == after["reader.fragments_computed"] >= 1
    assert after["reader.rows_read"] == 30
