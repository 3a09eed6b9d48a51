"""Fragment result cache hits served by the JVM, shown by counts: a task
whose splits all hit runs no Python reader, a task mixing hits and misses computes only its
misses in Python, and a flipped byte, a truncated entry, an entry forged without the secret
and an entry gone after planning are each recomputed, counted, with the right rows. The
entry layout is checked from both sides: what Python writes, the JVM verifies."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from raptorx_py.cache import fragment_cache as fc
from raptorx_py.jvm_contract import fragment_handoff
from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch import oracle
from tests.integration.test_fragment_cache import (
    DAYS,
    ROWS,
    _daily_table,
    _write_day,
    both,
    window,
)

pytestmark = pytest.mark.spark


def _entries(cache_dir: str) -> list[str]:
    return sorted(
        os.path.join(d, f)
        for d, _, files in os.walk(cache_dir)
        for f in files
        if f.endswith(fc.ENTRY_SUFFIX)
    )


def test_an_all_hit_query_runs_no_python_reader(spark, env, tmp_path, counted):
    _, cache_dir = _daily_table(env, tmp_path, spark)
    # Every day holds a row above 3000, so statistics prune none of them (day 1 is 0..4999).
    sql = "SELECT x, s FROM {t} WHERE x > 3000"
    first = both(spark, sql, counted)
    assert first["fragment_cache.stores"] == len(DAYS)
    stored = {p: os.stat(p).st_mtime_ns for p in _entries(cache_dir)}
    assert len(stored) == len(DAYS)
    for p in stored:  # as if stored a minute ago
        os.utime(p, ns=(stored[p] - 60 * 10**9, stored[p] - 60 * 10**9))
    again = both(spark, sql, counted)
    # each hit touched its entry (its last use, which eviction honours)
    assert all(os.stat(p).st_mtime_ns > stored[p] - 60 * 10**9 for p in stored)
    assert again["fragment_cache.jvm_hits"] == again["fragment_cache.hits"] == len(DAYS)
    assert again["reader.python_tasks"] == 0
    assert again["reader.fragments_computed"] == 0 and again["reader.rows_read"] == 0
    assert again["reader.rows_to_spark"] == first["reader.rows_to_spark"] == len(DAYS) * ROWS - 3001
    # pushed partial aggregations are served the same way
    agg = window(DAYS[0], DAYS[4])
    both(spark, agg, counted)
    served = both(spark, agg, counted)
    assert served["fragment_cache.jvm_hits"] == len(DAYS) and served["reader.python_tasks"] == 0


def test_a_task_mixing_hits_and_misses_computes_only_its_misses(spark, env, tmp_path, counted):
    """Days 1 and 3 first; then all five days: the task holding days 1-3 has two hits (the
    JVM serves them) and one miss (Python computes day 2 alone)."""
    _daily_table(env, tmp_path, spark)
    both(spark, f"SELECT x, s FROM {{t}} WHERE ds IN (date '{DAYS[0]}', date '{DAYS[2]}')", counted)
    # A filter on the partition key here too: its column is then read by both (same key).
    mixed = both(spark, f"SELECT x, s FROM {{t}} WHERE ds >= date '{DAYS[0]}'", counted)
    assert mixed["fragment_cache.jvm_hits"] == mixed["fragment_cache.hits"] == 2
    assert mixed["fragment_cache.misses"] == mixed["reader.fragments_computed"] == 3
    assert mixed["reader.rows_read"] == 3 * ROWS
    assert mixed["planner.tasks"] == mixed["reader.python_tasks"] == 2


def _flip(path: str) -> None:
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))


def _truncate(path: str) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)


def _forge(path: str) -> None:
    """The same result and key, written by a cache with another secret (a forger without
    ``cache.secret``)."""
    forger = fc.FragmentCache(
        os.path.dirname(path) + "-forger",
        max_bytes=2**30,
        max_entries=10,
        max_entry_bytes=2**26,
        ttl=None,
    )
    key = bytes.fromhex(os.path.basename(path)[: -len(fc.ENTRY_SUFFIX)])
    with open(path, "rb") as f:
        stream = f.read()[fc.HEADER_BYTES :]
    with pa.ipc.open_stream(stream) as r:
        forger.put(key, r.schema, list(r))
    shutil.copy(fc.entry_path(forger.directory, key), path)


def _remove(path: str) -> None:
    os.remove(path)


@pytest.mark.parametrize("damage", [_flip, _truncate, _forge, _remove], ids=lambda f: f.__name__)
def test_a_damaged_or_missing_entry_is_recomputed(spark, env, tmp_path, counted, damage):
    """The JVM does not serve it; the Python reader counts it (a corrupt entry is deleted),
    computes the split and stores it again. ``_remove``: an entry evicted after the scan was
    planned with its key (planning does not look at entries)."""
    _, cache_dir = _daily_table(env, tmp_path, spark)
    sql = f"SELECT x, s FROM {{t}} WHERE ds = date '{DAYS[2]}'"
    both(spark, sql, counted)
    (entry,) = _entries(cache_dir)
    damage(entry)
    again = both(spark, sql, counted)
    assert again["fragment_cache.jvm_hits"] == 0
    assert again["fragment_cache.corrupt"] == (0 if damage is _remove else 1)
    assert again["fragment_cache.misses"] == again["reader.fragments_computed"] == 1
    assert again["fragment_cache.stores"] == 1
    served = both(spark, sql, counted)
    assert served["fragment_cache.jvm_hits"] == 1 and served["reader.python_tasks"] == 0


def _uncompressed_stream(stream: bytes) -> bytes:
    """The same batches as the Arrow IPC ``stream``, written without compression."""
    with pa.ipc.open_stream(stream) as r:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, r.schema) as w:
            for b in r:
                w.write_batch(b)
    return sink.getvalue().to_pybytes()


def test_compressed_entries_are_served_by_the_jvm(spark, env, tmp_path, counted):
    """The entries Python writes are compressed (``ENTRY_COMPRESSION``): each file is
    smaller than the uncompressed stream of its own batches, and the JVM serves them all
    (arrow-compression's codecs), with the right rows."""
    _, cache_dir = _daily_table(env, tmp_path, spark)
    sql = "SELECT x, s FROM {t} WHERE x > 3000"
    assert both(spark, sql, counted)["fragment_cache.stores"] == len(DAYS)
    entries = _entries(cache_dir)
    assert len(entries) == len(DAYS)
    for path in entries:
        with open(path, "rb") as f:
            stream = f.read()[fc.HEADER_BYTES :]
        assert len(stream) < len(_uncompressed_stream(stream)) / 2, path
    served = both(spark, sql, counted)
    assert served["fragment_cache.jvm_hits"] == len(DAYS) and served["reader.python_tasks"] == 0
    assert served["fragment_cache.jvm_errors"] == 0
    assert served["reader.rows_to_spark"] == len(DAYS) * ROWS - 3001


def test_an_entry_of_the_previous_format_is_a_miss_on_both_sides(spark, env, tmp_path, counted):
    """An entry as format 1 wrote it (uncompressed, its MAC valid under the cache's secret)
    is not served by the JVM nor by Python, nor counted corrupt: a miss, recomputed and
    stored anew in today's format, which the JVM then serves."""
    _, cache_dir = _daily_table(env, tmp_path, spark)
    sql = f"SELECT x, s FROM {{t}} WHERE ds = date '{DAYS[2]}'"
    both(spark, sql, counted)
    (path,) = _entries(cache_dir)
    with open(path, "rb") as f:
        data = f.read()
    with open(os.path.join(cache_dir, "cache.secret"), "rb") as f:
        secret = f.read()
    key = bytes.fromhex(os.path.basename(path)[: -len(fc.ENTRY_SUFFIX)])
    stream = _uncompressed_stream(data[fc.HEADER_BYTES :])
    prefix = fc.ENTRY_MAGIC + bytes([1, 0, 0, 0]) + data[8:16]
    with open(path, "wb") as f:
        f.write(prefix + fc.entry_mac(secret, prefix, key, stream) + stream)
    again = both(spark, sql, counted)
    assert again["fragment_cache.jvm_hits"] == 0 and again["fragment_cache.jvm_errors"] == 0
    assert again["fragment_cache.corrupt"] == 0
    assert again["fragment_cache.misses"] == again["reader.fragments_computed"] == 1
    assert again["fragment_cache.stores"] == 1
    with open(path, "rb") as f:
        assert f.read(5)[4] == fc.ENTRY_FORMAT
    served = both(spark, sql, counted)
    assert served["fragment_cache.jvm_hits"] == 1 and served["reader.python_tasks"] == 0


def _fragment_hits(spark):
    return spark.sparkContext._jvm.org.apache.spark.sql.execution.python.raptorx.FragmentHits


def test_the_layout_and_the_mark_are_spelled_alike_on_both_sides(spark):
    contract = spark.sparkContext._jvm.raptorx.contract
    mark, entry, files = contract.FragmentHandoff, contract.FragmentEntry, contract.CacheFiles
    assert mark.Marker() == fragment_handoff.MARKER
    assert mark.NoKey() == fragment_handoff.NO_KEY
    assert chr(mark.Unserved()) == fragment_handoff.UNSERVED
    assert chr(mark.Served()) == fragment_handoff.SERVED
    assert entry.Magic().encode() == fc.ENTRY_MAGIC and entry.Format() == fc.ENTRY_FORMAT
    assert entry.HeaderBytes() == fc.HEADER_BYTES and entry.MacBytes() == fc.MAC_BYTES
    assert (entry.EntriesDir(), entry.Suffix()) == (fc.ENTRIES_DIR, fc.ENTRY_SUFFIX)
    from raptorx_py.cache.cache_files import SECRET_BYTES, SECRET_FILE
    from raptorx_py.metrics import MetricsSink

    assert (files.SecretFile(), files.SecretBytes()) == (SECRET_FILE, SECRET_BYTES)
    assert _fragment_hits(spark).JvmCountsDir() == MetricsSink.JVM_COUNTS_DIR


def test_the_jvm_verifies_what_python_writes(spark, tmp_path):
    """Python's entry passes the JVM's check; a flipped byte, another key's name, an expired
    header and a missing secret do not."""
    now = [1_000_000.0]
    cache = fc.FragmentCache(
        str(tmp_path / "fragments"),
        max_bytes=2**30,
        max_entries=10,
        max_entry_bytes=2**26,
        ttl=60,
        clock=lambda: now[0],
    )
    schema = pa.schema([pa.field("x", pa.int64())])
    key = bytes(range(20))
    assert cache.put(key, schema, [pa.record_batch([pa.array(range(1000))], schema)])
    jvm = _fragment_hits(spark)
    directory = jvm.resolve(cache.directory)
    secret = jvm.secret(directory).get()
    at = int(now[0] * 1000)

    def ok(k: bytes = key, millis: int = at) -> bool:
        return jvm.verified(directory, secret, k.hex(), millis).isDefined()

    assert ok()
    assert not ok(millis=at + 61_000)  # expired
    other = bytes(20)
    os.makedirs(os.path.dirname(fc.entry_path(cache.directory, other)), exist_ok=True)
    shutil.copy(fc.entry_path(cache.directory, key), fc.entry_path(cache.directory, other))
    assert not ok(other)  # moved under another key's name
    _flip(fc.entry_path(cache.directory, key))
    assert not ok()
    os.remove(os.path.join(cache.directory, "cache.secret"))
    assert jvm.secret(directory).isEmpty()


def test_partial_aggregates_the_jvm_stores_serve_both_readers_and_mix_with_python_ones(
    spark, env, tmp_path, counted
):
    """A pushed partial aggregation the JVM computed (AUTO, over Spark's reader's batches)
    and stored as its split's fragment is served by the JVM and by the Python reader alike;
    and one query mixes splits whose fragment the Python reader stored, fragments the JVM
    stored, and splits the JVM computes, each with the rows of Spark's own aggregation."""
    root = str(tmp_path / "t")
    for i, day in enumerate(DAYS):
        _write_day(root, day, i * ROWS)
    name = f"{env.unique_db('fragagg')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)
    cache_dir = str(tmp_path / "fragments")
    spark.read.format("tiered_hive").load(name).createOrReplaceTempView("frag_off")

    def view(reader: str, alias: str) -> None:
        spark.read.format("tiered_hive").option("fragment-result-cache.enabled", "true").option(
            "fragment-result-cache.base-directory", cache_dir
        ).option("fragment-result-cache.store-on-first-use", "true").option(
            "hive.parquet.reader", reader
        ).load(name).createOrReplaceTempView(alias)

    view("AUTO", "frag_jvm")
    view("PYTHON", "frag_py")

    def run(view_name: str, sql: str):
        with counted() as c:
            got = oracle.spark_rows(spark.sql(sql.format(t=view_name)))
        expected = oracle.spark_rows(spark.sql(sql.format(t="frag_off")))
        assert oracle.compare_results(expected, got, ordered=False) is None, sql
        return c

    # days 1-2 through the Python reader: it computes and stores them
    py = run("frag_py", window(DAYS[0], DAYS[1]))
    assert py["fragment_cache.stores"] == 2 and py.get("aggregation.jvm_splits", 0) == 0
    # days 1-4 in AUTO: two Python-stored hits the JVM serves, two the JVM computes and stores
    mixed = run("frag_jvm", window(DAYS[0], DAYS[3]))
    assert mixed["fragment_cache.jvm_hits"] == 2, dict(mixed)
    assert mixed["aggregation.jvm_splits"] == mixed["fragment_cache.jvm_stores"] == 2, dict(mixed)
    assert mixed["reader.python_tasks"] == 0, dict(mixed)
    # the Python reader serves the JVM's entries (days 3-4) and computes day 5
    served = run("frag_py", window(DAYS[2], DAYS[4]))
    assert served["fragment_cache.hits"] == 2 and served["fragment_cache.misses"] == 1, dict(served)
    assert served["reader.fragments_computed"] == 1, dict(served)
    assert served.get("fragment_cache.schema_mismatch", 0) == 0, dict(served)
    # and the JVM serves every one of the five, whoever stored it
    again = run("frag_jvm", window(DAYS[0], DAYS[4]))
    assert again["fragment_cache.jvm_hits"] == len(DAYS), dict(again)
    assert again.get("aggregation.jvm_splits", 0) == 0 and again["reader.python_tasks"] == 0
