"""Type fidelity: files written by Spark, pyarrow and DuckDB read through
``tiered_hive`` exactly as ``spark.read.parquet`` reads them, with every pushed filter form on
every column (partition keys included), in a UTC and an America/Los_Angeles session.

A filter's result is compared as (row count, sum of a 64-bit hash of every column of every
row), many filters per Spark job (a UNION ALL of one aggregate per filter), so that the
default run stays within about a minute; ``-m stress`` runs every filter on every table.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.tables.table_registration import register_external_table
from tests.support import type_fidelity_data as data

pytestmark = pytest.mark.spark

SEED = 11
ZONES = ("UTC", "America/Los_Angeles")
TZ_KEY = "spark.sql.session.timeZone"


class _Conf:
    """A session setting for the length of a ``with`` block."""

    def __init__(self, spark, key, value):
        self.spark, self.key, self.value = spark, key, value

    def __enter__(self):
        self.before = self.spark.conf.get(self.key)
        self.spark.conf.set(self.key, self.value)

    def __exit__(self, *exc):
        self.spark.conf.set(self.key, self.before)


def _Zone(spark, zone):
    return _Conf(spark, TZ_KEY, zone)


@pytest.fixture(scope="module")
def tables(spark, env, tmp_path_factory):
    """{writer: (table name, root)}: the same rows written by pyarrow, Spark and DuckDB."""
    base = tmp_path_factory.mktemp("fidelity")
    rows = data.rows(n_random=25, seed=SEED)
    roots = {w: str(base / w) for w in ("pyarrow", "spark", "duckdb")}
    data.write_pyarrow(roots["pyarrow"], rows)
    with _Zone(spark, "UTC"):
        data.write_spark(spark, roots["spark"], roots["pyarrow"])
    data.write_duckdb(roots["duckdb"], rows, str(base))
    db = env.unique_db("fidelity")
    out = {}
    with env.metastore() as ms:
        for writer, root in roots.items():
            register_external_table(ms, env.settings(), f"{db}.{writer}", root)
            out[writer] = (f"{db}.{writer}", root)
    return out, rows


@pytest.fixture(scope="module")
def int96_table(env, tmp_path_factory):
    """INT96 written by pyarrow (no Spark metadata): years 1, 1677, 2262, 9999, nanoseconds."""
    root = str(tmp_path_factory.mktemp("int96") / "t")
    data.write_int96_pyarrow(root)
    name = f"{env.unique_db('int96')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    return name, root


@pytest.fixture(scope="module")
def no_stats_table(env, tmp_path_factory, tables):
    """The pyarrow rows again, in files without statistics."""
    _, rows = tables
    root = str(tmp_path_factory.mktemp("nostats") / "t")
    for (pk, pd), part in data.split_rows(rows):
        d = os.path.join(
            root, f"pk={'__HIVE_DEFAULT_PARTITION__' if pk is None else pk}", f"pd={pd}"
        )
        os.makedirs(d)
        pq.write_table(
            pa.Table.from_pylist(part, schema=data.SCHEMA),
            os.path.join(d, "part-0.parquet"),
            write_statistics=False,
        )
    name = f"{env.unique_db('nostats')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    return name, root


def _strings(df, *cols):
    return sorted(
        tuple(r) for r in df.selectExpr(*(f"CAST({c} AS STRING)" for c in cols)).collect()
    )


# -- one test per way a file's types were once read unlike Spark's reader ------------------
BIG = "1234567890123456789012345678.1234567890BD"


def test_decimal_literals_beyond_28_digits_keep_their_rows(spark, tables, no_stats_table):
    """pyspark decodes a pushed decimal in Python's 28-digit context; such a
    value must not prune (nor, without statistics, fail the query)."""
    (by_writer, _), (nostats, nostats_root) = tables, no_stats_table
    name, root = by_writer["pyarrow"]
    wheres = [f"dec38 = {BIG}", f"dec38 IN ({BIG}, 1.5BD)", f"dec38 <=> {BIG}", f"dec38 <= {BIG}"]
    assert spark.read.format("tiered_hive").load(name).where(wheres[0]).count() > 1
    assert _compare(spark, name, root, wheres) == []
    assert _compare(spark, nostats, nostats_root, wheres[:2]) == []


def test_timestamps_without_time_zone_read_as_wall_clock(spark, tables):
    """isAdjustedToUTC=false (pyarrow naive, DuckDB TIMESTAMP, Spark
    timestamp_ntz) is timestamp_ntz: the same text in every session time zone."""
    by_writer, rows = tables
    first = next(r["id"] for r in rows if r["ntz"] == dt.datetime(2020, 1, 1))
    for writer in ("pyarrow", "duckdb", "spark"):
        name, root = by_writer[writer]
        with _Zone(spark, "America/Los_Angeles"):
            ours = spark.read.format("tiered_hive").load(name)
            assert dict(ours.dtypes)["ntz"] == "timestamp_ntz", writer
            got = ours.where(f"id = {first}").selectExpr("CAST(ntz AS STRING)").first()[0]
            assert got == "2020-01-01 00:00:00", writer
            assert (
                _compare(spark, name, root, ["ntz = TIMESTAMP_NTZ '2020-01-01 00:00:00'"]) == []
            ), writer


@pytest.mark.parametrize("zone", ZONES)
def test_int96_at_every_year_reads_as_spark_reads_it(spark, tables, int96_table, zone):
    """INT96 at years 1 to 9999 and with nanosecond digits (truncated to
    microseconds), written by pyarrow and by Spark."""
    name, root = int96_table
    by_writer, _ = tables
    with _Zone(spark, zone):
        ours = spark.read.format("tiered_hive").load(name)
        assert _strings(ours, "id", "t96") == _strings(spark.read.parquet(root), "id", "t96")
        assert ("0001-01-01 00:00:00" in {r[1] for r in _strings(ours, "id", "t96")}) == (
            zone == "UTC"
        )
        sname, sroot = by_writer["spark"]
        assert _strings(spark.read.format("tiered_hive").load(sname), "id", "ts") == _strings(
            spark.read.parquet(sroot), "id", "ts"
        )


@pytest.fixture(scope="module")
def limits_table(env, tmp_path_factory):
    """An unpartitioned table of dates and UTC-adjusted timestamps at years 1 and 9999, and
    beyond what Python's datetime holds (which Spark reads, and so does tiered_hive)."""
    root = str(tmp_path_factory.mktemp("limits") / "t")
    os.makedirs(root)
    epoch = dt.date(1970, 1, 1)
    days = [
        (d - epoch).days if d else None
        for d in (dt.date(1, 1, 1), dt.date(9999, 12, 31), None, dt.date(2020, 1, 1))
    ]
    days += [days[1] + 1, days[0] - 366]  # 10000-01-01 and the year 0
    micros = [d * 86_400_000_000 + 1 if d is not None else None for d in days]
    pq.write_table(
        pa.table(
            {
                "id": pa.array(range(len(days)), pa.int64()),
                "d": pa.array(days, pa.int32()).cast(pa.date32()),
                "ts": pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            }
        ),
        os.path.join(root, "part-0.parquet"),
    )
    name = f"{env.unique_db('limits')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    return name, root


