"""Writes to ORC tables: ``hive.storage-format=ORC`` makes a write create an ORC table, and
every later write to it (append, overwrite) writes ORC files under the same transaction
rules as a Parquet table's (write ids, ACID directories, an overwrite's empty bases). The
rows read back through ``tiered_hive`` (Spark's ORC reader in the JVM, no Python task) equal
what Spark's own ORC writer and reader make of the same rows, in three session time zones.
Counts and values, never timings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raptorx_py.errors import NoSuchObjectError
from raptorx_py.storage.acid_layout import base_dir_name, delta_dir_name
from raptorx_py.tpch import oracle
from tests.integration.test_spark_write import frame, read, rows

pytestmark = pytest.mark.spark

ZONES = ("UTC", "America/Los_Angeles", "Asia/Kolkata")

TYPED = """
SELECT * FROM VALUES
  (1, 10000000000, CAST(12.34 AS DECIMAL(12,2)), CAST('123456789012.0123456789' AS DECIMAL(38,10)),
   DATE'1582-10-15', TIMESTAMP'2024-03-10 02:30:00', 'é', true, 1.5D, 'a'),
  (2, -1, CAST(-0.01 AS DECIMAL(12,2)), NULL, DATE'2024-02-29',
   TIMESTAMP'1969-12-31 23:59:59.999999', NULL, false, NULL, 'a'),
  (3, NULL, NULL, CAST('-1E-10' AS DECIMAL(38,10)), NULL, NULL, '', NULL, -0.0D, 'b')
AS t(i, l, d12, d38, day, ts, s, b, x, k)
"""


def orc_files(location: str) -> list[Path]:
    return [
        Path(d) / f
        for d, _, names in os.walk(location)
        for f in names
        if not f.startswith((".", "_"))
    ]


def test_an_orc_table_is_written_appended_and_overwritten_as_orc(spark, env, counted):
    db = env.unique_db("worc")
    name = f"{db}.sales"
    first, second = frame(spark, 0, 300), frame(spark, 300, 420)
    first.write.format("tiered_hive").option("hive.storage-format", "ORC").option(
        "partition_by", "region"
    ).mode("append").save(name)
    # the table keeps its format: no option needed to append to it
    second.write.format("tiered_hive").mode("append").save(name)
    with env.metastore() as ms:
        table = ms.get_table(db, "sales")
        assert table.storage_format == "ORC" and table.table_type == "MANAGED_TABLE"
        assert ms.get_valid_write_ids([name])[name].high_watermark == 2
        counts = {p.values[0]: p.row_count for p in ms.list_partitions(table)}
    assert counts == {"ASIA": 140, "EU": 140, "US": 140}
    location = table.location.removeprefix("file://")
    assert sorted(os.listdir(f"{location}/region=EU")) == [delta_dir_name(1), delta_dir_name(2)]
    files = orc_files(location)
    # a file per partition per write task, every one ORC
    assert len(files) >= 6 and all(f.read_bytes()[:3] == b"ORC" for f in files), files

    with counted() as c:
        assert rows(read(spark, name)) == rows(first.union(second))
    assert c["reader.spark_splits"] == len(files), dict(c)
    assert c.get("reader.python_tasks", 0) == 0, dict(c)

    # overwrite: the new rows only; a partition it empties gets an empty ORC base
    new = frame(spark, 1000, 1010, regions=("EU", "MARS"))
    new.write.format("tiered_hive").mode("overwrite").save(name)
    assert rows(read(spark, name)) == rows(new)
    empty = Path(location) / "region=US" / base_dir_name(3) / "empty-base.orc"
    assert empty.read_bytes()[:3] == b"ORC"
    assert all(f.read_bytes()[:3] == b"ORC" for f in orc_files(location))


def test_every_type_written_to_an_orc_table_reads_as_sparks_orc_reader_reads_it(
    spark, env, tmp_path
):
    """The rows written through ``tiered_hive`` into an ORC table, and the same rows written
    by Spark's ORC writer and read by its ORC reader, are equal in every session zone."""
    name = f"{env.unique_db('worct')}.typed"
    before = spark.conf.get("spark.sql.session.timeZone")
    try:
        spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
        source = spark.sql(TYPED)
        source.write.format("tiered_hive").option("hive.storage-format", "ORC").option(
            "partition_by", "k"
        ).mode("append").save(name)
        source.write.partitionBy("k").orc(str(tmp_path / "spark"))
        for zone in ZONES:
            spark.conf.set("spark.sql.session.timeZone", zone)
            ours = oracle.spark_rows(read(spark, name).select(*source.columns))
            theirs = oracle.spark_rows(
                spark.read.orc(str(tmp_path / "spark")).select(*source.columns)
            )
            assert oracle.compare_results(theirs, ours, ordered=False) is None, zone
            assert len(ours) == 3, zone
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


@pytest.mark.parametrize(
    "value", ["DATE'1500-02-28'", "TIMESTAMP'1582-10-14 23:00:00'", "DATE'0001-01-01'"]
)
def test_a_date_before_the_gregorian_calendar_is_refused_for_an_orc_table(spark, env, value):
    """pyarrow's ORC writer leaves its files' calendar Julian-Gregorian, so Spark's ORC
    reader would give such a value back as another day: the write fails naming the column,
    and nothing is committed."""
    name = f"{env.unique_db('worcj')}.t"
    df = spark.sql(f"SELECT 1 AS i, {value} AS old")
    writer = df.write.format("tiered_hive").option("hive.storage-format", "ORC").mode("append")
    with pytest.raises(Exception, match="column 'old' holds .* before 1582-10-15"):
        writer.save(name)
    with env.metastore() as ms, pytest.raises(NoSuchObjectError):
        ms.get_table(*name.split("."))


def test_a_timestamp_ntz_column_is_refused_for_an_orc_table_naming_it(spark, env):
    """pyarrow's ORC writer marks no timestamp as Spark's timestamp_ntz, which Spark's ORC
    reader would then refuse: the write is refused before anything is written."""
    name = f"{env.unique_db('worcn')}.t"
    df = spark.sql("SELECT 1 AS i, TIMESTAMP_NTZ'2024-01-01 00:00:00' AS when_local")
    writer = df.write.format("tiered_hive").option("hive.storage-format", "ORC").mode("append")
    with pytest.raises(Exception, match="timestamp_ntz column\\(s\\) when_local"):
        writer.save(name)
    with env.metastore() as ms, pytest.raises(NoSuchObjectError):
        ms.get_table(*name.split("."))
