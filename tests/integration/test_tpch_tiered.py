"""The TPC-H suite through tiered_hive over the local S3 endpoint: all 22 queries equal
DuckDB's results on the same Parquet files, and a filter on l_shipdate opens only the
partitions whose statistics overlap it (asserted by count, at the reader and at the store).

Through Spark's reader (``hive.parquet.reader`` SPARK, what AUTO picks) and through the
Python reader, ``tests.support.tpch_fixtures.DEFAULT_QUERIES`` by default (Q1 and Q6's
pushed aggregation, joins of up to six tables, LIKE filters, decimals; every table and column
type read over S3), all 22 under ``make stress``. All 22 through Spark's reader by default
are the first runs of ``test_tpch_fragment_hits.py`` (the same read path over local files,
the fragment cache's lookups added), which serve issue 34's check of that path."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from raptorx_py.tpch import oracle, queries
from tests.support.tpch_fixtures import tpch_query_params
from tests.support.tpch_loading import load_tpch_into_bucket

pytestmark = [pytest.mark.spark, pytest.mark.s3]

DATABASE = "tpch_tiered"


@pytest.fixture(scope="module")
def tpch_in_bucket(request, env, s3_endpoint, tpch_scale):
    """SF 0.01 loaded to s3://<bucket>/wh and registered in the session metastore; returns
    the endpoint's properties."""
    return load_tpch_into_bucket(
        request, env, s3_endpoint, tpch_scale, bucket="raptorx-tpch-tiered", database=DATABASE
    )


def _views(spark, props: dict[str, str]):
    def reader(table):
        r = spark.read.format("tiered_hive")
        for key, value in props.items():
            r = r.option(key, value)
        return r.load(f"{DATABASE}.{table}")

    queries.register_views(spark, reader)
    return reader


@pytest.fixture(scope="module")
def tiered_tpch(spark, tpch_in_bucket):
    """The 8 TPC-H names as temp views over tiered_hive reads with the endpoint's
    properties (the default reader); returns the reader of one table."""
    return _views(spark, tpch_in_bucket)


@pytest.fixture
def views_by_reader(request, spark, tpch_in_bucket):
    """The views read by the reader of the test's parameter (``hive.parquet.reader``: Spark's
    own Parquet reader in the JVM over s3a, or the Python reader; scans with a pushed
    aggregation are the Python reader's either way)."""
    return _views(spark, {**tpch_in_bucket, "hive.parquet.reader": request.param})


def _reader_query_params() -> list:
    """(reader, query): SPARK and PYTHON with ``tpch_query_params()`` (the
    ``DEFAULT_QUERIES`` by default, the other 15 marked ``stress``)."""
    return [
        pytest.param(reader, *p.values, id=f"{reader}-{p.id}", marks=p.marks)
        for reader in ("SPARK", "PYTHON")
        for p in tpch_query_params()
    ]