def test_literals_beyond_pythons_datetime_run_and_match(spark, limits_table):
    """A date or timestamp literal Python cannot hold (or cannot hold once moved
    into the session's time zone) is not pushed; the query runs and returns Spark's rows."""
    name, root = limits_table
    wheres = [
        "d < DATE '+10000-01-01'",
        "d > DATE '-0001-01-01'",
        "d IN (DATE '+10000-01-01', DATE '2020-01-01')",
        "ts < TIMESTAMP '+10000-01-01 00:00:00Z'",
        "ts <= TIMESTAMP_NTZ '9999-12-31 23:59:59.999999'",
    ]
    with _Zone(spark, "America/Los_Angeles"):
        assert _compare(spark, name, root, wheres) == []
        ours = spark.read.format("tiered_hive").load(name)
        assert _strings(ours, "id", "d", "ts") == _strings(
            spark.read.parquet(root), "id", "d", "ts"
        )


def _summaries(spark, df, wheres: list[str]) -> dict[int, tuple]:
    """{i: (count, hash sum)} of ``df.where(wheres[i])``, all in one Spark job."""
    from functools import reduce

    from pyspark.sql import functions as F

    cols = sorted(df.columns)
    parts = [
        df.where(w).agg(
            F.lit(i).alias("k"),
            F.count(F.lit(1)).alias("n"),
            F.sum(F.xxhash64(*cols).cast("decimal(38,0)")).alias("h"),
        )
        for i, w in enumerate(wheres)
    ]
    unioned = reduce(lambda a, b: a.unionAll(b), parts)
    return {r.k: (r.n, r.h) for r in unioned.collect()}


