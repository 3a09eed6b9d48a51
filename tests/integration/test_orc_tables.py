"""ORC tables through ``tiered_hive``: a Hive-layout directory of ORC files (written by
pyarrow and by Spark) registered in the metastore reads, in AUTO, through Spark's own ORC
reader in the JVM, with the rows ``spark.read.orc`` gives, filters and pushed aggregations
included, and no Python task. The Python reader, which reads Parquet only, is never handed
an ORC split: a read that would need it fails naming why, and so does a corrupt ORC file.
Counts, not timings."""

from __future__ import annotations

import datetime as dt
import os
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from raptorx_py.errors import LayoutError
from raptorx_py.storage.fs import filesystem_for
from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch import oracle

pytestmark = pytest.mark.spark

ROWS = 2000
KEYS = ("a", "b", "c")

QUERIES = (
    "SELECT * FROM {t}",
    "SELECT id, s FROM {t} WHERE d15 > 10.5 AND day < date '2024-06-01'",
    "SELECT id, k FROM {t} WHERE s LIKE 'v1%' OR s IS NULL",
    "SELECT count(*), sum(x), sum(d15), min(d38), max(day) FROM {t} WHERE k = 'b' AND b",
    "SELECT id FROM {t} WHERE id IN (1, 17, 2500, 5999, 8000) AND k <> 'c'",
    "SELECT k, count(*), sum(d15), avg(id), min(ts), max(s) FROM {t} GROUP BY k",
    "SELECT d38, day FROM {t} WHERE d38 IS NOT NULL AND d15 BETWEEN -5 AND 500.25",
)


def _arrow_table(n: int, rng: random.Random) -> pa.Table:
    ids = list(range(n * ROWS, (n + 1) * ROWS))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "d15": pa.array(
                [None if i % 17 == 0 else Decimal(rng.randint(-99999, 99999)) / 100 for i in ids],
                pa.decimal128(15, 2),
            ),
            "d38": pa.array(
                [None if i % 5 == 0 else Decimal(f"{rng.randint(0, 10**20)}E-10") for i in ids],
                pa.decimal128(38, 10),
            ),
            "s": pa.array([None if i % 11 == 0 else f"v{i}" for i in ids], pa.string()),
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in ids]),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(seconds=37 * i) for i in ids],
                pa.timestamp("us"),
            ),
            "x": pa.array([None if i % 13 == 0 else i / 4 for i in ids], pa.float64()),
            "b": pa.array([i % 3 == 0 for i in ids], pa.bool_()),
        }
    )


def _write_pyarrow(root: str, seed: int = 11) -> None:
    """Partitions ``k=a``..``k=c``, one ORC file each, written by pyarrow (small stripes)."""
    rng = random.Random(seed)
    for n, key in enumerate(KEYS):
        d = os.path.join(root, f"k={key}")
        os.makedirs(d, exist_ok=True)
        orc.write_table(_arrow_table(n, rng), os.path.join(d, "000000_0"), stripe_size=64 * 1024)


def _registered(env, root, db_prefix: str):
    """``_write_pyarrow``'s partitions under ``root``, registered as ``<db>.t``: its name and
    the table."""
    _write_pyarrow(str(root))
    name = f"{env.unique_db(db_prefix)}.t"
    with env.metastore() as ms:
        return name, register_external_table(ms, env.settings(), name, str(root))


@pytest.fixture(scope="module")
def orc_table(env, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("orc") / "t")
    name, table = _registered(env, root, "orc")
    assert table.storage_format == "ORC"
    return name, root


def _rows(spark, sql):
    return oracle.spark_rows(spark.sql(sql))


def _view(spark, name, view, cache_dir=None, **options):
    r = spark.read.format("tiered_hive")
    r = r.option("cache.enabled", str(cache_dir is not None).lower())
    if cache_dir is not None:
        r = r.option("cache.base-directory", cache_dir)
    for k, v in options.items():
        r = r.option(k, v)
    r.load(name).createOrReplaceTempView(view)


