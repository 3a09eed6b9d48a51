"""tiered_hive through real Spark (local mode): rows, partition columns, filters of every
type pushed and evaluated in Arrow (checked against Spark's own Parquet reader), column
selection, and the errors a user can run into."""

import datetime as dt
import os
import shutil
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.tables.table_registration import register_external_table

pytestmark = pytest.mark.spark


def _write(root, part, ids):
    d = os.path.join(root, part) if part else root
    os.makedirs(d, exist_ok=True)
    base = dt.date(2024, 1, 1) if "01" in (part or "") else dt.date(2024, 2, 1)
    pq.write_table(
        pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "qty": pa.array([i % 7 for i in ids], pa.int32()),
                "day": pa.array([base + dt.timedelta(days=i % 28) for i in ids], pa.date32()),
                "price": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(15, 2)),
                "ratio": pa.array([i / 3 for i in ids], pa.float64()),
                "name": pa.array(
                    [None if i % 5 == 0 else f"n{i:03d}" for i in ids], pa.string_view()
                ),
                "flag": pa.array([i % 2 == 0 for i in ids], pa.bool_()),
            }
        ),
        os.path.join(d, "part-0.parquet"),
        row_group_size=10,
    )


@pytest.fixture(scope="module")
def table(env, tmp_path_factory):
    """db.events: 3 partitions of 30 rows on local disk, registered in the session metastore."""
    root = str(tmp_path_factory.mktemp("events") / "events")
    _write(root, "m=2024-01", range(0, 30))
    _write(root, "m=2024-02", range(30, 60))
    _write(root, "m=__HIVE_DEFAULT_PARTITION__", range(60, 90))
    db = env.unique_db("events")
    with env.metastore() as ms:
        # Sealed: its files never change, so its statistics may prune (an unsealed
        # partition's may not: files added since registration are in no statistic).
        register_external_table(ms, env.settings(), f"{db}.events", root, sealed=True)
    return f"{db}.events", root


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


def test_reads_every_row_with_partition_column(spark, table):
    name, root = table
    df = spark.read.format("tiered_hive").load(name)
    assert [f.name for f in df.schema.fields] == [
        "id",
        "qty",
        "day",
        "price",
        "ratio",
        "name",
        "flag",
        "m",
    ]
    assert _rows(df) == _rows(_spark_parquet(spark, root))


def _spark_parquet(spark, root):
    # Partition values as strings, like the table's; the relation is resolved (and its
    # partitions inferred) by parquet(), so the setting is restored for the next test.
    key = "spark.sql.sources.partitionColumnTypeInference.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        df = spark.read.option("basePath", root).parquet(root)
    finally:
        spark.conf.set(key, before)
    return df.select("id", "qty", "day", "price", "ratio", "name", "flag", "m")


WHERE = [
    "id = 7",
    "id <=> 7",
    "not (id <=> 7)",
    "id > 80",
    "id >= 80",
    "id < 3",
    "id <= 3",
    "id in (1, 31, 61, 99)",
    "id not in (1, 2, 3)",
    "name is null",
    "name is not null",
    "name like 'n01%'",
    "name like '%5'",
    "name like '%02%'",
    "not (name like 'n0%')",
    "day >= date '2024-02-20'",
    "day = date '2024-01-05'",
    "price > 20.5",
    "price between 1.25 and 2.0",
    "ratio > 10.5",
    "flag = true",
    "qty = 3 and id > 40",
    "m = '2024-01'",
    "m is null",
    "m in ('2024-02')",
    "m > '2024-01'",
    "not (m = '2024-01')",
    "m like '2024%'",
    "id = 7 or id = 70",
    "name = 'nope'",
]


@pytest.mark.parametrize("where", WHERE)
def test_filters_agree_with_sparks_parquet_reader(spark, table, where):
    name, root = table
    got = spark.read.format("tiered_hive").load(name).where(where)
    assert _rows(got) == _rows(_spark_parquet(spark, root).where(where))


def test_filters_reach_arrow_and_prune_partitions_and_row_groups(spark, table, counted):
    name, _ = table
    # the Python reader's counts (row groups, rows): under AUTO Spark's reader reads
    df = spark.read.format("tiered_hive").option("hive.parquet.reader", "PYTHON").load(name)
    with counted() as c:
        assert df.where("day >= date '2024-02-25' and id < 60").count() == 4
    # Only 2024-02 has days that late and ids below 60: the January partition is pruned by
    # its day statistics, the null partition by its ids (60..89); inside 2024-02 only the
    # last row group of ten (ids 52..55 are Feb 25..28) can hold day >= 02-25.
    assert c["planner.partitions_pruned_by_stats"] == 2, c.delta
    assert c["reader.files_opened"] == 1, sorted(c.delta.items())
    assert c["reader.row_groups_read"] == 1 and c["reader.row_groups_pruned"] == 2
    assert c["reader.rows_read"] == 10 and c["reader.rows_out"] == 4


