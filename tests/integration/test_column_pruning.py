"""Column pruning through the JVM provider: Spark's optimizer decides which columns each scan
needs, and the Python reader receives exactly those (asserted on what the reader recorded:
``scan.column.<table>.<column>`` per planned scan), for every shape of query."""

import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.native import provider_loadable
from raptorx_py.tables.table_registration import register_external_table
from tests.support.sample_tables import write_monthly_facts

pytestmark = pytest.mark.spark

COLUMNS = ("id", "qty", "price", "name", "day", "m")


@pytest.fixture(scope="module")
def wide(env, tmp_path_factory):
    root = tmp_path_factory.mktemp("wide") / "wide"
    write_monthly_facts(root, with_day=True)
    db = env.unique_db("prune")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.wide", str(root))
    return f"{db}.wide"


@pytest.fixture(scope="module")
def wide_root(env, wide):
    with env.metastore() as ms:
        return ms.get_table(*wide.split(".")).location


def scans(c, table):
    """(number of scans planned, {column: times requested}) from the counters."""
    prefix = f"scan.column.{table}."
    return (
        c[f"scan.planned.{table}"],
        {k[len(prefix) :]: v for k, v in c.delta.items() if k.startswith(prefix)},
    )


@pytest.fixture(scope="module", autouse=True)
def needs_provider(spark):
    assert provider_loadable(spark), "the native jar must be on the test session's classpath"


CASES = [
    ("select id from {t}", {"id": 1}),
    ("select name, id from {t} where qty = 3", {"id": 1, "qty": 1, "name": 1}),
    ("select count(*) from {t}", {}),
    # aggregated in the scan: the partition filter prunes, no column is read
    ("select count(*) from {t} where m = '2'", {}),
    ("select m, round(sum(price), 6) from {t} group by m", {"price": 1, "m": 1}),
    ("select id, rank() over (partition by m order by day) from {t}", {"id": 1, "m": 1, "day": 1}),
    (
        "select a.id, b.name from {t} a join {t} b on a.id = b.qty",
        {"id": 1, "qty": 1, "name": 1},
    ),  # a: id; b: qty, name
    # aggregated in the scan: the filters' columns are decoded for the predicates only
    ("select max(day) from {t} where id > 10 and name like 'n1%'", {"day": 1}),
]


@pytest.mark.parametrize("sql, expected", CASES)
def test_reader_receives_only_referenced_columns(spark, wide, wide_root, counted, sql, expected):
    spark.read.format("tiered_hive").load(wide).createOrReplaceTempView("wide_view")
    query = sql.format(t="wide_view")
    expected_scans = 2 if " join " in sql else 1
    with counted() as c:
        rows = spark.sql(query).collect()
    assert scans(c, wide) == (expected_scans, expected)
    # The pruned read gives the same answer as Spark's own reader over the same files.
    spark.read.parquet(wide_root).createOrReplaceTempView("wide_view")
    assert sorted(map(tuple, rows)) == sorted(map(tuple, spark.sql(query).collect()))


def test_dataframe_select_and_where(spark, wide, counted):
    df = spark.read.format("tiered_hive").load(wide)
    with counted() as c:
        got = sorted(r.name for r in df.where("id < 3").select("name").collect())
    assert got == ["n0", "n1", "n2"]
    assert scans(c, wide) == (1, {"id": 1, "name": 1})


def test_explain_shows_the_pruned_schema(spark, wide):
    df = spark.read.format("tiered_hive").load(wide).select("qty", "id").where("qty > 1")
    plan = df._jdf.queryExecution().executedPlan().toString()
    scanned = re.search(r"BatchScan tiered_hive \S+\[([^\]]*)\]", plan).group(1)
    assert [a.split("#")[0] for a in scanned.split(", ")] == ["id", "qty"]
    # The reader evaluates this filter exactly and says so: Spark does not re-apply it.
    assert "Filter (" not in plan and "isnotnull(qty" not in plan


def test_other_sources_plans_are_unchanged(spark, tmp_path):
    path = str(tmp_path / "plain")
    spark.range(10).selectExpr("id", "id * 2 as twice").write.parquet(path)
    df = spark.read.parquet(path).where("id > 4").select("twice")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan and "ReadSchema: struct<id:bigint,twice:bigint>" in plan
    assert sorted(r.twice for r in df.collect()) == [10, 12, 14, 16, 18]