@pytest.mark.parametrize(
    ("views_by_reader", "n"), _reader_query_params(), indirect=["views_by_reader"]
)
def test_query_through_tiered_hive_matches_duckdb(
    n, spark, views_by_reader, duckdb_expected, tpch_scale
):
    actual = oracle.spark_rows(spark.sql(queries.query_text(n, tpch_scale, "spark")))
    diff = oracle.compare_results(
        duckdb_expected[n], actual, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"Q{n}: {diff}"
    assert len(actual) > 0


def _overlapping_partitions(data_dir: str, lo: dt.date, hi: dt.date) -> int:
    """Counted from the files themselves (not from the metastore), as an independent check."""
    n = 0
    for part in sorted(Path(data_dir, "lineitem").iterdir()):
        dates = pq.read_table(part, columns=["l_shipdate"])["l_shipdate"]
        mm = pc.min_max(dates).as_py()
        if mm["min"] < hi and mm["max"] >= lo:
            n += 1
    return n


def test_shipdate_filter_opens_only_overlapping_partitions(
    spark, tiered_tpch, counted, s3_endpoint, tpch_sf001_dir
):
    lo, hi = dt.date(1995, 3, 1), dt.date(1995, 6, 1)
    expected = _overlapping_partitions(tpch_sf001_dir, lo, hi)
    total = len(list(Path(tpch_sf001_dir, "lineitem").iterdir()))
    assert expected == 3 and total > 80
    df = tiered_tpch("lineitem").where(f"l_shipdate >= date '{lo}' and l_shipdate < date '{hi}'")
    s3_endpoint.reset_stats()
    with counted() as c:
        rows = df.count()
    requests = s3_endpoint.stats()["requests"]
    duck = (
        oracle.duckdb_connection(tpch_sf001_dir)
        .execute(
            f"select count(*) from lineitem where l_shipdate >= date '{lo}' "
            f"and l_shipdate < date '{hi}'"
        )
        .fetchone()[0]
    )
    assert rows == duck
    assert c["planner.partitions_total"] == total
    assert c["planner.partitions_pruned_by_stats"] == total - expected
    assert c["reader.files_opened"] == expected  # one file per partition at SF 0.01
    # The surviving partitions are months wholly inside the window: their statistics make
    # both bounds (and Spark's IsNotNull) always true, so count(*) needs no column there.
    assert c["planner.predicates_dropped_by_stats"] == 3 * expected
    # At the store: every partition is listed (its statistics prune it only once its
    # listing shows the files they were computed from; the listing cache makes
    # that free for sealed partitions once warm), all by one listing of the table's location
    # (planner.TableRoot), no object is HEADed, and each opened file costs a footer read only
    # (its row count).
    assert c["planner.partitions_listed"] == c["planner.listings_from_root"] == total
    assert requests["LIST"] == c["planner.root_listings"] == 1
    assert requests["HEAD"] == 0 and requests["GET"] == 0
    assert requests["RANGED_GET"] == expected


def test_unreachable_endpoint_is_a_clear_error(spark, tiered_tpch, free_port):
    dead = f"http://127.0.0.1:{free_port}"
    df = (
        tiered_tpch("nation")
        .sparkSession.read.format("tiered_hive")
        .option("hive.s3.endpoint", dead)
        .option("hive.s3.aws-access-key", "testing")
        .option("hive.s3.aws-secret-key", "testing")
        .option("hive.s3.path-style-access", "true")
        .option("hive.s3.region", "us-east-1")
        .option("hive.s3.connect-timeout", "1s")
        .option("hive.s3.max-error-retries", "0")
        .load(f"{DATABASE}.nation")
    )
    with pytest.raises(Exception, match=rf"could not connect to {dead} for s3://.*nation"):
        df.collect()


# Q1 and Q6 with their default substitution parameters, and with others (dates, discount,
# quantity, delta), as (query, [(old, new), ...]).
PUSHED_VARIANTS = [
    (1, []),
    (6, []),
    (1, [("interval '90' day", "interval '60' day")]),
    (6, [("date '1994-01-01'", "date '1996-01-01'"), ("0.06", "0.03"), ("< 24", "< 30")]),
]


def test_q1_and_q6_push_their_aggregation_into_the_scan(
    spark, tiered_tpch, tpch_sf001_dir, tpch_scale, counted
):
    """Q1 and Q6 are pushed (the plan shows it) and each split hands Spark its groups, not
    its rows: at most Q1's 4 groups, exactly Q6's one row; results equal DuckDB's, with the
    default substitution parameters and with others."""
    con = oracle.duckdb_connection(tpch_sf001_dir, threads=2)
    for n, changes in PUSHED_VARIANTS:
        text = {e: queries.query_text(n, tpch_scale, e) for e in ("spark", "duckdb")}
        for old, new in changes:
            assert all(old in t for t in text.values())
            text = {e: t.replace(old, new) for e, t in text.items()}
        df = spark.sql(text["spark"])
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert "PushedAggregates: [" in plan and "PushedFilters: [" in plan, (n, plan)
        with counted() as c:
            actual = oracle.spark_rows(df)
        expected = [tuple(r) for r in con.execute(text["duckdb"]).fetchall()]
        diff = oracle.compare_results(
            expected, actual, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
        )
        assert diff is None, f"Q{n} {changes}: {diff}"
        splits = c["aggregation.splits"]
        assert splits > 0 and c["reader.rows_to_spark"] == c["aggregation.groups_out"]
        assert c["aggregation.rows_in"] > 10 * c["aggregation.groups_out"]
        if n == 6:
            assert c["aggregation.groups_out"] == splits  # one row per split, even empty ones
        else:
            assert splits <= c["aggregation.groups_out"] <= 4 * splits
