"""Splits read by Spark's own Parquet reader in the JVM, through the node's block cache
(``hive.parquet.reader``): every reader gives the rows Spark's ``spark.read.parquet`` gives,
with the scan's filters applied; a task the JVM reads whole starts no Python worker; one
task can mix readers; the JVM and the Python reader share one block cache, each reading the
blocks the other stored; a corrupt block is a counted miss with the right rows; a rewritten
file is read anew; repeats still end as fragment hits. Counts, not timings."""

from __future__ import annotations

import datetime as dt
import os
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cache.fragment_cache import FragmentCache
from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch import oracle
from tests.integration.test_fragment_hits_jvm import _flip

pytestmark = pytest.mark.spark

ROWS = 3000
KEYS = ("a", "b", "c")

QUERIES = (
    "SELECT * FROM {t}",
    "SELECT id, s FROM {t} WHERE d15 > 10.5 AND day < date '2024-06-01'",
    "SELECT id, k FROM {t} WHERE s LIKE 'v1%' OR s IS NULL",
    "SELECT count(*), sum(x) FROM {t} WHERE k = 'b' AND b",
    "SELECT id FROM {t} WHERE id IN (1, 17, 2500, 5999, 8000) AND k <> 'c'",
    "SELECT d38, day FROM {t} WHERE d38 IS NOT NULL AND x >= 100.25 AND n = 2",
    "SELECT s, count(*) FROM {t} WHERE s NOT LIKE '%5' GROUP BY s ORDER BY s LIMIT 20",
)


def _write(root: str, seed: int = 7) -> None:
    rng = random.Random(seed)
    for n, key in enumerate(KEYS):
        d = os.path.join(root, f"k={key}", f"n={n + 1}")
        os.makedirs(d, exist_ok=True)
        ids = list(range(n * ROWS, (n + 1) * ROWS))
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "d15": pa.array(
                    [
                        None if i % 17 == 0 else Decimal(rng.randint(-99999, 99999)) / 100
                        for i in ids
                    ],
                    pa.decimal128(15, 2),
                ),
                "d38": pa.array(
                    [None if i % 5 == 0 else Decimal(f"{rng.randint(0, 10**20)}E-10") for i in ids],
                    pa.decimal128(38, 10),
                ),
                "s": pa.array([None if i % 11 == 0 else f"v{i}" for i in ids], pa.string()),
                "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in ids]),
                "x": pa.array([None if i % 13 == 0 else i / 4 for i in ids], pa.float64()),
                "b": pa.array([i % 3 == 0 for i in ids], pa.bool_()),
            }
        )
        pq.write_table(table, os.path.join(d, "part-0.parquet"), row_group_size=700)


@pytest.fixture(scope="module")
def table(env, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("sparkreader") / "t")
    _write(root)
    name = f"{env.unique_db('sparkreader')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    return name, root


def _view(spark, name, view, reader, cache_dir=None, **options):
    r = spark.read.format("tiered_hive").option("hive.parquet.reader", reader)
    r = r.option("cache.enabled", str(cache_dir is not None).lower())
    if cache_dir is not None:
        r = r.option("cache.base-directory", cache_dir)
    for k, v in options.items():
        r = r.option(k, v)
    r.load(name).createOrReplaceTempView(view)


def _rows(spark, sql):
    return oracle.spark_rows(spark.sql(sql))


@pytest.mark.parametrize("reader", ["SPARK", "PYTHON", "AUTO"])
def test_every_reader_gives_the_rows_of_sparks_parquet_reader(
    spark, table, tmp_path, counted, reader
):
    name, root = table
    spark.read.parquet(root).createOrReplaceTempView("sr_parquet")
    _view(spark, name, "sr_ours", reader, str(tmp_path / "cache"))
    for sql in QUERIES:
        with counted() as c:
            got = _rows(spark, sql.format(t="sr_ours"))
        expected = _rows(spark, sql.format(t="sr_parquet"))
        assert oracle.compare_results(expected, got, ordered=False) is None, sql
        if reader == "PYTHON":
            assert c["reader.spark_splits"] == 0, sql
        else:  # a pushed aggregation too: computed in the JVM
            assert c["reader.spark_splits"] == c["reader.splits_read"] > 0, sql
            assert c["reader.python_tasks"] == 0, sql  # no Python worker started