def test_load_creates_the_python_source_once_for_every_scan(spark, wide, counted):
    """The Python DataSource's creation (a worker call of its own) happens at load(), not
    again for each scan: each scan still plans afresh (its own columns and filters)."""
    with counted() as c:
        spark.read.format("tiered_hive").load(wide).createOrReplaceTempView("wide_once")
    assert c["source.created"] == 1
    with counted() as c:
        joined = spark.sql(
            "select a.id, b.name from wide_once a join wide_once b on a.id = b.qty where a.m = '1'"
        ).collect()
        one = spark.sql("select count(*) from wide_once where m = '2'").collect()
    assert c["source.created"] == 0
    # m: the join's a.m filter; the count(*) scan is aggregated in the scan and reads none
    assert scans(c, wide) == (3, {"id": 1, "qty": 1, "name": 1, "m": 1})
    assert len(joined) == 40 and one[0][0] == 20


def test_a_given_schema_creates_the_python_source_at_the_first_scan(spark, wide, counted):
    df = spark.read.format("tiered_hive").schema("id bigint, name string").load(wide)
    with counted() as c:
        first = df.where("id < 2").collect()
    assert c["source.created"] == 1
    with counted() as c:
        second = df.where("id >= 38").collect()
    assert c["source.created"] == 0
    assert sorted(r.name for r in first) == ["n0", "n1"]
    assert sorted(r.name for r in second) == ["n38", "n39"]


@pytest.fixture(scope="module")
def dim(env, tmp_path_factory):
    """A small unpartitioned table (its metastore entry has totalSize and numRows)."""
    root = tmp_path_factory.mktemp("dim") / "dim"
    os.makedirs(root)
    pq.write_table(
        pa.table(
            {"k": pa.array(range(5), pa.int32()), "label": pa.array([f"k{i}" for i in range(5)])}
        ),
        root / "part-0.parquet",
    )
    db = env.unique_db("stats")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.dim", str(root))
        params = ms.get_table(db, "dim").parameters
    return f"{db}.dim", int(params["totalSize"])


def plan_size(df) -> int:
    return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def test_an_unpartitioned_table_reports_its_size_and_a_small_one_is_broadcast(spark, wide, dim):
    name, size = dim
    df = spark.read.format("tiered_hive").load(name)
    assert plan_size(df) == size  # every column: the whole table
    assert plan_size(df.select("k")) < size  # fewer columns, fewer bytes
    # The statistics travel outside the schema Spark and the user see.
    assert all(not f.metadata for f in df.schema.fields)
    facts = spark.read.format("tiered_hive").load(wide)
    joined = facts.join(df, on=facts.qty == df.k)
    plan = joined._jdf.queryExecution().executedPlan().toString()
    assert "BroadcastHashJoin" in plan and "SortMergeJoin" not in plan
    assert joined.count() == 40


def test_a_partitioned_table_reports_its_partitions_summed_size(spark, env, wide, dim):
    # As Spark's own reader does for a partitioned directory: a partitioned table small
    # enough is broadcast (TPC-H Q22 joins customer with orders that way).
    with env.metastore() as ms:
        table = ms.get_table(*wide.split("."))
        partitions = ms.list_partitions(table)
    size = sum(int(p.parameters["totalSize"]) for p in partitions)
    facts = spark.read.format("tiered_hive").load(wide)
    assert len(partitions) > 1 and plan_size(facts) == size
    assert plan_size(facts.select("id")) < size
    name, _ = dim
    dims = spark.read.format("tiered_hive").load(name)
    plan = dims.join(facts, on=facts.qty == dims.k)._jdf.queryExecution().executedPlan()
    assert "BroadcastHashJoin" in plan.toString()


def test_a_partition_without_a_size_leaves_the_tables_size_unknown(spark, env, tmp_path):
    root = tmp_path / "facts"
    write_monthly_facts(root, with_day=True)
    db = env.unique_db("nosize")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.facts", str(root))
        table = ms.get_table(db, "facts")
        first = ms.list_partitions(table)[0]
        ms.set_partition_parameters(table, first.values, {"totalSize": None})
    df = spark.read.format("tiered_hive").load(f"{db}.facts")
    default = spark._jsparkSession.sessionState().conf().defaultSizeInBytes()
    assert plan_size(df) == default  # Spark's default: never broadcast