def test_partition_value_filter_never_opens_other_partitions(spark, table, counted):
    name, _ = table
    with counted() as c:
        assert spark.read.format("tiered_hive").load(name).where("m = '2024-02'").count() == 30
    assert c["planner.partitions_pruned_by_value"] == 2 and c["reader.files_opened"] == 1


def test_stats_pruning_can_be_switched_off(spark, table, counted):
    name, _ = table
    df = (
        spark.read.format("tiered_hive")
        .option("hive.partition-statistics-based-optimization-enabled", "false")
        .load(name)
    )
    with counted() as c:
        assert df.where("day >= date '2024-02-25' and id < 60").count() == 4
    assert c["planner.partitions_pruned_by_stats"] == 0 and c["reader.files_opened"] == 3


def test_user_schema_decodes_only_its_columns(spark, table, counted):
    name, _ = table
    with counted() as c:
        df = (  # the Python reader's counts: Spark's reader counts no column chunks
            spark.read.format("tiered_hive")
            .option("hive.parquet.reader", "PYTHON")
            .schema("price decimal(15,2), m string")
            .load(name)
        )
        rows = df.collect()
    assert len(rows) == 90 and df.columns == ["price", "m"]
    assert c["reader.column_chunks_read"] == 9  # 3 files x 3 row groups x 1 data column


def test_columns_option(spark, table, counted):
    name, _ = table
    with counted() as c:
        df = (  # the Python reader's counts: Spark's reader counts no column chunks
            spark.read.format("tiered_hive")
            .option("hive.parquet.reader", "PYTHON")
            .option("columns", "name, id")
            .load(name)
        )
        assert df.columns == ["name", "id"] and len(df.collect()) == 90
    assert c["reader.column_chunks_read"] == 18


def test_unknown_table_names_it_and_lists_existing(spark, table):
    name, _ = table
    db = name.split(".")[0]
    with pytest.raises(Exception, match=rf"table '{db}.nope' does not exist.*{db}.events"):
        spark.read.format("tiered_hive").load(f"{db}.nope")
    with pytest.raises(Exception, match="database 'nodb' does not exist"):
        spark.read.format("tiered_hive").load("nodb.events")


def test_wrong_options_and_schema_are_named(spark, table):
    name, _ = table
    with pytest.raises(Exception, match="property 'hive.s3.endpiont'"):
        spark.read.format("tiered_hive").option("hive.s3.endpiont", "x").load(name)
    with pytest.raises(Exception, match="hive.s3.connect-timeout"):
        spark.read.format("tiered_hive").option("hive.s3.connect-timeout", "soon").load(name)
    with pytest.raises(Exception, match="column 'nope' does not exist"):
        spark.read.format("tiered_hive").option("columns", "id,nope").load(name)
    # A schema's column the table lacks is nulls, as with Spark's Parquet reader
    # (test_column_names_spark.py).
    nulls = spark.read.format("tiered_hive").schema("nope int").load(name).collect()
    assert nulls and all(r.nope is None for r in nulls)
    with pytest.raises(Exception, match="column 'id' .* is bigint, but the schema asks for int"):
        spark.read.format("tiered_hive").schema("id int").load(name).collect()
    with pytest.raises(Exception, match="nope"):  # Spark's analyzer names the column
        spark.read.format("tiered_hive").load(name).where("nope > 1").collect()


def _two_partitions(env, tmp_path):
    """A fresh table of two partitions of ten rows: (name, root)."""
    root = str(tmp_path / "t")
    _write(root, "m=2024-01", range(10))
    _write(root, "m=2024-02", range(10, 20))
    name = f"{env.unique_db()}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    return name, root