#: Conjuncts the JVM keeps a column at a time (``VectorizedFilter``), and some it leaves to
#: Spark's row predicate (a double, a boolean, OR, LIKE): edges of each type's range, nulls,
#: decimal literals of other scales, partition columns.
CONJUNCTS = (
    "d15 > 10.5",
    "d15 >= -0.01",
    "d15 < 999.99",
    "d15 <= 5",
    "d15 = 1.50",
    "d15 > 10.505",
    "d15 IN (1.5, 2.25, -3.33, 0)",
    "d15 < 0",
    "id > 5999",
    "id <= 0",
    "id = 17",
    "id IN (1, 17, 2500, 8999)",
    "id < 9223372036854775807",
    "id >= -9223372036854775808",
    "day >= date '2024-06-01'",
    "day < date '2024-01-02'",
    "day = date '2024-03-01'",
    "s > 'v5'",
    "s = 'v17'",
    "s IN ('v1', 'v2', 'v300', 'w')",
    "s <= 'v2'",
    "s IS NULL",
    "s IS NOT NULL",
    "d15 IS NULL",
    "n = 2",
    "n > 1",
    "k > 'a'",
    "k IN ('a', 'c')",
    "x > 100.25",
    "b",
    "(id < 10 OR s = 'v20')",
    "s LIKE 'v1%'",
)


def test_vectorized_filters_keep_the_rows_sparks_reader_keeps(spark, table, tmp_path, counted):
    name, root = table
    spark.read.parquet(root).createOrReplaceTempView("vf_parquet")
    _view(spark, name, "vf_ours", "SPARK")
    filters = spark._jvm.org.apache.spark.sql.execution.python.raptorx.VectorizedFilter
    dictionary_batches = filters.dictionaryBatches()
    rng = random.Random(11)
    wheres = list(CONJUNCTS) + [
        " AND ".join(rng.sample(CONJUNCTS, rng.randint(2, 4))) for _ in range(25)
    ]
    # Spark's answer to every WHERE from one query: each row with each predicate's value (a
    # row is kept where it is true), rather than a query per predicate.
    marks = ", ".join(f"({w}) AS w{i}" for i, w in enumerate(wheres))
    marked = spark.sql(f"SELECT id, d15, s, {marks} FROM vf_parquet").collect()
    read = 0
    for i, where in enumerate(wheres):
        sql = f"SELECT id, d15, s FROM {{t}} WHERE {where}"
        with counted() as c:
            got = _rows(spark, sql.format(t="vf_ours"))
        expected = [(r["id"], r["d15"], r["s"]) for r in marked if r[f"w{i}"] is True]
        assert oracle.compare_results(expected, got, ordered=False) is None, where
        assert c["reader.spark_splits"] == c["reader.splits_read"], where
        read += c["reader.spark_splits"]
    assert read > len(wheres)  # most read splits (some are pruned whole)
    # pyarrow wrote the columns dictionary-encoded: entries were tested, not every row
    assert filters.dictionaryBatches() > dictionary_batches


