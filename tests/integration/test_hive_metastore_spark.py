"""tiered_hive over a real Hive Metastore 2.3.10 (``hive.metastore.uri``), through Spark.

- The 22 TPC-H queries (SF 0.01) over tables registered in the Hive Metastore equal DuckDB
  (``tests.support.tpch_fixtures.DEFAULT_QUERIES`` by default, every table; all 22 under ``make
  stress``).
- A table made by Spark's own Hive catalog (``enableHiveSupport()`` pointed at the same server,
  ``CREATE TABLE ... USING parquet PARTITIONED BY``, ``INSERT``), in another Spark application
  (a child process: a session's catalog implementation is fixed when its JVM starts), reads
  through tiered_hive with the same rows as that application's ``spark.table``; so does one
  stored as Hive stores ORC (``STORED AS ORC``: ORC's SerDe and input format), and a Hive
  Parquet table's ``CHAR(5)`` column, padded on read as Spark pads it.
- Another process's new partition is in the next query's answer, through HMS's notification
  log: the cache's TTL (1h) and background refresh (1h) would not show it.

Counted, never timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.config import load_settings
from raptorx_py.hive.model import Partition
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch import oracle, queries
from tests.support.jvm_options import spark_java_options
from tests.support.tpch_fixtures import tpch_query_params

pytestmark = pytest.mark.spark

DATABASE = "tpch_hms"


def hms_options(uri: str) -> dict[str, str]:
    return {
        "hive.metastore.uri": uri,
        "hive.metastore-cache-ttl": "1h",
        "hive.metastore-refresh-interval": "1h",
        # Embedded Derby takes seconds for a batch of partition statistics.
        "hive.metastore-timeout": "120s",
    }


def reader(spark, uri: str):
    def read(name: str):
        return spark.read.format("tiered_hive").options(**hms_options(uri)).load(name)

    return read


@pytest.fixture(scope="module")
def hms_tpch(spark, hms_uri, tpch_sf001_dir):
    """SF 0.01's eight tables registered (EXTERNAL, sealed) in the Hive Metastore, and the
    TPC-H names as temp views over tiered_hive reads of them."""
    settings = load_settings(overrides=hms_options(hms_uri))
    with open_catalog(settings.metastore_connection) as ms:
        ms.create_database(DATABASE)
        for table in queries.TABLES:
            register_external_table(
                ms,
                settings,
                f"{DATABASE}.{table}",
                f"file://{tpch_sf001_dir}/{table}",
                replace=True,
                sealed=True,
            )
    read = reader(spark, hms_uri)
    queries.register_views(spark, lambda t: read(f"{DATABASE}.{t}"))
    return read


@pytest.mark.parametrize("n", tpch_query_params())
def test_tpch_over_the_hive_metastore_matches_duckdb(
    n, spark, hms_tpch, duckdb_expected, tpch_scale
):
    actual = oracle.spark_rows(spark.sql(queries.query_text(n, tpch_scale, "spark")))
    diff = oracle.compare_results(
        duckdb_expected[n], actual, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"Q{n}: {diff}"
    assert len(actual) > 0


#: Run in a child Python: a Spark application with Spark's own Hive catalog on the server.
HIVE_CATALOG_APP = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    uri, warehouse, java_options = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .enableHiveSupport()
        .getOrCreate()
    )
    spark.sql(f"CREATE DATABASE IF NOT EXISTS sparkdb LOCATION '{warehouse}/sparkdb.db'")
    spark.sql(
        "CREATE TABLE sparkdb.events (id BIGINT, name STRING, day DATE, amount DECIMAL(10,2), "
        "k INT) USING parquet PARTITIONED BY (k)"
    )
    spark.sql(
        "INSERT INTO sparkdb.events VALUES "
        "(1, 'a', DATE'2024-01-01', 1.50, 1), (2, 'b', DATE'2024-01-02', 2.25, 1), "
        "(3, NULL, DATE'2024-02-01', NULL, 2), (4, 'd', NULL, 4.00, 2), "
        "(5, 'e', DATE'2024-03-01', 5.75, 3)"
    )
    rows = [
        [r.id, r.name, None if r.day is None else r.day.isoformat(),
         None if r.amount is None else str(r.amount), r.k]
        for r in spark.table("sparkdb.events").collect()
    ]
    print("ROWS " + json.dumps(sorted(rows, key=lambda r: r[0])), flush=True)
    # The same rows in a table as Hive makes it: ORC's SerDe and input format, no provider.
    spark.sql("SET hive.exec.dynamic.partition.mode=nonstrict")
    spark.sql(
        "CREATE TABLE sparkdb.events_orc (id BIGINT, name STRING, day DATE, "
        "amount DECIMAL(10,2)) PARTITIONED BY (k INT) STORED AS ORC"
    )
    spark.sql("INSERT INTO sparkdb.events_orc SELECT * FROM sparkdb.events")
    rows = [
        [r.id, r.name, None if r.day is None else r.day.isoformat(),
         None if r.amount is None else str(r.amount), r.k]
        for r in spark.table("sparkdb.events_orc").collect()
    ]
    print("ORC " + json.dumps(sorted(rows, key=lambda r: r[0])), flush=True)
    # Hive's char and varchar over a Parquet file holding them unpadded: Spark pads on read.
    spark.sql(
        "CREATE EXTERNAL TABLE sparkdb.chars (id INT, c CHAR(5), v VARCHAR(4)) "
        f"STORED AS PARQUET LOCATION '{sys.argv[4]}'"
    )
    rows = [list(r) for r in spark.sql("SELECT id, c, v, c = 'ab' FROM sparkdb.chars").collect()]
    print("CHARS " + json.dumps(sorted(rows, key=lambda r: r[0])), flush=True)
    spark.stop()
    """
)


