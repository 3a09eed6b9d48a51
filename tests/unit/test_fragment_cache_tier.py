"""The fragment result cache tier (cache/fragment_cache.py) and its keys
(datasource/fragment_keys.py), without Spark: round trips, corrupt and truncated entries,
limits, an unusable directory, two processes on one directory, and what a key names."""

from __future__ import annotations

import datetime as dt
import errno
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import replace

import pyarrow as pa
import pytest

from raptorx_py.cache import fragment_cache
from raptorx_py.cache.fragment_cache import FragmentCache, entry_path, fragment_cache_for
from raptorx_py.config import load_settings
from raptorx_py.datasource.planning.fragment_keys import fragment_key
from raptorx_py.datasource.planning.planner import Split
from raptorx_py.hive.model import Column, Table
from raptorx_py.jvm_contract.pushed_aggregation import Aggregate, PushedAggregation
from raptorx_py.predicates import Comparison
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock

SCHEMA = pa.schema([pa.field("x", pa.int64()), pa.field("s", pa.string())])
KEY = b"k" * 20
OTHER = b"o" * 20


def batches(n: int = 10_000) -> list[pa.RecordBatch]:
    # About 150 KB: a result of realistic size.
    return [
        pa.record_batch([pa.array(range(n)), pa.array([f"v{i}" for i in range(n)])], SCHEMA),
        pa.record_batch([pa.array([1]), pa.array([None], pa.string())], SCHEMA),
    ]


def cache(tmp_path, **kw) -> FragmentCache:
    args = dict(max_bytes=2**30, max_entries=100, max_entry_bytes=2**26, ttl=None)
    return FragmentCache(str(tmp_path / "fragments"), **{**args, **kw})


def test_a_stored_result_comes_back_equal(tmp_path):
    c = cache(tmp_path)
    d = CounterDeltas()
    assert c.get(KEY) is None
    assert c.put(KEY, SCHEMA, batches())
    got = c.get(KEY)
    assert pa.Table.from_batches(got) == pa.Table.from_batches(batches())
    assert (d["fragment_cache.misses"], d["fragment_cache.stores"], d["fragment_cache.hits"]) == (
        1,
        1,
        1,
    )


def test_an_empty_result_is_a_hit_with_no_rows(tmp_path):
    c = cache(tmp_path)
    assert c.put(KEY, SCHEMA, [])
    assert c.get(KEY) == []