def test_the_filters_run_a_column_at_a_time_where_they_can(spark):
    jvm = spark._jvm
    sources = jvm.org.apache.spark.sql.sources
    schema = jvm.org.apache.spark.sql.types.StructType.fromDDL(
        "id bigint, d15 decimal(15,2), d38 decimal(38,10), s string, day date, x double"
    )
    read = jvm.org.apache.spark.sql.execution.python.raptorx.JvmFileRead
    vectorized = jvm.org.apache.spark.sql.execution.python.raptorx.VectorizedFilter

    def count(*filters) -> int:
        both = filters[0]
        for f in filters[1:]:
            both = sources.And(both, f)
        return vectorized.vectorized(read.toExpression(both, schema).get())

    decimal = jvm.java.math.BigDecimal
    assert (
        count(
            sources.GreaterThan("d15", decimal("10.505")),
            sources.LessThanOrEqual("id", jvm.java.lang.Long(5)),
            sources.EqualTo("s", "v1"),
            sources.IsNotNull("d38"),
        )
        == 4
    )
    # A double, a decimal of more than 18 digits, a disjunction: Spark's row predicate.
    assert (
        count(
            sources.GreaterThan("x", jvm.java.lang.Double(1.5)),
            sources.GreaterThan("d38", decimal("1")),
            sources.Or(sources.EqualTo("s", "a"), sources.IsNull("s")),
            sources.EqualTo("id", jvm.java.lang.Long(3)),
        )
        == 1
    )


def test_explain_names_the_reader(spark, table, tmp_path):
    name, _ = table
    _view(spark, name, "sr_explain", "SPARK", str(tmp_path / "cache"))
    text = spark.sql("SELECT id FROM sr_explain WHERE id > 5")._jdf.queryExecution().toString()
    assert "Reader: Spark's Parquet reader in the JVM" in text
    _view(spark, name, "sr_explain_py", "PYTHON", str(tmp_path / "cache"))
    text = spark.sql("SELECT id FROM sr_explain_py WHERE id > 5")._jdf.queryExecution().toString()
    assert "Reader: Python (the planner chose the Python reader" in text


def test_one_task_mixes_fragment_hits_and_sparks_reader_and_repeats_end_as_hits(
    spark, env, tmp_path, counted
):
    """AUTO with the fragment cache: a split planned before is read by Spark's reader, which
    stores its fragment (no Python worker); a new one is read without storing. One task (one
    wave of one) holds all three. The partitions are sealed (trusted statistics): ``id <
    3000`` holds for every row of k=a and none of the others, so its split evaluates ``b``
    only and shares its fragment key with the second query's. ``b`` keeps a third of each
    split's rows: selective enough to be stored."""
    root = str(tmp_path / "t")
    _write(root)
    name = f"{env.unique_db('sparkreader')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root, sealed=True)
    fragments = str(tmp_path / "fragments")
    options = {
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": fragments,
        "hive.min-split-count": "1",
        "hive.max-split-size": "1GB",
    }
    _view(spark, name, "sr_auto", "AUTO", str(tmp_path / "cache"), **options)
    spark.read.parquet(root).createOrReplaceTempView("sr_parquet")
    one = "SELECT id, s FROM {t} WHERE id < 3000 AND b"
    every = "SELECT id, s FROM {t} WHERE b"
    with counted() as first:
        assert _rows(spark, one.format(t="sr_auto")) == _rows(spark, one.format(t="sr_parquet"))
    assert first["reader.spark_splits"] == 1 and first["reader.python_tasks"] == 0
    assert first["fragment_cache.stores"] == 0  # planned once: nothing stored
    expected = _rows(spark, every.format(t="sr_parquet"))
    with counted() as mixed:
        got = _rows(spark, every.format(t="sr_auto"))
    assert oracle.compare_results(expected, got, ordered=False) is None
    # k=a was planned before: Spark's reader reads it and the JVM stores its fragment
    assert mixed["reader.spark_splits"] == 3 and mixed["reader.python_tasks"] == 0
    assert mixed["fragment_cache.stores"] == mixed["fragment_cache.jvm_stores"] == 1
    with counted() as second:
        assert sorted(_rows(spark, every.format(t="sr_auto"))) == sorted(got)
    # one task: k=a a fragment hit, b and c Spark's reader (planned before: now stored)
    assert second["fragment_cache.jvm_hits"] == 1 and second["reader.spark_splits"] == 2
    assert second["fragment_cache.jvm_stores"] == 2 and second["reader.python_tasks"] == 0
    with counted() as third:
        assert sorted(_rows(spark, every.format(t="sr_auto"))) == sorted(got)
    assert third["fragment_cache.jvm_hits"] == 3 and third["reader.python_tasks"] == 0
    assert third["reader.spark_splits"] == 0
    # The planner folded the JVM's entries into the Python index: they count to its bounds.
    assert third["fragment_cache.adopted"] >= 1
    cache = FragmentCache(
        fragments, max_bytes=1 << 30, max_entries=100, max_entry_bytes=1 << 26, ttl=None
    )
    try:
        assert len(cache) == 3 and cache.volume() > 0
    finally:
        cache.close()