def test_orc_tables_read_as_sparks_orc_reader_reads_them(spark, orc_table, tmp_path, counted):
    name, root = orc_table
    spark.read.orc(root).createOrReplaceTempView("orc_spark")
    _view(spark, name, "orc_ours", str(tmp_path / "cache"))
    for sql in QUERIES:
        with counted() as c:
            got = _rows(spark, sql.format(t="orc_ours"))
        expected = _rows(spark, sql.format(t="orc_spark"))
        assert oracle.compare_results(expected, got, ordered=False) is None, sql
        # Spark's ORC reader read every split in the JVM: no Python task, no Python split.
        assert c["reader.spark_splits"] == c["reader.splits_read"] > 0, (sql, dict(c))
        assert c.get("reader.python_tasks", 0) == 0, (sql, dict(c))
    # The block cache sits under Spark's ORC reader as under its Parquet reader.
    with counted() as c:
        assert len(_rows(spark, "SELECT * FROM orc_ours")) == len(KEYS) * ROWS
    assert c["block_cache.hits"] > 0 and c.get("block_cache.misses", 0) == 0, dict(c)


def test_orc_statistics_prune_partitions_only_where_they_are_exact(spark, orc_table, counted):
    name, root = orc_table
    spark.read.orc(root).createOrReplaceTempView("orc_spark_stats")
    _view(spark, name, "orc_stats")
    for sql, pruned in (
        ("SELECT count(*), sum(d15) FROM {t} WHERE id < 2000", 2),  # k=b, k=c by id's bounds
        ("SELECT count(*) FROM {t} WHERE x > 1e9", 0),  # doubles: no bounds (NaN)
        ("SELECT count(*) FROM {t} WHERE s > 'v9'", 0),  # strings: no bounds
    ):
        with counted() as c:
            got = _rows(spark, sql.format(t="orc_stats"))
        assert got == _rows(spark, sql.format(t="orc_spark_stats")), sql
        assert c.get("planner.partitions_pruned_by_stats", 0) == pruned, (sql, dict(c))


def test_a_pushed_aggregation_over_orc_is_computed_in_the_jvm_and_kept_as_fragments(
    spark, orc_table, tmp_path, counted
):
    name, root = orc_table
    spark.read.orc(root).createOrReplaceTempView("orc_spark_agg")
    _view(
        spark,
        name,
        "orc_agg",
        **{
            "fragment-result-cache.enabled": "true",
            "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
        },
    )
    sql = "SELECT count(*), sum(d15), min(d15), max(d15), sum(id) FROM {t} WHERE d15 > 0"
    expected = _rows(spark, sql.format(t="orc_spark_agg"))
    with counted() as first:
        assert _rows(spark, sql.format(t="orc_agg")) == expected
    assert first["aggregation.jvm_splits"] == len(KEYS), dict(first)
    assert first["fragment_cache.jvm_stores"] == len(KEYS), dict(first)
    # The repeat: every split's partial aggregation served from the fragment result cache.
    with counted() as again:
        assert _rows(spark, sql.format(t="orc_agg")) == expected
    assert again["fragment_cache.jvm_hits"] == len(KEYS), dict(again)
    for c in (first, again):
        assert c.get("reader.python_tasks", 0) == 0, dict(c)
    text = spark.sql(sql.format(t="orc_agg"))._jdf.queryExecution().toString()
    assert "Reader: Spark's ORC reader in the JVM" in text


def _write_sorted(path: str, rows: int, first: int = 0) -> None:
    """One ORC file of ``rows`` ids from ``first`` on, in order, in several small stripes:
    a filter on ``id`` rules most stripes out by their statistics."""
    ids = pa.array(range(first, first + rows), pa.int64())
    payload = pa.array([f"row {i:09d} " * 4 for i in range(first, first + rows)])
    orc.write_table(pa.table({"id": ids, "p": payload}), path, stripe_size=64 * 1024)


