"""The Spark write path: df.write.format("tiered_hive").mode(...).save("db.table") into
managed tables, read back through tiered_hive and checked against Spark's own Parquet reader
of the same rows."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from raptorx_py.metastore.notifications import get_notifications
from raptorx_py.storage.acid_layout import base_dir_name, delta_dir_name

pytestmark = pytest.mark.spark


def rows(df, cols=("id", "amount", "day", "region")):
    return sorted(tuple(r) for r in df.select(*cols).collect())


def frame(spark, lo, hi, regions=("EU", "US", "ASIA")):
    n = len(regions)
    return (
        spark.range(lo, hi)
        .withColumn("amount", (F.col("id") * 3 / 4).cast("decimal(12,2)"))
        .withColumn(
            "day", F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 40).cast("int"))
        )
        .withColumn(
            "region",
            F.element_at(F.array(*[F.lit(r) for r in regions]), (F.col("id") % n + 1).cast("int")),
        )
    )


def read(spark, name):
    return spark.read.format("tiered_hive").load(name)


def test_append_twice_then_overwrite(spark, env, tmp_path):
    db = env.unique_db("w")
    name = f"{db}.sales"
    first, second = frame(spark, 0, 300), frame(spark, 300, 420)
    first.write.format("tiered_hive").option("partition_by", "region").mode("append").save(name)
    second.write.format("tiered_hive").mode("append").save(name)
    with env.metastore() as ms:
        table = ms.get_table(db, "sales")
        assert table.table_type == "MANAGED_TABLE"
        assert [k.name for k in table.partition_keys] == ["region"]
        assert ms.get_valid_write_ids([name])[name].high_watermark == 2
        counts = {p.values[0]: p.row_count for p in ms.list_partitions(table)}
    assert counts == {"ASIA": 140, "EU": 140, "US": 140}
    location = table.location.removeprefix("file://")
    assert sorted(os.listdir(f"{location}/region=EU")) == [delta_dir_name(1), delta_dir_name(2)]
    assert not [n for n in os.listdir(location) if n.startswith(".")]  # staging gone

    # the oracle: Spark's own Parquet reader over the same rows
    first.union(second).write.parquet(str(tmp_path / "oracle"))
    oracle = spark.read.parquet(str(tmp_path / "oracle"))
    assert rows(read(spark, name)) == rows(oracle)
    got = (
        read(spark, name)
        .where("region = 'US' and id >= 100")
        .groupBy()
        .agg(F.count("*"), F.sum("amount"))
        .collect()[0]
    )
    want = (
        oracle.where("region = 'US' and id >= 100")
        .groupBy()
        .agg(F.count("*"), F.sum("amount"))
        .collect()[0]
    )
    assert tuple(got) == tuple(want)

    # overwrite: only the new rows, whatever partitions they land in
    frame(spark, 1000, 1010, regions=("EU", "MARS")).write.format("tiered_hive").mode(
        "overwrite"
    ).save(name)
    assert rows(read(spark, name)) == rows(frame(spark, 1000, 1010, regions=("EU", "MARS")))
    assert base_dir_name(3) in os.listdir(f"{location}/region=US")  # emptied, not dropped


def test_partition_by_through_the_jvm_provider(spark, env):
    from raptorx_py.native import provider_loadable

    if not provider_loadable(spark):
        pytest.skip("needs the native jar (make native)")
    name = f"{env.unique_db('w')}.events"
    df = frame(spark, 0, 50)
    df.write.format("tiered_hive").partitionBy("region", "day").mode("append").save(name)
    with env.metastore() as ms:
        table = ms.get_table(*name.split("."))
    assert [(k.name, k.type) for k in table.partition_keys] == [
        ("region", "string"),
        ("day", "date"),
    ]
    assert rows(read(spark, name)) == rows(df)
    with pytest.raises(Exception, match="partitioned by \\(region, day\\)"):
        df.write.format("tiered_hive").partitionBy("day").mode("append").save(name)


def test_failing_task_leaves_nothing(spark, env):
    db = env.unique_db("w")
    name = f"{db}.t"
    frame(spark, 0, 40).write.format("tiered_hive").option("partition_by", "region").mode(
        "append"
    ).save(name)
    with env.metastore() as ms:
        table = ms.get_table(db, "t")
        before_parts = {p.values: p.parameters for p in ms.list_partitions(table)}
        before_ids = ms.get_valid_write_ids([name])[name]
        before_txn = get_notifications(ms)[-1].event_id

    @F.udf(LongType())
    def explode_on_77(i):
        if i == 77:
            raise ValueError("row 77 is poison")
        return i

    # No shuffle before the write: the UDF fails inside a write task, while the other task
    # may already have staged its files.
    bad = frame(spark, 40, 120, regions=("EU", "NEW")).withColumn("id", explode_on_77("id"))
    with pytest.raises(Exception, match="row 77 is poison"):
        bad.write.format("tiered_hive").mode("append").save(name)
    assert rows(read(spark, name)) == rows(frame(spark, 0, 40))
    with env.metastore() as ms:
        assert {p.values: p.parameters for p in ms.list_partitions(table)} == before_parts
        after_ids = ms.get_valid_write_ids([name])[name]
        events = [e for e in get_notifications(ms, before_txn)]
        txns = {e.txn_id for e in events if e.event_type == "OPEN_TXN"}
        assert [ms.get_transaction(t).state for t in txns] == ["aborted"]
    assert after_ids == before_ids  # no write id was even allocated
    assert not [
        e
        for e in events
        if e.event_type in ("ADD_PARTITION", "ALTER_PARTITION", "ALLOC_WRITE_ID", "COMMIT_TXN")
    ]
    location = table.location.removeprefix("file://")
    assert not [n for n in os.listdir(location) if n.startswith(".")]  # staging removed
    assert not os.path.exists(f"{location}/region=NEW")

    # a new table whose first write fails is never created
    with pytest.raises(Exception, match="row 77 is poison"):
        bad.write.format("tiered_hive").option("partition_by", "region").mode("append").save(
            f"{db}.never"
        )
    with env.metastore() as ms:
        assert "never" not in ms.list_tables(db)


def test_writing_an_external_table_is_refused(spark, env, tmp_path):
    from raptorx_py.tables.table_registration import register_external_table

    frame(spark, 0, 10).write.parquet(str(tmp_path / "ext"))
    db = env.unique_db("w")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.ext", f"file://{tmp_path}/ext")
    with pytest.raises(Exception, match="EXTERNAL table: tiered_hive writes MANAGED"):
        frame(spark, 0, 10).write.format("tiered_hive").mode("append").save(f"{db}.ext")


def test_python_source_without_the_jar_writes_too(spark, env):
    """What ``register`` installs as tiered_hive when the jar is missing: the Python source
    alone (pyspark's PythonDataSourceV2), whose writes take partition keys by option."""
    from raptorx_py.datasource.source import configured_source_class

    source = "tiered_hive_nojar_write"
    spark.dataSource.register(configured_source_class(env.settings(), name=source, pushdown=False))
    name = f"{env.unique_db('w')}.nojar"
    frame(spark, 0, 30).write.format(source).option("partition_by", "region").mode("append").save(
        name
    )
    frame(spark, 30, 45).write.format(source).mode("append").save(name)
    assert rows(spark.read.format(source).load(name)) == rows(frame(spark, 0, 45))
    frame(spark, 7, 9).write.format(source).mode("overwrite").save(name)
    assert rows(spark.read.format(source).load(name)) == rows(frame(spark, 7, 9))
    with env.metastore() as ms:
        assert ms.get_valid_write_ids([name])[name].committed_count() == 3