def test_entries_the_jvm_stores_are_the_python_readers(spark, table, tmp_path):
    """Every query run twice through Spark's reader (the second stores) and twice through the
    Python reader, each with its own fragment cache: the same keys, and under each key the
    same Arrow schema (the one pyspark checks a Python reader's batches against) and rows.
    Each query has a row filter: a split without one keeps no fragment in the JVM."""
    name, _ = table
    by_reader = {}
    for reader in ("SPARK", "PYTHON"):
        fragments = str(tmp_path / f"fragments-{reader}")
        _view(
            spark,
            name,
            f"sr_store_{reader}",
            reader,
            str(tmp_path / f"cache-{reader}"),
            **{
                "fragment-result-cache.enabled": "true",
                "fragment-result-cache.base-directory": fragments,
            },
        )
        every_type = "SELECT * FROM {t} WHERE b"
        for sql in (every_type, QUERIES[1], QUERIES[5]):  # filters on each kind
            for _ in range(2):
                _rows(spark, sql.format(t=f"sr_store_{reader}"))
        by_reader[reader] = _entries(fragments)
    jvm, python = by_reader["SPARK"], by_reader["PYTHON"]
    assert jvm and set(jvm) == set(python), (sorted(jvm), sorted(python))
    for key, (schema, rows) in jvm.items():
        assert schema.equals(python[key][0]), (schema, python[key][0])
        assert sorted(rows, key=repr) == sorted(python[key][1], key=repr)


def test_a_split_with_no_row_filter_left_keeps_no_fragment(spark, table, tmp_path, counted):
    """Spark's reader reading a split with no row filter left (no predicate, or one its
    sealed partition's statistics make true) neither looks up nor stores its fragment: the
    block cache serves it. A filtered query on the same table still stores on its second
    run. Every run gives the rows of Spark's own reader."""
    name, root = table
    _view(
        spark,
        name,
        "sr_unfiltered",
        "SPARK",
        str(tmp_path / "cache"),
        **{
            "fragment-result-cache.enabled": "true",
            "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
        },
    )
    spark.read.parquet(root).createOrReplaceTempView("sr_parquet")
    for sql, stored in (("SELECT id, s FROM {t}", 0), ("SELECT id, s FROM {t} WHERE b", 3)):
        expected = _rows(spark, sql.format(t="sr_parquet"))
        runs = []
        for _ in range(3):
            with counted() as c:
                got = _rows(spark, sql.format(t="sr_unfiltered"))
            assert oracle.compare_results(expected, got, ordered=False) is None, sql
            runs.append(c)
        second, third = runs[1], runs[2]
        assert second["planning.unfiltered_splits"] == 3 - stored, (sql, second.delta)
        assert second["fragment_cache.jvm_stores"] == stored, (sql, second.delta)
        assert third["fragment_cache.jvm_hits"] == stored, (sql, third.delta)
        assert third["reader.spark_splits"] == 3 - stored, (sql, third.delta)
        assert third["fragment_cache.misses"] == 0, (sql, third.delta)
        assert third["block_cache.hits"] > 0 or stored, (sql, third.delta)