def test_the_orc_tail_cache_reads_each_tail_once_per_file_version(spark, env, tmp_path, counted):
    """Each file's tail is read from the file once per version and served from the JVM's
    tail cache after, with its stripe statistics (stripes are skipped alike, hit or miss);
    so are the footers and index streams of the stripes read (the stripe metadata cache);
    a file rewritten is another version, read anew; a damaged entry is a counted miss."""
    root = tmp_path / "tails"
    for n, key in enumerate(KEYS):
        (root / f"k={key}").mkdir(parents=True)
        _write_sorted(str(root / f"k={key}" / "000000_0"), 30_000, first=n * 100_000)
    name = f"{env.unique_db('orctail')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, str(root))
    spark.read.orc(str(root)).createOrReplaceTempView("tails_spark")
    on = {
        "hive.orc.file-tail-cache-enabled": "true",
        "hive.orc.stripe-metadata-cache-enabled": "true",
    }
    _view(spark, name, "tails_on", **on)
    _view(spark, name, "tails_off", **{k: "false" for k in on})
    # Each partition holds two of the ids; their stripes' statistics rule the others out.
    wanted = ", ".join(str(n * 100_000 + i) for n in range(len(KEYS)) for i in (1200, 21000))
    sql = f"SELECT k, count(*), max(p) FROM {{t}} WHERE id IN ({wanted}) GROUP BY k"
    expected = _rows(spark, sql.format(t="tails_spark"))
    runs = []
    for view in ("tails_on", "tails_on", "tails_off"):
        with counted() as c:
            got = _rows(spark, sql.format(t=view))
        assert oracle.compare_results(expected, got, ordered=False) is None, view
        runs.append(c)
    first, again, off = runs
    files = len(KEYS)
    assert first["orc_tail_cache.misses"] == first["orc_tail_cache.stores"] == files, dict(first)
    assert again["orc_tail_cache.hits"] == files, dict(again)
    assert again["orc_tail_cache.misses"] == 0, dict(again)
    assert off["orc_tail_cache.hits"] + off["orc_tail_cache.misses"] == 0, dict(off)
    # The stripes read: their footers and index streams (the filter reads row indexes) read
    # from the files once, then served from the stripe cache.
    for kind in ("footer", "stream"):
        read = first[f"orc_stripe_{kind}_cache.misses"]
        assert read > 0 and first[f"orc_stripe_{kind}_cache.stores"] == read, dict(first)
        asked = read + first[f"orc_stripe_{kind}_cache.hits"]  # a stripe's may be asked twice
        assert again[f"orc_stripe_{kind}_cache.hits"] == asked, dict(again)
        assert again[f"orc_stripe_{kind}_cache.misses"] == 0, dict(again)
        assert off[f"orc_stripe_{kind}_cache.hits"] + off[f"orc_stripe_{kind}_cache.misses"] == 0
    # The cached tail carries the stripe statistics: the same stripes are read.
    assert first["reader.rows_read"] == again["reader.rows_read"] == off["reader.rows_read"]
    assert again["reader.rows_read"] < files * 30_000, dict(again)
    # A file rewritten is another version: its tail is read anew, the others hit.
    _write_sorted(str(root / "k=b" / "000000_0"), 20_000, first=100_000)
    spark.read.orc(str(root)).createOrReplaceTempView("tails_spark")
    _view(spark, name, "tails_on", **on)
    with counted() as c:
        got = _rows(spark, sql.format(t="tails_on"))
    fresh = _rows(spark, sql.format(t="tails_spark"))
    assert oracle.compare_results(fresh, got, ordered=False) is None
    assert c["orc_tail_cache.misses"] == 1 and c["orc_tail_cache.hits"] == files - 1, dict(c)
    # Kept tails, footers and index streams damaged in memory: each a counted miss, read
    # again, the same rows.
    jvm = spark._jvm.raptorx.cache
    assert jvm.OrcTailCache.current().damageAll() >= files
    assert jvm.OrcStripeCache.current().damageAll() > 0
    with counted() as c:
        got = _rows(spark, sql.format(t="tails_on"))
    assert oracle.compare_results(fresh, got, ordered=False) is None
    assert c["orc_tail_cache.errors"] == c["orc_tail_cache.misses"] == files, dict(c)
    assert c["orc_tail_cache.hits"] == 0 and c["orc_tail_cache.stores"] == files, dict(c)
    for kind in ("footer", "stream"):  # each damaged entry found once, then kept again
        assert c[f"orc_stripe_{kind}_cache.errors"] == c[f"orc_stripe_{kind}_cache.misses"] > 0