def _value_files(root) -> list[str]:
    return [
        os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".arrow")
    ]


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_entry_is_a_miss_deleted_and_counted(tmp_path, damage):
    c = cache(tmp_path)
    c.put(KEY, SCHEMA, batches())
    (path,) = _value_files(c.directory)
    with open(path, "r+b") as f:
        if damage == "flip":
            f.seek(500)
            byte = f.read(1)
            f.seek(500)
            f.write(bytes([byte[0] ^ 0xFF]))
        else:
            f.truncate(os.path.getsize(path) // 2)
    deltas = CounterDeltas()
    assert c.get(KEY) is None
    assert deltas["fragment_cache.corrupt"] == 1
    assert len(c) == 0  # deleted: the next read recomputes and may store it again
    assert c.put(KEY, SCHEMA, batches()) and c.get(KEY) is not None


def test_an_entry_under_another_key_is_not_served(tmp_path):
    """A value copied under another key's name fails the keyed checksum."""
    c = cache(tmp_path)
    c.put(KEY, SCHEMA, batches())
    os.makedirs(os.path.dirname(entry_path(c.directory, OTHER)), exist_ok=True)
    shutil.copy(entry_path(c.directory, KEY), entry_path(c.directory, OTHER))
    deltas = CounterDeltas()
    assert c.get(OTHER) is None
    assert deltas["fragment_cache.corrupt"] == 1


def test_a_result_over_the_entry_limit_is_not_stored(tmp_path):
    c = cache(tmp_path, max_entry_bytes=1000)
    deltas = CounterDeltas()
    assert not c.put(KEY, SCHEMA, batches())
    assert deltas["fragment_cache.too_large"] == 1 and len(c) == 0


def test_a_full_cache_stores_nothing_more(tmp_path):
    c = cache(tmp_path, max_entries=2)
    assert c.put(b"a" * 20, SCHEMA, batches(10)) and c.put(b"b" * 20, SCHEMA, batches(10))
    deltas = CounterDeltas()
    assert not c.put(b"c" * 20, SCHEMA, batches(10))
    assert deltas["fragment_cache.full"] == 1 and len(c) == 2


def _entry_size(tmp_path) -> int:
    """The size of the entry file of ``batches()`` (~57 KB: ZSTD-compressed)."""
    return _sizes(tmp_path)[0]


def _sizes(tmp_path) -> tuple[int, int]:
    """The size of the entry file of ``batches()``, and the index's own pages in the volume
    of a cache holding one."""
    probe = cache(tmp_path / "probe")
    probe.put(KEY, SCHEMA, batches())
    size = os.path.getsize(entry_path(probe.directory, KEY))
    return size, probe.volume() - size


def test_the_size_limit_evicts_least_recently_used(tmp_path):
    size = _entry_size(tmp_path)
    c = cache(tmp_path, max_bytes=4 * size)
    for i in range(8):
        c.put(bytes([i]) * 20, SCHEMA, batches())
    assert 2 <= len(c) < 8 and c.volume() < 5 * size
    assert c.get(bytes([7]) * 20) is not None  # the newest stays
    assert c.get(bytes([0]) * 20) is None  # the least recently used went first


def test_files_are_private_by_default(tmp_path):
    c = cache(tmp_path)
    assert os.stat(c.directory).st_mode & 0o777 == 0o700
    assert os.stat(os.path.join(c.directory, "cache.secret")).st_mode & 0o777 == 0o600


def assert_tier_off(directory) -> None:
    """Opening the tier on ``directory`` gives no cache, counted, and raises nothing."""
    settings = load_settings(
        overrides={
            "fragment-result-cache.enabled": "true",
            "fragment-result-cache.base-directory": str(directory),
        }
    )
    deltas = CounterDeltas()
    assert fragment_cache_for(settings.fragment_cache) is None
    assert deltas["fragment_cache.unavailable"] == 1


def test_an_unusable_directory_turns_the_tier_off_without_failing(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert_tier_off(blocker / "fragments")


def test_on_by_default_and_off_by_its_property(tmp_path):
    directory = str(tmp_path / "fragments")
    on = load_settings(overrides={"fragment-result-cache.base-directory": directory}, env={})
    cache = fragment_cache_for(on.fragment_cache)
    assert cache is not None and cache.directory == directory
    off = load_settings(overrides={"fragment-result-cache.enabled": "false"}, env={})
    assert fragment_cache_for(off.fragment_cache) is None


def _store_in_child(directory: str) -> None:
    FragmentCache(directory, max_bytes=2**30, max_entries=100, max_entry_bytes=2**26, ttl=None).put(
        KEY, SCHEMA, batches()
    )


def test_two_processes_share_one_directory(tmp_path):
    c = cache(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_store_in_child, args=(c.directory,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert pa.Table.from_batches(c.get(KEY)) == pa.Table.from_batches(batches())


# --- keys ------------------------------------------------------------------------------------

TABLE = Table("db", "t", "EXTERNAL_TABLE", "file:///t", (Column("x", "bigint"),), id=7)
COLUMNS = TABLE.columns


def posix(ino=1201, ctime=1_700_000_000_500_000_000, mtime=1_700_000_000_500_000_000):
    """A local file's version (``file_versions.stat_version``) with these fields."""
    return f"posix:{ino}:{ctime}:{mtime}"


SPLIT = Split("file:///t/ds=1/f.parquet", 1000, posix(), None, ("1",))
P1 = Comparison("x", ">", 5)
P2 = Comparison("x", "<", 50)


def key(split=SPLIT, preds=(P1, P2), table=TABLE, agg=None, schema=SCHEMA):
    return fragment_key(table, split, COLUMNS, preds, agg, schema)


def test_a_key_ignores_the_order_of_predicates():
    assert key(preds=(P1, P2)) == key(preds=(P2, P1))


@pytest.mark.parametrize(
    "changed",
    [
        {"split": Split(SPLIT.url, 1001, SPLIT.version, None, ("1",))},  # size
        # the change time alone (an mtime put back), the mtime, a new inode
        {"split": replace(SPLIT, version=posix(ctime=1_700_000_000_500_000_001))},
        {"split": replace(SPLIT, version=posix(mtime=1_700_000_000_500_000_001))},
        {"split": replace(SPLIT, version=posix(ino=1202))},
        {"split": Split(SPLIT.url, 1000, "etag:e-2", "e-2", ("1",))},  # an ETag
        {"split": Split(SPLIT.url, 1000, SPLIT.version, None, ("1",), 0, 500)},  # a piece
        {"split": Split("file:///t/ds=2/f.parquet", 1000, SPLIT.version, None, ("2",))},
        {"preds": (P1,)},
        {"preds": (P1, Comparison("x", "<", 51))},
        {"table": Table("db", "t", "EXTERNAL_TABLE", "file:///t", COLUMNS, id=8)},  # recreated
        {"agg": PushedAggregation((), (Aggregate("count_star", "bigint", None),))},
        {"schema": pa.schema([pa.field("x", pa.int32())])},
        {"preds": (P1, Comparison("d", "<", dt.date(2024, 1, 2)))},
    ],
)
def test_a_key_changes_with_what_the_result_depends_on(changed):
    assert key(**changed) != key()


def test_a_file_without_a_version_has_no_key():
    assert key(split=Split(SPLIT.url, 1000, None, None, ("1",))) is None


def test_an_aggregation_s_partition_filters_are_not_in_the_key():
    """The provider sends an aggregated scan's filters with the aggregation; those on the
    partition key chose the splits and must not change a split's key."""
    count = (Aggregate("count_star", "bigint", None),)
    day = Comparison("ds", ">=", dt.date(2021, 1, 1))
    assert key(agg=PushedAggregation((), count, (day,))) == key(agg=PushedAggregation((), count))


# --- a full disk -----------------------------------------------------------------------------


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MiB tmpfs of its own (a real ENOSPC, from the kernel, for files and SQLite alike);
    skipped where this process may not mount one."""
    point = tmp_path / "tiny"
    point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=True)


def _fill(directory) -> None:
    """Take every byte left on the file system of ``directory``."""
    with open(os.path.join(directory, "filler"), "wb", buffering=0) as f:
        with pytest.raises(OSError) as full:
            while True:
                f.write(b"\0" * 4096)
    assert full.value.errno == errno.ENOSPC


def test_a_full_disk_stores_nothing_and_still_serves_hits(tiny_disk):
    """A hit writes nothing but its file's mtime, so on a full disk hits
    are served (read-only); stores fail, counted, never an exception."""
    c = FragmentCache(
        str(tiny_disk / "fragments"),
        max_bytes=2**30,
        max_entries=100,
        max_entry_bytes=2**26,
        ttl=None,
    )
    assert c.put(KEY, SCHEMA, batches(100))
    _fill(tiny_disk)
    deltas = CounterDeltas()
    assert not c.put(OTHER, SCHEMA, batches())  # the entry file: ENOSPC
    assert pa.Table.from_batches(c.get(KEY)) == pa.Table.from_batches(batches(100))
    assert c.get(OTHER) is None  # never stored: a plain miss
    assert deltas["fragment_cache.errors"] == 1 and deltas["fragment_cache.stores"] == 0
    assert (deltas["fragment_cache.hits"], deltas["fragment_cache.misses"]) == (1, 1)
    os.remove(tiny_disk / "filler")
    assert c.put(OTHER, SCHEMA, batches()) and len(c) == 2


def test_a_full_disk_before_the_cache_opens_turns_the_tier_off(tiny_disk):
    _fill(tiny_disk)
    assert_tier_off(tiny_disk / "fragments")


# --- the entry layout the JVM reads --------------------------------------------------------


def test_an_entry_is_one_file_named_by_its_key(tmp_path):
    c = cache(tmp_path)
    c.put(KEY, SCHEMA, batches())
    path = entry_path(c.directory, KEY)
    assert _value_files(c.directory) == [path]
    assert path.endswith(f"/entries/{KEY.hex()[:2]}/{KEY.hex()}.arrow")
    assert os.stat(path).st_mode & 0o777 == 0o600
    with open(path, "rb") as f:
        assert f.read(4) == b"RXF1"


def _stream_bytes(table_batches, compression) -> int:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, SCHEMA, options=options) as writer:
        for b in table_batches:
            writer.write_batch(b)
    return sink.getvalue().size


def test_an_entry_s_stream_is_compressed_and_comes_back_equal(tmp_path):
    """The entry's Arrow IPC buffers are compressed (``ENTRY_COMPRESSION``): the file is the
    header and the compressed stream, a third of the uncompressed stream of the same
    batches here, and reads back equal."""
    assert fragment_cache.ENTRY_COMPRESSION == "zstd"
    c = cache(tmp_path)
    assert c.put(KEY, SCHEMA, batches())
    size = os.path.getsize(entry_path(c.directory, KEY))
    assert size == fragment_cache.HEADER_BYTES + _stream_bytes(batches(), "zstd")
    assert size < _stream_bytes(batches(), None) / 2
    assert pa.Table.from_batches(c.get(KEY)) == pa.Table.from_batches(batches())
    plain = cache(tmp_path / "plain", compression=None)
    assert plain.put(KEY, SCHEMA, batches())
    assert os.path.getsize(entry_path(plain.directory, KEY)) == (
        fragment_cache.HEADER_BYTES + _stream_bytes(batches(), None)
    )


def test_an_entry_of_the_previous_format_is_a_plain_miss(tmp_path):
    """An entry written by format 1 (uncompressed, before ENTRY_FORMAT 2), its MAC valid, is
    neither served nor counted corrupt: a miss, removed; the result is stored anew."""
    c = cache(tmp_path)
    assert c.put(KEY, SCHEMA, batches())
    path = entry_path(c.directory, KEY)
    with open(path, "rb") as f:
        data = f.read()
    stream = data[fragment_cache.HEADER_BYTES :]
    prefix = bytes([*fragment_cache.ENTRY_MAGIC, 1, 0, 0, 0]) + data[8:16]
    with open(path, "wb") as f:
        f.write(prefix + fragment_cache.entry_mac(c._secret, prefix, KEY, stream) + stream)
    deltas = CounterDeltas()
    assert c.get(KEY) is None
    assert deltas["fragment_cache.misses"] == 1 and deltas["fragment_cache.corrupt"] == 0
    assert not os.path.exists(path)
    assert c.put(KEY, SCHEMA, batches()) and c.get(KEY) is not None


def test_an_entry_written_without_the_secret_is_not_served(tmp_path):
    """A forger who cannot read ``cache.secret`` writes a well-formed entry under another
    secret: it fails the MAC."""
    c = cache(tmp_path)
    other = FragmentCache(
        str(tmp_path / "elsewhere"),
        max_bytes=2**30,
        max_entries=10,
        max_entry_bytes=2**26,
        ttl=None,
    )
    other.put(KEY, SCHEMA, batches())
    os.makedirs(os.path.dirname(entry_path(c.directory, KEY)), exist_ok=True)
    shutil.copy(entry_path(other.directory, KEY), entry_path(c.directory, KEY))
    deltas = CounterDeltas()
    assert c.get(KEY) is None
    assert deltas["fragment_cache.corrupt"] == 1
    assert not os.path.exists(entry_path(c.directory, KEY))


def test_an_entry_expires_by_its_header(tmp_path):
    now = [1_000_000.0]
    c = cache(tmp_path, ttl=60, clock=lambda: now[0])
    c.put(KEY, SCHEMA, batches(10))
    now[0] += 59
    assert c.get(KEY) is not None
    now[0] += 2
    deltas = CounterDeltas()
    assert c.get(KEY) is None
    assert (deltas["fragment_cache.expired"], deltas["fragment_cache.misses"]) == (1, 1)
    assert len(c) == 0


def test_a_touched_file_counts_as_used_for_eviction(tmp_path):
    """A reader that touches an entry's mtime (the JVM does, on a hit) keeps it: eviction
    takes the later of the index's use and the file's mtime."""
    size, pages = _sizes(tmp_path)
    c = cache(tmp_path, max_bytes=2 * size + pages + size // 2)  # 2 fit
    c.put(b"a" * 20, SCHEMA, batches())
    c.put(b"b" * 20, SCHEMA, batches())
    future = os.stat(entry_path(c.directory, b"b" * 20)).st_mtime + 10
    os.utime(entry_path(c.directory, b"a" * 20), (future, future))  # "a" read since
    deltas = CounterDeltas()
    c.put(b"c" * 20, SCHEMA, batches())
    assert deltas["fragment_cache.evicted"] == 1
    assert os.path.exists(entry_path(c.directory, b"a" * 20))
    assert not os.path.exists(entry_path(c.directory, b"b" * 20))


# --- diskcache as the index ------------------------------------------------------------------


def _index_rows(c: FragmentCache) -> list[tuple[bytes, str, int]]:
    """diskcache's rows (key, filename, size), read as its SQLite file says, oldest first."""
    with sqlite3.connect(os.path.join(c.directory, "index", "cache.db")) as conn:
        return [
            (bytes(k), f, s)
            for k, f, s in conn.execute("SELECT key, filename, size FROM Cache ORDER BY rowid")
        ]


def _index_files(c: FragmentCache) -> dict[str, tuple[int, int]]:
    root = os.path.join(c.directory, "index")
    return {
        name: (
            os.stat(os.path.join(root, name)).st_size,
            os.stat(os.path.join(root, name)).st_mtime_ns,
        )
        for name in sorted(os.listdir(root))
    }


def test_the_index_is_a_diskcache_row_per_entry_file(tmp_path):
    """Each entry is a row of diskcache's table, its filename the entry file its key names
    and its size the file's: what the size bound adds up."""
    c = cache(tmp_path)
    c.put(KEY, SCHEMA, batches())
    c.put(OTHER, SCHEMA, batches(10))
    rows = _index_rows(c)
    assert [(k, f) for k, f, _ in rows] == [
        (KEY, os.path.relpath(entry_path(c.directory, KEY), c.directory)),
        (OTHER, os.path.relpath(entry_path(c.directory, OTHER), c.directory)),
    ]
    assert [s for _, _, s in rows] == [
        os.path.getsize(entry_path(c.directory, k)) for k in (KEY, OTHER)
    ]
    assert len(c) == 2 and c.volume() > sum(s for _, _, s in rows)  # the index's pages too


def test_a_hit_writes_nothing_to_the_index(tmp_path):
    c = cache(tmp_path)
    c.put(KEY, SCHEMA, batches(10))
    before = _index_files(c)
    deltas = CounterDeltas()
    for _ in range(5):
        assert c.get(KEY) is not None
    assert deltas["fragment_cache.hits"] == 5
    assert _index_files(c) == before


def test_a_result_stored_again_has_one_row_and_its_new_file(tmp_path):
    c = cache(tmp_path)
    assert c.put(KEY, SCHEMA, batches(10))
    assert c.put(KEY, SCHEMA, batches(20))
    assert len(c) == 1 and len(_index_rows(c)) == 1
    assert _value_files(c.directory) == [entry_path(c.directory, KEY)]
    assert pa.Table.from_batches(c.get(KEY)) == pa.Table.from_batches(batches(20))


def test_expired_rows_are_removed_with_their_files_by_the_next_store(tmp_path, monkeypatch):
    """diskcache keeps a row's expiry by ``time.time``; the cache's clock and it are the same
    fake clock here."""
    clock = FakeClock()
    monkeypatch.setattr(time, "time", clock)
    c = cache(tmp_path, ttl=60, clock=clock)
    assert c.put(KEY, SCHEMA, batches(10))
    clock.advance(61)
    deltas = CounterDeltas()
    assert c.put(OTHER, SCHEMA, batches(10))
    assert deltas["fragment_cache.expired"] == 1
    assert len(c) == 1 and not os.path.exists(entry_path(c.directory, KEY))


def test_expiry_makes_room_under_the_entry_bound(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(time, "time", clock)
    c = cache(tmp_path, ttl=60, clock=clock, max_entries=1)
    assert c.put(KEY, SCHEMA, batches(10))
    assert not c.put(OTHER, SCHEMA, batches(10))  # full
    clock.advance(61)
    assert c.put(OTHER, SCHEMA, batches(10)) and len(c) == 1


def test_eviction_passes_over_every_entry_read_since_it_was_stored(tmp_path):
    """Second chance: entries read since their row was written move to the back; the others
    go, oldest first, and the order then is the order of the passes."""
    size, pages = _sizes(tmp_path)
    c = cache(tmp_path, max_bytes=6 * size + pages + size // 2)  # 6 fit, with the index
    keys = [bytes([i]) * 20 for i in range(6)]
    for k in keys:
        assert c.put(k, SCHEMA, batches())
    later = os.stat(entry_path(c.directory, keys[-1])).st_mtime + 10
    for k in keys[:3]:
        os.utime(entry_path(c.directory, k), (later, later))  # read since (as the JVM does)
    deltas = CounterDeltas()
    assert c.put(b"n" * 20, SCHEMA, batches())
    assert deltas["fragment_cache.second_chances"] == 3 and deltas["fragment_cache.evicted"] == 1
    assert not os.path.exists(entry_path(c.directory, keys[3]))
    assert [k for k, _, _ in _index_rows(c)] == [keys[4], keys[5], b"n" * 20, *keys[:3]]


def test_a_result_over_the_whole_bound_stays_alone(tmp_path):
    """The result just stored is never its own eviction: alone over the bound, it stays
    until the next store."""
    c = cache(tmp_path, max_bytes=_entry_size(tmp_path) // 2)
    assert c.put(KEY, SCHEMA, batches()) and len(c) == 1
    deltas = CounterDeltas()
    assert c.put(OTHER, SCHEMA, batches())
    assert deltas["fragment_cache.evicted"] == 1
    assert [k for k, _, _ in _index_rows(c)] == [OTHER]
    assert c.get(OTHER) is not None and c.get(KEY) is None


def _publish_as_the_jvm(c: FragmentCache, key: bytes, expires_ms: int = 0) -> int:
    """Write ``key``'s entry as ``FragmentStores.publish`` does (header, MAC, stream, atomic
    rename) and its names line under ``adopt/``; the entry file's size."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCHEMA) as w:
        for b in batches(100):
            w.write_batch(b)
    stream = sink.getvalue().to_pybytes()
    prefix = fragment_cache._PREFIX.pack(
        fragment_cache.ENTRY_MAGIC, fragment_cache.ENTRY_FORMAT, expires_ms
    )
    data = prefix + fragment_cache.entry_mac(c._secret, prefix, key, stream) + stream
    path = entry_path(c.directory, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    adopt = os.path.join(c.directory, fragment_cache.ADOPT_DIR)
    os.makedirs(adopt, exist_ok=True)
    with open(os.path.join(adopt, f"{key.hex()[:8]}.names"), "a") as f:
        f.write(f"{key.hex()} {len(data)}\n")
    return len(data)


def test_entries_the_jvm_published_are_adopted_into_the_index(tmp_path):
    c = cache(tmp_path)
    d = CounterDeltas()
    size = _publish_as_the_jvm(c, KEY)
    assert len(c) == 0 and c.get(KEY) is not None  # served before it is adopted
    assert c.adopt_published() == 1 and len(c) == 1
    assert d["fragment_cache.adopted"] == 1
    assert c.volume() >= size
    assert os.listdir(os.path.join(c.directory, fragment_cache.ADOPT_DIR)) == []
    assert c.adopt_published() == 0  # the names file is gone; nothing twice
    # Adopted entries are evicted like any other: a bound below them empties the cache.
    c.close()
    small = cache(tmp_path, max_bytes=1)
    assert len(small) == 0 and not os.path.exists(entry_path(small.directory, KEY))


def test_opening_a_cache_and_storing_adopt_what_the_jvm_published(tmp_path):
    c = cache(tmp_path)
    _publish_as_the_jvm(c, KEY)
    c.close()
    reopened = cache(tmp_path)
    assert len(reopened) == 1
    _publish_as_the_jvm(reopened, b"\x02" * 16)
    assert reopened.put(b"\x03" * 16, SCHEMA, batches(10))
    assert len(reopened) == 3


def test_adoption_past_the_entry_bound_or_of_a_bad_entry_removes_the_file(tmp_path):
    c = cache(tmp_path, max_entries=1)
    d = CounterDeltas()
    assert c.put(b"\x01" * 16, SCHEMA, batches(10))
    _publish_as_the_jvm(c, b"\x02" * 16)
    expired = b"\x03" * 16
    _publish_as_the_jvm(c, expired, expires_ms=1)
    torn = b"\x04" * 16
    _publish_as_the_jvm(c, torn)
    with open(entry_path(c.directory, torn), "r+b") as f:
        f.truncate(3)
    with open(os.path.join(c.directory, fragment_cache.ADOPT_DIR, "junk.names"), "w") as f:
        f.write("not a line\nzz 12\n")
    assert c.adopt_published() == 0 and len(c) == 1
    assert d["fragment_cache.full"] == 1 and d["fragment_cache.corrupt"] == 1
    for k in (b"\x02" * 16, expired, torn):
        assert not os.path.exists(entry_path(c.directory, k))
    assert os.listdir(os.path.join(c.directory, fragment_cache.ADOPT_DIR)) == []