def test_corrupt_file_fails_the_query_naming_it(spark, env, tmp_path):
    name, root = _two_partitions(env, tmp_path)
    bad = os.path.join(root, "m=2024-02", "part-0.parquet")
    data = open(bad, "rb").read()
    open(bad, "wb").write(data[: len(data) // 2])
    df = spark.read.format("tiered_hive").load(name)
    with pytest.raises(Exception, match=r"Corrupt or truncated Parquet file .*m=2024-02/part-0"):
        df.collect()
    assert df.where("m = '2024-01'").count() == 10  # the healthy partition still reads


def test_partition_gone_after_registration_fails_unless_ignored(spark, env, tmp_path):
    """The rule of docs/design/files-changing.md, "When the store holds less than the
    metastore says" (every case of it: test_absent_partitions.py)."""
    name, root = _two_partitions(env, tmp_path)
    shutil.rmtree(os.path.join(root, "m=2024-02"))
    df = spark.read.format("tiered_hive")
    with pytest.raises(Exception, match=r"PartitionMissingError: partition m=2024-02 of"):
        df.load(name).count()
    assert df.option("hive.ignore-absent-partitions", "true").load(name).count() == 10


# -- every scan keeps its own plan (pyspark 4.3 shares one per DataFrame; see raptorx_py.native)

SCAN_CASES = [
    ("select (select count(*) from v where id > 5) a, (select count(*) from v) b", (84, 90)),
    ("select (select count(*) from v) a, (select count(*) from v where id > 5) b", (90, 84)),
    ("select count(*) from v where id > 50", (39,)),
    ("select count(*) from v", (90,)),  # after a filtered query on the same view
    (
        "select (select count(*) from v where id > 85) a, (select avg(id) from v where id < 3) b",
        (4, 1.0),
    ),
    ("select count(*) from v a join v b on a.id = b.id where a.id > 80 and b.id < 85", (4,)),
]


def test_the_jvm_provider_serves_tiered_hive(spark):
    from raptorx_py import native

    assert native.jar_path() is not None and native.provider_loadable(spark)


def test_scans_of_one_view_keep_their_own_filters(spark, table, counted):
    name, _ = table
    spark.read.format("tiered_hive").load(name).createOrReplaceTempView("v")
    for sql, expected in SCAN_CASES:
        assert tuple(spark.sql(sql).collect()[0]) == expected, sql
    # and pushdown still prunes through the provider (the Python reader counts row groups)
    spark.read.format("tiered_hive").option("hive.parquet.reader", "PYTHON").load(
        name
    ).createOrReplaceTempView("v_python")
    with counted() as c:
        sql = "select count(*) from v_python where m = '2024-01' and id < 5"
        assert spark.sql(sql).collect()[0][0] == 5
    assert c["planner.partitions_pruned_by_value"] == 2 and c["reader.row_groups_pruned"] == 2


def test_two_alike_scans_of_one_query_are_read_once(spark, table, counted):
    """Two scans of one query alike (table, options, columns, filters in any order, OR's
    operands and IN's values too) are equal, so Spark reads one for both
    (``ReusedExchange``), as it does with its own file scans (TPC-H Q18 reads lineitem twice
    alike); sides with other filters stay two scans."""
    name, _ = table
    spark.read.format("tiered_hive").load(name).createOrReplaceTempView("v")
    side = "(select id from v where {})"
    query = "select count(*) from " + side + " a join " + side + " b on a.id = b.id"
    cases = {
        "alike": ("id < 70 and id > -1", "id < 70 and id > -1"),
        "reordered": ("id < 70 and id > -1", "id > -1 and id < 70"),
        "or-reordered": ("id < 70 and (qty = 1 or qty = 2)", "id < 70 and (qty = 2 or qty = 1)"),
        "in-reordered": ("id < 70 and qty in (1, 2)", "id < 70 and qty in (2, 1)"),
        # Not "id < 71": Spark infers each side's id bounds from the other's through the
        # join key, so both would read id < 70 and id < 71 (and be alike). qty's is not.
        "other": ("id < 70 and id > -1", "id < 70 and id > -1 and qty < 6"),
    }
    previous = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # both sides shuffled
    try:
        runs = {}
        for case, sides in cases.items():
            with counted() as c:
                df = spark.sql(query.format(*sides))
                count = df.collect()[0][0]
            plan = df._jdf.queryExecution().executedPlan().toString()
            runs[case] = (count, "ReusedExchange" in plan, c["reader.splits_read"])
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", previous)
    # ids 0..69 are in all three files (60..69 in the null partition's): 3 splits a scan.
    assert runs == {
        "alike": (70, True, 3),
        "reordered": (70, True, 3),
        "or-reordered": (20, True, 3),  # qty = id % 7
        "in-reordered": (20, True, 3),
        "other": (60, False, 6),  # qty = id % 7: ten of the ids below 70 have qty 6
    }, runs


def test_without_the_jar_results_are_the_same_with_no_pushdown(spark, env, table, counted):
    from raptorx_py.datasource.source import configured_source_class

    name, _ = table
    spark.dataSource.register(
        configured_source_class(env.settings(), name="tiered_hive_nojar", pushdown=False)
    )
    spark.read.format("tiered_hive_nojar").load(name).createOrReplaceTempView("v")
    with counted() as c:
        for sql, expected in SCAN_CASES:
            assert tuple(spark.sql(sql).collect()[0]) == expected, sql
    assert c["planner.partitions_pruned"] == 0 and c["reader.row_groups_pruned"] == 0