def test_orc_files_written_by_spark_read_the_same(spark, env, tmp_path):
    root = str(tmp_path / "spark_orc")
    rng = random.Random(3)
    df = spark.createDataFrame(_arrow_table(0, rng).to_pandas()).withColumnRenamed("id", "i")
    df.write.partitionBy("b").orc(root)
    name = f"{env.unique_db('orcspark')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    spark.read.orc(root).createOrReplaceTempView("sorc_spark")
    _view(spark, name, "sorc_ours")
    for sql in ("SELECT * FROM {t}", "SELECT b, count(*), sum(d15) FROM {t} GROUP BY b"):
        got = _rows(spark, sql.format(t="sorc_ours"))
        expected = _rows(spark, sql.format(t="sorc_spark"))
        assert oracle.compare_results(expected, got, ordered=False) is None, sql


def test_every_compression_of_sparks_orc_writer_reads(spark, env, tmp_path):
    root = tmp_path / "codecs"
    for codec in ("none", "snappy", "zlib", "lz4", "zstd"):
        spark.sql(TYPED_ROWS).repartition(1).write.option("compression", codec).orc(
            str(root / f"codec={codec}")
        )
    name = f"{env.unique_db('orccodec')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, str(root))
    spark.read.orc(str(root)).createOrReplaceTempView("codec_spark")
    _view(spark, name, "codec_ours")
    sql = "SELECT codec, count(*), sum(d18), max(s), min(day) FROM {t} GROUP BY codec"
    got = _rows(spark, sql.format(t="codec_ours"))
    assert len(got) == 5
    expected = _rows(spark, sql.format(t="codec_spark"))
    assert oracle.compare_results(expected, got, ordered=False) is None


def test_a_read_that_needs_the_python_reader_fails_naming_why(spark, orc_table):
    name, _ = orc_table
    df = spark.read.format("tiered_hive").option("hive.parquet.reader", "PYTHON").load(name)
    with pytest.raises(Exception) as e:
        df.collect()
    message = str(e.value)
    assert "UnsupportedFormatError" in message and f"{name} is stored as ORC" in message
    assert "hive.parquet.reader=PYTHON" in message


def test_a_corrupt_orc_file_fails_naming_it(spark, env, tmp_path):
    root = tmp_path / "corrupt"
    name, _ = _registered(env, root, "orcbad")
    victim = root / "k=b" / "000000_0"
    data = victim.read_bytes()
    victim.write_bytes(data[:3] + bytes(len(data) - 3))  # same size, ORC's magic, no ORC
    df = spark.read.format("tiered_hive").load(name)
    with pytest.raises(Exception) as e:
        df.collect()
    assert f"Corrupt or truncated ORC file file://{victim}" in str(e.value)


def test_an_orc_file_of_other_types_than_its_tables_fails_naming_it(spark, env, tmp_path):
    """A file replaced by one whose column has another type: the error says so, not that
    the file is corrupt."""
    root = tmp_path / "retyped"
    name, _ = _registered(env, root, "orctype")
    victim = root / "k=b" / "000000_0"
    orc.write_table(pa.table({"day": pa.array([True, False])}), str(victim))
    df = spark.read.format("tiered_hive").load(name).select("day")
    with pytest.raises(Exception) as e:
        df.collect()
    assert f"ORC file holding other types than its table's file://{victim}" in str(e.value)


def test_a_partition_mixing_orc_and_parquet_is_refused(env, tmp_path):
    root = tmp_path / "mixed"
    _write_pyarrow(str(root))
    pq.write_table(_arrow_table(9, random.Random(1)), str(root / "k=a" / "x.parquet"))
    with env.metastore() as ms, pytest.raises(LayoutError, match="a partition's files have one"):
        register_external_table(ms, env.settings(), f"{env.unique_db('mixed')}.t", str(root))