def as_rows(df) -> list[list]:
    return sorted(
        (
            [
                r.id,
                r.name,
                None if r.day is None else r.day.isoformat(),
                None if r.amount is None else str(r.amount),
                r.k,
            ]
            for r in df.collect()
        ),
        key=lambda r: r[0],
    )


def test_a_table_of_sparks_hive_catalog_reads_the_same_and_sees_new_partitions(
    spark, hms_uri, tmp_path
):
    chars = tmp_path / "chars"
    chars.mkdir()
    pq.write_table(
        pa.table(
            {
                "id": pa.array([1, 2, 3, 4], pa.int32()),
                "c": pa.array(["ab", "abcde", "", None]),
                "v": pa.array(["abc", None, "ab  ", "abcd"]),
            }
        ),
        chars / "part-0.parquet",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            HIVE_CATALOG_APP,
            hms_uri,
            f"file://{tmp_path}/warehouse",
            spark_java_options(),
            f"file://{chars}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        cwd=tmp_path,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("ROWS ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    expected = json.loads(lines[0][len("ROWS ") :])
    assert len(expected) == 5

    read = reader(spark, hms_uri)
    assert as_rows(read("sparkdb.events")) == expected
    assert read("sparkdb.events").where("k = 2").count() == 2
    # Hive's ORC table: read by Spark's ORC reader, the same rows.
    orc = [x for x in done.stdout.splitlines() if x.startswith("ORC ")]
    assert orc and json.loads(orc[0][len("ORC ") :]) == expected
    settings = load_settings(overrides=hms_options(hms_uri))
    with open_catalog(settings.metastore_connection) as catalog:
        assert catalog.get_table("sparkdb", "events_orc").storage_format == "ORC"
    assert as_rows(read("sparkdb.events_orc")) == expected
    assert read("sparkdb.events_orc").where("k = 2").count() == 2
    # Hive's char(5) reads padded, as Spark's Hive catalog reads it, compared padded too.
    padded = [x for x in done.stdout.splitlines() if x.startswith("CHARS ")]
    assert json.loads(padded[0][len("CHARS ") :])[0] == [1, "ab   ", "abc", True]
    read("sparkdb.chars").createOrReplaceTempView("hms_chars")
    got = spark.sql("SELECT id, c, v, c = 'ab' FROM hms_chars").collect()
    assert sorted(list(r) for r in got) == json.loads(padded[0][len("CHARS ") :])

    # Another process (this one, a client of the server) adds a partition with a new file.
    settings = load_settings(overrides=hms_options(hms_uri))
    with open_catalog(settings.metastore_connection) as writer:
        table = writer.get_table("sparkdb", "events")
        part_dir = f"{table.location[len('file://') :]}/k=9"
        os.makedirs(part_dir)
        pq.write_table(
            pa.table(
                {
                    "id": pa.array([90], pa.int64()),
                    "name": pa.array(["z"], pa.string()),
                    "day": pa.array([date(2024, 9, 9)], pa.date32()),
                    "amount": pa.array([None], pa.decimal128(10, 2)),
                }
            ),
            f"{part_dir}/part-0.parquet",
        )
        writer.add_partitions(table, [Partition(("9",), f"file://{part_dir}")])
    got = as_rows(read("sparkdb.events"))
    assert got == expected + [[90, "z", "2024-09-09", None, 9]]


def test_a_spark_write_through_the_hive_metastore_is_refused_before_anything_is_written(
    spark, hms_uri, tmp_path
):
    """HMS 2.3 has no write ids: tiered_hive's writes (managed, insert-only ACID) are refused
    at the write's start, and no metastore is written (not hive.metastore.url's either)."""
    settings = load_settings(overrides=hms_options(hms_uri))
    with open_catalog(settings.metastore_connection) as ms:
        ms.create_database("refused", f"file://{tmp_path}/refused.db")
    with pytest.raises(Exception, match=r"Hive Metastore over Thrift.*nothing was written"):
        spark.range(3).write.format("tiered_hive").options(**hms_options(hms_uri)).mode(
            "append"
        ).save("refused.t")
    with open_catalog(settings.metastore_connection) as ms:
        assert ms.list_tables("refused") == []
    # HMS made the database's directory at its creation; the write put nothing in it.
    assert list((tmp_path / "refused.db").rglob("*")) == []


def write_partition(root, k: int, ids: list[int]) -> None:
    os.makedirs(f"{root}/k={k}", exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), f"{root}/k={k}/part-0.parquet")


