"""The native provider hands Spark the Python worker's Arrow batches as columns
(``ArrowColumnarScan``): the plan reads columnar batches, and every type comes out exactly as
Spark's own Parquet reader gives it, decimals of precision up to 18 (read as longs) and above
(read through Arrow's BigDecimal) included, with nulls, negatives and the extremes."""

import datetime as dt
import os
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py import native
from raptorx_py.tables.table_registration import register_external_table

pytestmark = pytest.mark.spark

ROWS = 2_500  # several Arrow batches per file would need more; several row groups suffice


def _decimals(precision, scale, n, seed):
    """The extremes, zero, a null, +-1 in the last place, then seeded random values."""
    rng = random.Random(seed)
    top = 10**precision - 1
    unscaled = [top, -top, 0, None, 1, -1] + [rng.randint(-top, top) for _ in range(n)]
    # Decimal(text) is exact; arithmetic would round to the context's 28 digits
    return [None if u is None else Decimal(f"{u}E-{scale}") for u in unscaled[:n]]


@pytest.fixture(scope="module")
def typed_table(env, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("typed") / "typed")
    for part, offset in (("k=a", 0), ("k=b", ROWS)):
        d = os.path.join(root, part)
        os.makedirs(d)
        ids = list(range(offset, offset + ROWS))
        pq.write_table(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "d15": pa.array(_decimals(15, 2, ROWS, seed=offset + 15), pa.decimal128(15, 2)),
                    "d18": pa.array(_decimals(18, 0, ROWS, seed=offset + 18), pa.decimal128(18, 0)),
                    "d7": pa.array(_decimals(7, 7, ROWS, seed=offset + 7), pa.decimal128(7, 7)),
                    "d38": pa.array(
                        _decimals(38, 10, ROWS, seed=offset + 38), pa.decimal128(38, 10)
                    ),
                    "s": pa.array([None if i % 11 == 0 else f"v{i}" for i in ids], pa.string()),
                    "day": pa.array(
                        [dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in ids], pa.date32()
                    ),
                    "x": pa.array([None if i % 13 == 0 else i / 8 for i in ids], pa.float64()),
                    "b": pa.array([i % 3 == 0 for i in ids], pa.bool_()),
                }
            ),
            os.path.join(d, "part-0.parquet"),
            row_group_size=1000,
        )
    db = env.unique_db("typed")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.typed", root)
    return f"{db}.typed", root


def _rows(df):
    return sorted((tuple(r) for r in df.collect()), key=repr)


def test_every_column_equals_sparks_parquet_reader(spark, typed_table):
    name, root = typed_table
    ours = spark.read.format("tiered_hive").load(name)
    theirs = spark.read.parquet(root)
    columns = ["id", "d15", "d18", "d7", "d38", "s", "day", "x", "b", "k"]
    assert _rows(ours.select(*columns)) == _rows(theirs.select(*columns))
    # the extremes and signs made it through the long read path
    got = {r[0] for r in ours.select("d15").collect()}
    assert {Decimal("9999999999999.99"), Decimal("-9999999999999.99"), None} <= got


def test_aggregates_and_filters_over_columnar_batches(spark, typed_table):
    name, root = typed_table
    spark.read.format("tiered_hive").load(name).createOrReplaceTempView("typed_ours")
    spark.read.parquet(root).createOrReplaceTempView("typed_theirs")
    query = (
        "SELECT k, count(*), count(d15), sum(d15), min(d18), max(d7), min(d38), max(d38), "
        "count(s), max(day), sum(x) FROM {} WHERE id % 3 <> 1 AND d15 > -5 GROUP BY k"
    )
    assert _rows(spark.sql(query.format("typed_ours"))) == _rows(
        spark.sql(query.format("typed_theirs"))
    )
    assert spark.sql("SELECT count(*) FROM typed_ours").collect()[0][0] == 2 * ROWS


@pytest.mark.skipif(native.jar_path() is None, reason="needs the native jar (make native)")
def test_the_scan_is_columnar(spark, typed_table):
    name, _ = typed_table
    df = spark.read.format("tiered_hive").load(name).select("d15", "s")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "ColumnarToRow" in plan and "BatchScan" in plan, plan