def test_a_table_whose_partitions_mix_orc_and_parquet_reads_each_with_its_reader(
    spark, env, tmp_path, counted
):
    """Partition k=b in Parquet, k=a and k=c in ORC: registered with k=b's own format (Hive
    keeps one per partition), every query equals Spark's own readers of each partition, in
    Spark's Parquet and ORC readers in the JVM (no Python task), filters, pushed
    aggregations and the caches included."""
    root = tmp_path / "mixedparts"
    rng = random.Random(5)
    for n, key in enumerate(KEYS):
        (root / f"k={key}").mkdir(parents=True)
        rows = _arrow_table(n, rng).drop_columns(["ts"])  # one timestamp type in both
        if key == "b":
            pq.write_table(rows, str(root / f"k={key}" / "part-0.parquet"), row_group_size=700)
        else:
            orc.write_table(rows, str(root / f"k={key}" / "000000_0"), stripe_size=64 * 1024)
    name = f"{env.unique_db('mixedparts')}.t"
    with env.metastore() as ms:
        table = register_external_table(ms, env.settings(), name, str(root))
        own = {
            p.values: p.storage_format for p in ms.list_partitions(ms.get_table(*name.split(".")))
        }
    assert table.storage_format == "ORC" and own == {("a",): None, ("b",): "PARQUET", ("c",): None}
    base = spark.read.option("basePath", str(root))
    base.orc([str(root / "k=a"), str(root / "k=c")]).unionByName(
        base.parquet(str(root / "k=b"))
    ).createOrReplaceTempView("mixed_spark")
    tiers = {
        "hive.orc.file-tail-cache-enabled": "true",
        "hive.orc.stripe-metadata-cache-enabled": "true",
        "hive.file-handle-cache-enabled": "true",
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
    }
    _view(spark, name, "mixed_ours", str(tmp_path / "cache"), **tiers)
    # All rows, a filter, an aggregation of the Parquet partition alone, one of all three.
    grouped = "SELECT k, count(*), sum(d15), max(s) FROM {t} GROUP BY k"
    for sql in (QUERIES[0], QUERIES[1], QUERIES[3], grouped):
        with counted() as c:
            got = _rows(spark, sql.format(t="mixed_ours"))
        expected = _rows(spark, sql.format(t="mixed_spark"))
        assert oracle.compare_results(expected, got, ordered=False) is None, sql
        assert c.get("reader.python_tasks", 0) == 0, (sql, dict(c))


#: Spark's types as Spark's ORC writer stores them, with values at their edges (nested types
#: are refused at registration, for ORC as for Parquet).
TYPED_ROWS = """
SELECT * FROM VALUES
  (1, CAST(-128 AS TINYINT), CAST(-32768 AS SMALLINT), 2147483647, 9223372036854775807,
   CAST(1.5 AS FLOAT), CAST('NaN' AS DOUBLE), CAST(-999.99 AS DECIMAL(5,2)),
   CAST(99999999999999.9999 AS DECIMAL(18,4)), CAST('1234567890123456789012345678.9012345678'
   AS DECIMAL(38,10)), 'héllo', X'00FF', true, DATE '1500-03-01',
   TIMESTAMP '1900-01-01 00:00:00', TIMESTAMP_NTZ '2024-03-10 02:30:00'),
  (2, NULL, NULL, NULL, NULL, NULL, CAST('-Infinity' AS DOUBLE), NULL, NULL, NULL, NULL, NULL,
   NULL, DATE '2024-02-29', TIMESTAMP '2024-11-03 01:30:00', NULL),
  (3, CAST(127 AS TINYINT), CAST(0 AS SMALLINT), -2147483648, -9223372036854775808,
   CAST(-0.0 AS FLOAT), 0.1D, CAST(0.01 AS DECIMAL(5,2)), CAST(-0.0001 AS DECIMAL(18,4)),
   CAST(-0.0000000001 AS DECIMAL(38,10)), '', X'', false, DATE '0001-01-01',
   TIMESTAMP '1582-10-04 23:59:59.999999', TIMESTAMP_NTZ '1000-01-01 00:00:00')
AS t(id, i8, i16, i32, i64, f, d, d5, d18, d38, s, bin, b, day, ts, ntz)
"""