def test_a_warm_query_through_spark_makes_only_the_notification_poll(
    spark, hms_uri, tmp_path, counted
):
    """Counted over every process (the metrics sink): once the planning worker's cache holds
    the table, a query's one metastore call is the notification poll; a partition another
    process adds costs the next query the poll and the partitions' reload, once."""
    root = tmp_path / "counted"
    for k in (1, 2):
        write_partition(root, k, [k * 10, k * 10 + 1])
    settings = load_settings(overrides=hms_options(hms_uri))
    with open_catalog(settings.metastore_connection) as ms:
        ms.create_database("counted_db")
        register_external_table(ms, settings, "counted_db.t", f"file://{root}")
    read = reader(spark, hms_uri)

    def ids() -> list[int]:
        return sorted(r.id for r in read("counted_db.t").where("k >= 1").collect())

    assert ids() == [10, 11, 20, 21]  # cold: the workers' caches fill
    for _ in range(2):
        with counted() as warm:
            assert ids() == [10, 11, 20, 21]
        # load()'s schema() is answered from its worker's cache within the TTL (no call):
        # the table and its partitions (their summed size, for Spark's join planning); the
        # scan's snapshot is the poll: one call, and the cache serves the rest (the
        # partitions again).
        assert warm["metastore.round_trips"] == 1, warm.delta
        assert warm["metastore_cache.partition_hits"] == 2
    write_partition(root, 3, [30])
    with open_catalog(settings.metastore_connection) as ms:
        table = ms.get_table("counted_db", "t")
        ms.add_partitions(table, [Partition(("3",), f"file://{root}/k=3")])
    with counted() as after:
        assert ids() == [10, 11, 20, 21, 30]
    # The poll, whose ADD_PARTITION invalidates the table's entries; then the snapshot of the
    # table (1), the table (1) and its partitions: their names and one batch (partitions,
    # statistics) (3).
    assert after["metastore_cache.events_applied"] >= 1, after.delta
    assert after["metastore_cache.partition_misses"] == 1
    assert after["metastore.round_trips"] == 1 + 1 + 1 + 3, after.delta


def test_a_partition_gone_fails_by_load_and_by_name_over_the_hive_metastore(
    spark, hms_uri, tmp_path, counted
):
    """The Hive Metastore's half of ``test_absent_partitions.py``: a sealed partition whose
    directory is gone fails with ``PartitionMissingError`` through ``load()`` and by SQL
    name, cold; its listing cached before, the next query fails with ``FileChangedError``;
    ``hive.ignore-absent-partitions`` reads it as empty."""
    from raptorx_py import native
    from tests.integration.test_absent_partitions import ROWS, failure, write_partitions

    root = tmp_path / "t"
    write_partitions(root)
    settings = load_settings(overrides=hms_options(hms_uri))
    with open_catalog(settings.metastore_connection) as ms:
        ms.create_database("absent_hms")
        register_external_table(ms, settings, "absent_hms.t", f"file://{root}", sealed=True)
    warm = {**hms_options(hms_uri), "hive.file-status-cache-tables": "*"}
    cached = spark.read.format("tiered_hive").options(**warm).load("absent_hms.t")
    assert len(cached.collect()) == 3 * ROWS  # k=3's listing is cached
    (root / "k=3" / "part-0.parquet").unlink()
    (root / "k=3").rmdir()
    spark.conf.set("spark.sql.catalog.absent_rx", native.CATALOG_CLASS)
    for key, value in hms_options(hms_uri).items():
        spark.conf.set(f"spark.sql.catalog.absent_rx.{key}", value)
    with counted() as c:
        by_load = failure(reader(spark, hms_uri)("absent_hms.t").collect)
        by_name = failure(spark.sql("SELECT count(*) FROM absent_rx.absent_hms.t").collect)
        changed = failure(cached.collect)
    for message in (by_load, by_name):
        assert message.startswith("raptorx_py.errors.PartitionMissingError: "), message
        assert f"partition k=3 of absent_hms.t, at file://{root}/k=3, does not exist" in message
    assert changed.startswith("raptorx_py.errors.FileChangedError: "), changed
    assert "`raptorx partition unseal absent_hms.t k=3`" in changed
    assert c["planner.partitions_absent"] == 2
    assert c["reader.files_changed"] == 1
    df = spark.read.format("tiered_hive").options(**hms_options(hms_uri))
    ignoring = df.option("hive.ignore-absent-partitions", "true").load("absent_hms.t")
    assert ignoring.count() == 2 * ROWS