def test_a_store_the_jvm_cannot_make_loses_nothing(spark, table, tmp_path, counted):
    """An unwritable fragment directory (its ``tmp`` a file, so no entry can be written) and
    a result past the largest entry: the second run, which would store, stores nothing,
    counts why, and gives the rows of Spark's own reader."""
    name, root = table
    spark.read.parquet(root).createOrReplaceTempView("sr_parquet")
    sql = QUERIES[1]
    expected = _rows(spark, sql.format(t="sr_parquet"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tmp").write_text("not a directory")
    cases = {
        "sr_store_broken": ({"fragment-result-cache.base-directory": str(broken)}, "errors"),
        "sr_store_small": (
            {
                "fragment-result-cache.base-directory": str(tmp_path / "small"),
                "fragment-result-cache.max-single-cached-entry-size": "1kB",
            },
            "too_large",
        ),
    }
    for view, (options, why) in cases.items():
        _view(
            spark,
            name,
            view,
            "SPARK",
            str(tmp_path / f"cache-{view}"),
            **{"fragment-result-cache.enabled": "true", **options},
        )
        for run in range(2):
            with counted() as c:
                got = _rows(spark, sql.format(t=view))
            assert oracle.compare_results(expected, got, ordered=False) is None, (view, run)
        assert c["reader.spark_splits"] > 0 and c[f"fragment_cache.{why}"] > 0, (view, c.delta)
        assert c["fragment_cache.stores"] == 0 and c["fragment_cache.jvm_hits"] == 0, view


def _entries(directory: str) -> dict:
    """Each entry's key (hex): its Arrow schema and rows, read by the Python cache."""
    cache = FragmentCache(
        directory, max_bytes=1 << 30, max_entries=1000, max_entry_bytes=1 << 26, ttl=None
    )
    try:
        out = {}
        for name in cache._entry_names(""):
            batches = cache.get(bytes.fromhex(name))
            assert batches is not None, name
            schema = batches[0].schema if batches else None
            rows = [r for b in batches for r in b.to_pylist()]
            out[name] = (schema, rows)
        return out
    finally:
        cache.close()


def _blocks(cache_dir: str) -> list[str]:
    data = os.path.join(cache_dir, "blocks", "data")
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs)


def test_the_readers_share_one_block_cache(spark, table, tmp_path, counted):
    name, _ = table
    sql = "SELECT id, d15, s FROM {t} WHERE id % 2 = 0"
    no_footers = {"hive.parquet.metadata-cache-enabled": "false"}
    # Spark's reader fills the cache; the Python reader then reads only cached blocks.
    cache = str(tmp_path / "one")
    _view(spark, name, "sr_spark", "SPARK", cache, **no_footers)
    _view(spark, name, "sr_python", "PYTHON", cache, **no_footers)
    with counted() as cold:
        expected = _rows(spark, sql.format(t="sr_spark"))
    assert cold["block_cache.misses"] > 0 and cold["block_cache.jvm_published"] > 0
    assert len(_blocks(cache)) == cold["block_cache.jvm_published"]
    with counted() as python:
        assert _rows(spark, sql.format(t="sr_python")) == expected
    assert python["block_cache.hits"] > 0 and python["block_cache.misses"] == 0
    assert python["storage.remote_requests"] == 0
    # and the other way round, in a cache of its own
    cache = str(tmp_path / "two")
    _view(spark, name, "sr_spark2", "SPARK", cache, **no_footers)
    _view(spark, name, "sr_python2", "PYTHON", cache, **no_footers)
    with counted() as filled:
        assert _rows(spark, sql.format(t="sr_python2")) == expected
    assert filled["block_cache.misses"] > 0
    with counted() as warm:
        assert _rows(spark, sql.format(t="sr_spark2")) == expected
    assert warm["block_cache.hits"] > 0 and warm["block_cache.misses"] == 0
    assert warm["storage.remote_requests"] == 0 and warm["reader.spark_splits"] == 3


def test_spark_reader_fetches_only_the_bytes_it_asks_for(spark, table, tmp_path, counted):
    """One column of seven: with the cache off the store serves the ranges Spark's reader
    asks for (not whole blocks); with the file cached, the cache serves them by range."""
    name, root = table
    files = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    sql = "SELECT id FROM {t}"
    spark.read.parquet(root).createOrReplaceTempView("sr_parquet")
    expected = sorted(_rows(spark, sql.format(t="sr_parquet")))
    _view(spark, name, "sr_uncached", "SPARK")
    with counted() as direct:
        assert sorted(_rows(spark, sql.format(t="sr_uncached"))) == expected
    assert direct["reader.spark_splits"] == 3 and direct.get("block_cache.misses", 0) == 0
    assert 0 < direct["storage.remote_bytes"] < files / 3, (direct, files)
    cache = str(tmp_path / "cache")
    _view(spark, name, "sr_cached", "SPARK", cache)
    _rows(spark, "SELECT * FROM sr_cached")  # every block of every file
    with counted() as warm:
        assert sorted(_rows(spark, sql.format(t="sr_cached"))) == expected
    assert warm["block_cache.misses"] == 0 and warm["storage.remote_requests"] == 0
    assert 0 < warm["block_cache.bytes_from_cache"] < files / 3, (warm, files)


def test_damaged_blocks_are_counted_misses_with_the_right_rows(spark, table, tmp_path, counted):
    name, _ = table
    cache = str(tmp_path / "cache")
    _view(spark, name, "sr_damaged", "SPARK", cache)
    sql = "SELECT id, d38, x FROM sr_damaged WHERE x > 10"
    expected = _rows(spark, sql)
    blocks = _blocks(cache)
    assert len(blocks) >= 3
    _flip(blocks[0])
    with open(blocks[1], "r+b") as f:  # truncated
        f.truncate(os.path.getsize(blocks[1]) - 10)
    with open(blocks[2], "r+b") as f:  # forged: a valid layout under another secret
        f.seek(-32, os.SEEK_END)
        f.write(bytes(32))
    jvm = spark._jvm.raptorx.cache.BlockCounts
    before = int(jvm.get("jvm_blocks.corrupt"))
    with counted() as c:
        assert _rows(spark, sql) == expected
    assert int(jvm.get("jvm_blocks.corrupt")) - before == 3
    assert c["block_cache.misses"] == 3  # each fetched again (one block per file here)
    assert len(_blocks(cache)) == len(blocks)  # fetched again and stored again


def test_a_rewritten_file_is_read_anew(spark, env, tmp_path, counted):
    root = str(tmp_path / "t")
    _write(root, seed=1)
    name = f"{env.unique_db('sparkreader')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    cache = str(tmp_path / "cache")
    _view(spark, name, "sr_rewritten", "SPARK", cache)
    sql = "SELECT sum(d15), count(s) FROM sr_rewritten WHERE id >= 0"
    before = _rows(spark, sql)
    _write(root, seed=2)  # same files, same sizes, other values
    spark.read.parquet(root).createOrReplaceTempView("sr_rewritten_parquet")
    with counted() as c:
        after = _rows(spark, sql)
    assert after == _rows(spark, sql.replace("sr_rewritten", "sr_rewritten_parquet"))
    assert after != before
    assert c["block_cache.misses"] > 0  # the new version's blocks, not the old ones


def _reader_functions_built(spark) -> int:
    """How many Spark reader functions the driver's JVM built (``JvmFileRead.prepare``)."""
    holder = spark._jvm.java.lang.Class.forName(
        "org.apache.spark.sql.execution.python.raptorx.JvmFileRead$ReaderFunctions$"
    )
    return int(holder.getField("MODULE$").get(None).built())


def test_a_repeated_scan_reuses_sparks_reader_function(spark, table, tmp_path):
    """A scan's reader function (and the Hadoop configuration it broadcasts) is built once per
    distinct schema, filters, SQL settings and Hadoop settings: a repeat of the query builds
    none, with the same rows; another filter value, another SQL setting or another Hadoop
    setting of the read builds a new one."""
    name, root = table
    spark.read.parquet(root).createOrReplaceTempView("sr_parquet")
    _view(spark, name, "sr_reuse", "SPARK")
    sql = "SELECT id, s FROM {t} WHERE id > {v}"
    expected = sorted(_rows(spark, sql.format(t="sr_parquet", v=100)))
    assert sorted(_rows(spark, sql.format(t="sr_reuse", v=100))) == expected
    built = _reader_functions_built(spark)
    for _ in range(2):
        assert sorted(_rows(spark, sql.format(t="sr_reuse", v=100))) == expected
    assert _reader_functions_built(spark) == built
    assert sorted(_rows(spark, sql.format(t="sr_reuse", v=2500))) == sorted(
        _rows(spark, sql.format(t="sr_parquet", v=2500))
    )
    assert _reader_functions_built(spark) == built + 1
    before = spark.conf.get("spark.sql.parquet.filterPushdown")
    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        assert sorted(_rows(spark, sql.format(t="sr_reuse", v=100))) == expected
        assert _reader_functions_built(spark) == built + 2
    finally:
        spark.conf.set("spark.sql.parquet.filterPushdown", before)
    _view(spark, name, "sr_reuse_conf", "SPARK", **{"hive.s3.region": "eu-west-3"})
    assert sorted(_rows(spark, sql.format(t="sr_reuse_conf", v=100))) == expected
    assert _reader_functions_built(spark) == built + 3
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("raptorx.test.reader-function", "1")
    try:
        assert sorted(_rows(spark, sql.format(t="sr_reuse", v=100))) == expected
        assert _reader_functions_built(spark) == built + 4
    finally:
        hadoop.unset("raptorx.test.reader-function")


def test_the_file_handle_cache_opens_each_file_once(spark, env, tmp_path, counted):
    """Uncached reads of 3 files of 5 row groups: with the handle cache off every read opens
    its file; on, each file is opened once and kept (a repeat opens none), closed after its
    idle time (a manual clock), closed and opened anew when the file changes, and no more
    kept than the bound."""
    root = str(tmp_path / "t")
    _write(root, seed=3)
    name = f"{env.unique_db('handles')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    sql = "SELECT sum(d15), count(s) FROM {t} WHERE id >= 0"
    jvm = spark._jvm.raptorx.cache
    clock = jvm.ManualClock(0)
    jvm.FileHandles.useClock(clock)

    def spark_rows():
        spark.read.parquet(root).createOrReplaceTempView("handles_parquet")
        return _rows(spark, sql.format(t="handles_parquet"))

    expected = spark_rows()

    def run(**options):
        _view(spark, name, "handles", "SPARK", **options)
        with counted() as c:
            assert _rows(spark, sql.format(t="handles")) == expected
        return c

    off = run(**{"hive.file-handle-cache-enabled": "false"})
    reads = off["storage.file_opens"]
    assert reads > 3 and off["file_handles.hits"] == 0, off.delta
    kept = {
        "hive.file-handle-cache-enabled": "true",
        "hive.file-handle-cache-size": "7",
        "hive.file-handle-cache-ttl-since-last-access": "1m",
    }
    first = run(**kept)
    assert (first["storage.file_opens"], first["file_handles.hits"]) == (3, reads - 3)
    repeat = run(**kept)
    assert (repeat["storage.file_opens"], repeat["file_handles.hits"]) == (0, reads)
    clock.advance(61_000)
    idle = run(**kept)
    assert idle["file_handles.evictions"] == 3 and idle["storage.file_opens"] == 3, idle.delta
    _write(root, seed=4)  # same files, other values: new versions
    expected = spark_rows()
    changed = run(**kept)
    assert changed["file_handles.invalidated"] == 3 and changed["storage.file_opens"] == 3
    bounded = run(**{**kept, "hive.file-handle-cache-size": "1"})
    assert jvm.FileHandles.shared(1, 60_000).idleCount() == 1
    assert bounded["storage.file_opens"] == bounded["file_handles.evictions"] + 1, bounded.delta