#: Every type ORC's C++ writer (pyorc) writes that Spark's ORC reader reads, by partition:
#: ``k=old`` holds the dates before the Gregorian switch (no bounds: Spark's calendar may
#: count them otherwise), ``k=new`` later ones (bounds kept, so statistics may prune).
PYORC_SCHEMA = (
    "struct<id:int,i8:tinyint,i16:smallint,i64:bigint,f:float,d:double,s:string,c:char(5),"
    "v:varchar(4),bin:binary,b:boolean,day:date,ts:timestamp,"
    "tl:timestamp with local time zone,d10:decimal(10,3),d38:decimal(38,6)>"
)


def _pyorc_rows(old: bool) -> list[tuple]:
    """Four rows in ``PYORC_SCHEMA``'s order: edges, nulls, a short and a full char."""
    utc = dt.UTC
    base = 10 if old else 20
    if old:
        days = [dt.date(1, 1, 1), dt.date(1500, 3, 1), dt.date(1582, 10, 4), None]
        times = [dt.datetime(1, 1, 1), dt.datetime(1500, 3, 1, 12), None, None]
    else:
        days = [dt.date(1582, 10, 15), dt.date(2024, 2, 29), dt.date(9999, 12, 31), None]
        times = [dt.datetime(1900, 1, 1), dt.datetime(2024, 3, 10, 2, 30), None, None]
    times = [t and t.replace(tzinfo=utc) for t in times]  # pyorc takes instants
    columns = {
        "id": [base, base + 1, base + 2, base + 3],
        "i8": [-128, 127, None, 0],
        "i16": [-32768, 32767, None, 0],
        "i64": [-(2**63), 2**63 - 1, None, 0],
        "f": [1.5, -0.0, None, float("inf")],
        "d": [float("nan"), float("-inf"), None, 0.1],
        "s": ["héllo", "", None, "x"],
        "c": ["ab", "abcde", "", None],
        "v": ["abc", "abcd", None, "ab  "],
        "bin": [b"\x00\xff", b"", None, b"z"],
        "b": [True, False, None, True],
        "day": days,
        "ts": times,
        "tl": times,
        "d10": [Decimal("9999999.999"), Decimal("-0.001"), None, Decimal(0)],
        "d38": [Decimal("9" * 32 + ".999999"), Decimal("-0.000001"), None, Decimal(0)],
    }
    return list(zip(*columns.values(), strict=True))


def _write_pyorc(root) -> None:
    import pyorc

    for key in ("old", "new"):
        (root / f"k={key}").mkdir(parents=True)
        with open(root / f"k={key}" / "000000_0", "wb") as f:
            with pyorc.Writer(f, PYORC_SCHEMA, struct_repr=pyorc.StructRepr.TUPLE) as w:
                w.writerows(_pyorc_rows(key == "old"))


def _compare(spark, sqls, ours: str, theirs: str, why="") -> None:
    for sql in sqls:
        got = _rows(spark, sql.format(t=ours))
        expected = _rows(spark, sql.format(t=theirs))
        assert oracle.compare_results(expected, got, ordered=False) is None, (why, sql)


def test_an_orc_file_of_old_hive_is_read_by_column_position(spark, env, tmp_path):
    """Old Hive wrote ORC columns as ``_col0``, ``_col1``...: Spark's ORC reader reads them by
    position in the table's data columns, so any subset of them, in any order, reads as
    ``spark.read.orc`` reads it (given the pruned columns alone, it refused)."""
    import pyorc

    root = tmp_path / "oldhive"
    root.mkdir()
    with (
        open(root / "000000_0", "wb") as f,
        pyorc.Writer(f, "struct<_col0:bigint,_col1:string,_col2:double>") as w,
    ):
        for i in range(50):
            w.write((i, f"v{i}", i / 4))
    name = f"{env.unique_db('oldhive')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, str(root))
    spark.read.orc(str(root)).createOrReplaceTempView("oldhive_spark")
    _view(spark, name, "oldhive_ours")
    for sql in (
        "SELECT _col2 FROM {t}",
        "SELECT _col1, _col0 FROM {t} WHERE _col0 > 40",
        "SELECT count(*), sum(_col2) FROM {t}",
    ):
        got = _rows(spark, sql.format(t="oldhive_ours"))
        expected = _rows(spark, sql.format(t="oldhive_spark"))
        assert oracle.compare_results(expected, got, ordered=False) is None, sql