def _compare(spark, name: str, root: str, wheres: list[str], batch: int = 40) -> list[str]:
    """The WHERE clauses whose rows differ between tiered_hive and Spark's reader."""
    ours = spark.read.format("tiered_hive").load(name)
    theirs = spark.read.parquet(root)
    assert sorted((f.name, f.dataType) for f in ours.schema.fields) == sorted(
        (f.name, f.dataType) for f in theirs.schema.fields
    )
    differ = []
    for start in range(0, len(wheres), batch):
        chunk = wheres[start : start + batch]
        # Spark's own Parquet filter pushdown prunes row groups by statistics that leave out
        # NaN (`f64 >= NaN` finds no row there, though NaN >= NaN in Spark): the oracle is
        # Spark's evaluation of the filters over everything its reader reads.
        with _Conf(spark, "spark.sql.parquet.filterPushdown", "false"):
            want = _summaries(spark, theirs, chunk)
        got = _summaries(spark, ours, chunk)
        differ += [
            f"{w}: tiered_hive {got[i]} vs spark {want[i]}"
            for i, w in enumerate(chunk)
            if got[i] != want[i]
        ]
    return differ


def _sample(wheres: list[str], n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return wheres if n >= len(wheres) else rng.sample(wheres, n)


#: Filters per session time zone in the default run (each is two scans; a scan costs about a
#: second of Python planning on a loaded 2-core machine). ``-m stress`` runs them all.
CI_FILTERS_PER_ZONE = 10


@pytest.mark.parametrize("zone", ZONES)
def test_sampled_filters_agree_with_sparks_reader(spark, tables, zone):
    """A seeded sample of every filter form on every column, spread over the writers."""
    by_writer, rows = tables
    wheres = _sample(
        data.filters(rows, seed=SEED, per_column=2),
        CI_FILTERS_PER_ZONE,
        seed=SEED + ZONES.index(zone),
    )
    differ = []
    with _Zone(spark, zone):
        for i, (writer, (name, root)) in enumerate(sorted(by_writer.items())):
            share = wheres[i :: len(by_writer)]
            differ += [f"[{writer}] {d}" for d in _compare(spark, name, root, share)]
    assert not differ, "\n".join(differ)


@pytest.mark.stress
@pytest.mark.parametrize("zone", ZONES)
def test_every_filter_on_every_table_stress(spark, tables, zone):
    by_writer, rows = tables
    wheres = data.filters(rows, seed=SEED, per_column=2)
    differ = []
    with _Zone(spark, zone):
        for writer, (name, root) in sorted(by_writer.items()):
            differ += [f"[{writer}] {d}" for d in _compare(spark, name, root, wheres)]
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("zone", ZONES)
def test_the_providers_plan_requests_are_sparks_own_bytes(spark, tables, zone, counted):
    """The provider writes pyspark's plan request itself, with one Jackson mapper for every
    request (``PlannedPython.scala``, ``PlanRequest``). With ``CHECK_PLAN_REQUESTS_CONF`` on,
    Spark's runner writes each request too and a difference fails the planning: every filter
    form on every column (one, and three at once), planned only, none run; a filter Spark
    folds away (its scan then not planned) sends none."""
    from raptorx_py.jvm_contract.protocol import CHECK_PLAN_REQUESTS_CONF

    by_writer, rows = tables
    name, _ = by_writer["pyarrow"]
    wheres = data.filters(rows, seed=SEED, per_column=2)
    planned = spark._jvm.org.apache.spark.sql.execution.datasources.v2.python.raptorx.PlannedPython
    before = planned.planRequestsChecked()
    df = spark.read.format("tiered_hive").load(name)
    groups = [[w] for w in wheres] + [wheres[i : i + 3] for i in range(0, len(wheres), 3)]
    spark.conf.set(CHECK_PLAN_REQUESTS_CONF, "true")
    try:
        with _Zone(spark, zone), counted() as c:
            for group in groups:
                where = " AND ".join(f"({w})" for w in group)
                df.where(where)._jdf.queryExecution().optimizedPlan()
    finally:
        spark.conf.unset(CHECK_PLAN_REQUESTS_CONF)
    assert planned.planRequestsChecked() - before == c["planning.driver_calls"] > len(groups) // 2