def test_every_type_reads_as_sparks_orc_reader_reads_it_in_any_time_zone(
    spark, env, tmp_path, counted
):
    """Spark's ORC writer's files, and ORC's C++ writer's (pyorc: char and varchar, a
    timestamp with local time zone, dates before 1582), read as ``spark.read.orc`` reads
    them in three session time zones; char values padded as Spark pads them, in filters
    and pushed aggregations too, with the fragment result cache cold and warm."""
    root = str(tmp_path / "typed")
    spark.sql(TYPED_ROWS).repartition(1).write.orc(root)
    cpp = tmp_path / "pyorc"
    _write_pyorc(cpp)
    name, cpp_name = f"{env.unique_db('orctypes')}.t", f"{env.unique_db('orccpp')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
        cpp_table = register_external_table(ms, env.settings(), cpp_name, str(cpp))
    assert {c.name: c.type for c in cpp_table.columns}.items() >= {
        ("c", "char(5)"),
        ("v", "varchar(4)"),
        ("tl", "timestamp"),
    }
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        for tz in ("UTC", "America/New_York", "Asia/Kolkata"):
            spark.conf.set("spark.sql.session.timeZone", tz)
            spark.read.orc(root).createOrReplaceTempView("typed_spark")
            _view(spark, name, "typed_ours")
            typed = (
                "SELECT *, CAST(ts AS STRING), CAST(ntz AS STRING) FROM {t}",
                "SELECT id FROM {t} WHERE d18 > 0 OR i32 < 0 OR day < DATE '1582-10-15'",
            )
            _compare(spark, typed, "typed_ours", "typed_spark", tz)
            spark.read.orc(str(cpp)).createOrReplaceTempView("cpp_spark")
            _view(spark, cpp_name, "cpp_ours")
            cpp_sqls = ["SELECT *, CAST(ts AS STRING), CAST(tl AS STRING) FROM {t}"]
            if tz == "UTC":  # old dates: statistics prune k=new only, by its bounds
                cpp_sqls.append("SELECT id, day FROM {t} WHERE day < DATE '1582-10-15' OR d38 < 0")
            _compare(spark, cpp_sqls, "cpp_ours", "cpp_spark", tz)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    # char(5) as Spark reads it: padded above the scan (spark.sql.readSideCharPadding), and
    # compared padded; pushed filters and aggregations see the values as stored, in both.
    shown, matched, grouped = (
        "SELECT id, c, length(c), c = 'ab', c > 'ab', v FROM {t} WHERE c = 'ab   ' OR c = ''",
        "SELECT id, c FROM {t} WHERE v = 'abc' AND c = 'ab'",
        "SELECT c, count(*), max(v) FROM {t} GROUP BY c",
    )
    fragments = {
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
    }
    runs, expected = [], {}
    # Padding off, Spark groups by c as stored: the aggregation is pushed; then warm.
    for padding, sqls in (
        ("true", (shown, matched, grouped)),
        ("false", (shown, grouped)),
        ("false", (grouped,)),
    ):
        spark.conf.set("spark.sql.readSideCharPadding", padding)
        try:  # a view keeps the plan analyzed when it is made: made anew
            spark.read.orc(str(cpp)).createOrReplaceTempView("cpp_spark")
            _view(spark, cpp_name, "cpp_ours", **fragments)
            with counted() as c:
                for sql in sqls:
                    got = _rows(spark, sql.format(t="cpp_ours"))
                    if (padding, sql) not in expected:
                        expected[padding, sql] = _rows(spark, sql.format(t="cpp_spark"))
                    diff = oracle.compare_results(expected[padding, sql], got, ordered=False)
                    assert diff is None, (padding, sql)
            runs.append(c)
        finally:
            spark.conf.unset("spark.sql.readSideCharPadding")
    _, cold, warm = runs
    assert cold["aggregation.jvm_splits"] > 0 and cold["fragment_cache.jvm_stores"] > 0, dict(cold)
    assert warm["fragment_cache.jvm_hits"] == cold["fragment_cache.jvm_stores"], dict(warm)
    assert all(c.get("reader.python_tasks", 0) == 0 for c in runs), runs


@pytest.mark.s3
def test_an_orc_table_on_s3_is_served_by_the_block_cache_when_warm(
    spark, env, s3_endpoint, s3_bucket, tmp_path, counted
):
    props = {**s3_endpoint.s3_properties(), "hive.file-status-cache-tables": "*"}
    settings = env.settings(**props)
    fs, _ = filesystem_for(f"s3://{s3_bucket}", settings)
    local = tmp_path / "local"
    _write_pyarrow(str(local))
    for f in sorted(local.rglob("000000_0")):
        fs.put_file(str(f), f"{s3_bucket}/orc/{f.relative_to(local)}")
    name = f"{env.unique_db('orcs3')}.t"
    with env.metastore(**props) as ms:
        register_external_table(ms, settings, name, f"s3://{s3_bucket}/orc", sealed=True)
    spark.read.orc(str(local)).createOrReplaceTempView("orcs3_spark")
    tiers = {
        "hive.orc.file-tail-cache-enabled": "true",
        "hive.orc.stripe-metadata-cache-enabled": "true",
        "hive.file-handle-cache-enabled": "true",
    }
    _view(spark, name, "orcs3_ours", str(tmp_path / "cache"), **props, **tiers)
    sql = "SELECT k, count(*), sum(d15), max(s) FROM {t} WHERE day > date '2024-03-01' GROUP BY k"
    expected = _rows(spark, sql.format(t="orcs3_spark"))
    cold = _rows(spark, sql.format(t="orcs3_ours"))
    assert oracle.compare_results(expected, cold, ordered=False) is None
    s3_endpoint.reset_stats()
    with counted() as c:
        got = _rows(spark, sql.format(t="orcs3_ours"))
    assert oracle.compare_results(expected, got, ordered=False) is None
    requests = s3_endpoint.stats()["requests"]
    # Warm: the listing, the blocks and the tails all served from the caches.
    assert sum(requests.values()) == 0, requests
    assert c["block_cache.hits"] > 0 and c.get("reader.python_tasks", 0) == 0, dict(c)
    assert c["orc_tail_cache.hits"] == len(KEYS) and c["storage.file_opens"] == 0, dict(c)
    # k=b overwritten on S3 (a new ETag), read by a scan that lists it again: every tier and
    # handle reads the new version; the old version's kept handles are closed.
    victim = local / "k=b" / "000000_0"
    orc.write_table(_arrow_table(1, random.Random(12)), str(victim), stripe_size=64 * 1024)
    fs.put_file(str(victim), f"{s3_bucket}/orc/k=b/000000_0")
    spark.read.orc(str(local)).createOrReplaceTempView("orcs3_spark")
    _view(
        spark,
        name,
        "orcs3_listed",
        str(tmp_path / "cache"),
        **{**props, "hive.file-status-cache-tables": ""},
        **tiers,
    )
    with counted() as c:
        got = _rows(spark, sql.format(t="orcs3_listed"))
    fresh = _rows(spark, sql.format(t="orcs3_spark"))
    assert oracle.compare_results(fresh, got, ordered=False) is None
    assert got != expected  # other values
    assert c["orc_tail_cache.misses"] == 1 and c["orc_tail_cache.hits"] == len(KEYS) - 1
    assert c["orc_stripe_footer_cache.misses"] > 0 and c["block_cache.misses"] > 0, dict(c)
    assert c["file_handles.invalidated"] > 0 and c["storage.file_opens"] > 0, dict(c)
