import json
import logging
import os
import shutil
import subprocess
import sys

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cache.footer_cache import FileIdentity, FooterCache, footer_cache_for
from raptorx_py.config import load_settings
from raptorx_py.config.loader import with_overrides
from raptorx_py.errors import CorruptFileError
from raptorx_py.storage.file_versions import stat_version
from raptorx_py.storage.parquet_files import open_parquet, read_metadata
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCAL = fsspec.filesystem("file")


def write_file(path, n=3, extra_columns=0):
    cols = {"id": pa.array(range(n), pa.int64()), "name": [f"n{i}" for i in range(n)]}
    cols.update({f"c{i}": pa.array(range(n), pa.int32()) for i in range(extra_columns)})
    pq.write_table(pa.table(cols), path)
    return str(path)


def identity(path):
    st = os.stat(path)
    return FileIdentity(f"file://{path}", st.st_size, stat_version(st))


class Loader:
    """The lead's loader: open the file through open_parquet and return its footer."""

    def __init__(self, path):
        self.path, self.calls = path, 0

    def __call__(self):
        self.calls += 1
        return read_metadata(
            LOCAL, self.path, size=os.path.getsize(self.path), url=f"file://{self.path}"
        )


def refuse():
    raise AssertionError("the footer should have come from the cache")


def disk_entries(directory):
    return sorted(
        os.path.join(d, f)
        for d, _, files in os.walk(directory)
        for f in files
        if f.endswith(".footer")
    )


def test_memory_hit_returns_the_same_footer_without_reading(tmp_path):
    path = write_file(tmp_path / "a.parquet")
    cache, load, c = FooterCache(None, max_bytes=1 << 20, ttl=60), Loader(path), CounterDeltas()
    first = cache.get_or_load(identity(path), load)
    second = cache.get_or_load(identity(path), load)
    assert second is first and load.calls == 1
    assert (c["footer_cache.misses"], c["footer_cache.hits_memory"]) == (1, 1)
    # The cached footer reads the file correctly.
    pf = open_parquet(LOCAL, path, metadata=second)
    assert pf.read().column("id").to_pylist() == [0, 1, 2]


def test_disk_hit_from_another_instance(tmp_path):
    path = write_file(tmp_path / "a.parquet")
    d = tmp_path / "footers"
    original = FooterCache(str(d), max_bytes=1 << 20, ttl=60).get_or_load(
        identity(path), Loader(path)
    )
    assert len(disk_entries(d)) == 1
    c = CounterDeltas()
    other = FooterCache(str(d), max_bytes=1 << 20, ttl=60)  # another process's cache
    md = other.get_or_load(identity(path), refuse)
    assert md.equals(original) and md.metadata == original.metadata  # schema + ARROW:schema
    assert (c["footer_cache.hits_disk"], c["footer_cache.misses"]) == (1, 0)
    other.get_or_load(identity(path), refuse)
    assert c["footer_cache.hits_memory"] == 1  # the disk hit was promoted to memory


def test_disk_hit_from_a_second_process(tmp_path):
    path = write_file(tmp_path / "a.parquet", n=5)
    d = tmp_path / "footers"
    FooterCache(str(d), max_bytes=1 << 20, ttl=60).get_or_load(identity(path), Loader(path))
    st = os.stat(path)
    script = f"""
import json
from raptorx_py.cache.footer_cache import FileIdentity, FooterCache
from raptorx_py.metrics import counters
def refuse():
    raise AssertionError("loaded")
ident = FileIdentity({f"file://{path}"!r}, {st.st_size}, {stat_version(st)!r})
md = FooterCache({str(d)!r}, max_bytes=1 << 20, ttl=60).get_or_load(ident, refuse)
print(json.dumps({{"rows": md.num_rows, **counters.snapshot()}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["rows"] == 5 and result["footer_cache.hits_disk"] == 1
    assert "footer_cache.misses" not in result


@pytest.mark.parametrize("change", ["etag", "ctime", "size"])
def test_identity_change_is_a_miss(tmp_path, change):
    path = write_file(tmp_path / "a.parquet")
    cache, load = FooterCache(str(tmp_path / "f"), max_bytes=1 << 20, ttl=60), Loader(path)
    size = os.path.getsize(path)
    before, after = {
        "etag": (("s3://b/a.parquet", size, "etag:e1"), ("s3://b/a.parquet", size, "etag:e2")),
        # a local file's change time alone (its mtime put back)
        "ctime": ((path, size, "posix:2:3:3"), (path, size, "posix:2:4:3")),
        "size": (("s3://b/a.parquet", size, "etag:e1"), ("s3://b/a.parquet", size + 1, "etag:e1")),
    }[change]
    before, after = FileIdentity(*before), FileIdentity(*after)
    c = CounterDeltas()
    cache.get_or_load(before, load)
    cache.get_or_load(after, load)
    assert load.calls == 2 and c["footer_cache.misses"] == 2
    assert len(disk_entries(tmp_path / "f")) == 2


def test_file_without_version_is_never_cached(tmp_path):
    path = write_file(tmp_path / "a.parquet")
    cache = FooterCache(str(tmp_path / "f"), max_bytes=1 << 20, ttl=60)
    load, c = Loader(path), CounterDeltas()
    ident = FileIdentity(f"file://{path}", os.path.getsize(path), None)
    assert not ident.cacheable
    cache.get_or_load(ident, load)
    cache.get_or_load(ident, load)
    assert load.calls == 2 and c["footer_cache.uncacheable"] == 2
    assert len(cache) == 0 and disk_entries(tmp_path / "f") == []


def test_memory_is_lru_by_bytes(tmp_path):
    paths = [write_file(tmp_path / f"{i}.parquet") for i in range(4)]
    loads = [Loader(p) for p in paths]
    probe = FooterCache(None, max_bytes=1 << 20, ttl=60)
    probe.get_or_load(identity(paths[0]), Loader(paths[0]))
    one = probe.memory_bytes  # the four footers have the same size
    cache, c = FooterCache(None, max_bytes=int(one * 2.5), ttl=60), CounterDeltas()
    cache.get_or_load(identity(paths[0]), loads[0])
    cache.get_or_load(identity(paths[1]), loads[1])
    cache.get_or_load(identity(paths[0]), loads[0])  # 0 is now more recent than 1
    cache.get_or_load(identity(paths[2]), loads[2])  # evicts 1
    assert c["footer_cache.evictions"] == 1 and cache.memory_bytes == 2 * one
    cache.get_or_load(identity(paths[0]), loads[0])
    cache.get_or_load(identity(paths[1]), loads[1])
    assert [ld.calls for ld in loads] == [1, 2, 1, 0]  # 0 hit; 1 reloaded
    # A footer larger than the whole memory budget is served but not kept.
    tiny = FooterCache(None, max_bytes=one - 1, ttl=60)
    tiny.get_or_load(identity(paths[3]), loads[3])
    assert len(tiny) == 0 and tiny.memory_bytes == 0


def test_ttl_counts_from_the_last_access(tmp_path):
    path = write_file(tmp_path / "a.parquet")
    clock, load = FakeClock(0.0), Loader(path)
    cache, c = FooterCache(None, max_bytes=1 << 20, ttl=100, clock=clock), CounterDeltas()
    cache.get_or_load(identity(path), load)
    for t in (60, 120, 180):  # each access is within 100 s of the previous one
        clock.now = t
        cache.get_or_load(identity(path), load)
    assert load.calls == 1 and c["footer_cache.hits_memory"] == 3
    clock.now = 280  # 100 s after the last access
    cache.get_or_load(identity(path), load)
    assert load.calls == 2 and c["footer_cache.evictions"] == 1


def test_expired_entries_are_dropped_when_others_are_stored(tmp_path):
    a, b = write_file(tmp_path / "a.parquet"), write_file(tmp_path / "b.parquet")
    clock = FakeClock(0.0)
    cache = FooterCache(None, max_bytes=1 << 20, ttl=10, clock=clock)
    cache.get_or_load(identity(a), Loader(a))
    clock.now = 11
    cache.get_or_load(identity(b), Loader(b))
    assert len(cache) == 1  # a is gone without being read again


def _corrupt_files(tmp_path):
    good = open(write_file(tmp_path / "good.parquet", n=50), "rb").read()
    return {
        "bad_magic": good[:-4] + b"PARX",
        "length_past_end": good[:-8] + (len(good) * 4).to_bytes(4, "little") + b"PAR1",
        "garbage": bytes(range(256)) * 4,
        "truncated": good[: len(good) // 2],
        "garbage_footer": good[: -8 - 40] + b"\x07" * 40 + (40).to_bytes(4, "little") + b"PAR1",
    }


@pytest.mark.parametrize(
    "kind", ["bad_magic", "length_past_end", "garbage", "truncated", "garbage_footer"]
)
def test_corrupt_file_fails_naming_it_and_is_not_cached(tmp_path, kind):
    path = tmp_path / f"{kind}.parquet"
    path.write_bytes(_corrupt_files(tmp_path)[kind])
    d = tmp_path / "footers"
    cache, load = FooterCache(str(d), max_bytes=1 << 20, ttl=60), Loader(str(path))
    for attempt in (1, 2):
        with pytest.raises(CorruptFileError) as info:
            cache.get_or_load(identity(str(path)), load)
        assert str(path) in str(info.value)
        assert load.calls == attempt  # nothing cached: the second call reads again
    assert len(cache) == 0 and disk_entries(d) == []


def test_loader_errors_from_pyarrow_become_corrupt_file_errors(tmp_path):
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"not parquet at all")
    cache = FooterCache(None, max_bytes=1 << 20, ttl=60)
    with pytest.raises(CorruptFileError, match="bad.parquet") as info:
        cache.get_or_load(identity(str(path)), lambda: pq.read_metadata(str(path)))
    assert info.value.__cause__ is not None and len(cache) == 0


def test_footer_larger_than_the_listed_file_is_served_not_cached(tmp_path):
    path = write_file(tmp_path / "a.parquet")
    cache = FooterCache(str(tmp_path / "f"), max_bytes=1 << 20, ttl=60)
    load, c = Loader(path), CounterDeltas()
    wrong = FileIdentity("s3://b/a.parquet", 10, "etag:x")  # listed before a rewrite
    assert cache.get_or_load(wrong, load).num_rows == 3
    assert cache.get_or_load(wrong, load).num_rows == 3
    assert load.calls == 2 and c["footer_cache.rejected"] == 2
    assert len(cache) == 0 and disk_entries(tmp_path / "f") == []


def test_missing_file_is_not_called_corrupt(tmp_path):
    from raptorx_py.errors import StorageNotFoundError

    cache = FooterCache(None, max_bytes=1 << 20, ttl=60)
    missing = str(tmp_path / "gone.parquet")
    with pytest.raises(StorageNotFoundError, match="gone.parquet"):
        cache.get_or_load(FileIdentity(missing, 100, "etag:x"), lambda: pq.read_metadata(missing))


@pytest.mark.parametrize(
    "damage", ["garbage", "half_written", "flipped_byte", "empty", "other_identity"]
)
def test_corrupt_disk_entry_is_a_counted_miss(tmp_path, damage):
    path = write_file(tmp_path / "a.parquet")
    other = write_file(tmp_path / "b.parquet", n=7)
    d = tmp_path / "footers"
    FooterCache(str(d), max_bytes=1 << 20, ttl=60).get_or_load(identity(path), Loader(path))
    [entry] = disk_entries(d)
    data = open(entry, "rb").read()
    if damage == "other_identity":  # e.g. a file copied or renamed under the wrong key
        FooterCache(str(d), max_bytes=1 << 20, ttl=60).get_or_load(identity(other), Loader(other))
        [other_entry] = [e for e in disk_entries(d) if e != entry]
        bad = open(other_entry, "rb").read()
    else:
        bad = {
            "garbage": bytes([0x5A]) * len(data),
            "half_written": data[: len(data) // 2],
            "flipped_byte": data[:40] + bytes([data[40] ^ 0xFF]) + data[41:],
            "empty": b"",
        }[damage]
    with open(entry, "wb") as f:
        f.write(bad)
    load, c = Loader(path), CounterDeltas()
    md = FooterCache(str(d), max_bytes=1 << 20, ttl=60).get_or_load(identity(path), load)
    assert md.num_rows == 3 and load.calls == 1
    assert (c["footer_cache.corrupt_entries"], c["footer_cache.misses"]) == (1, 1)
    # The reload replaced the bad entry with a good one.
    assert (
        FooterCache(str(d), max_bytes=1 << 20, ttl=60).get_or_load(identity(path), refuse).num_rows
        == 3
    )


def test_unwritable_directory_means_memory_only_with_one_warning(tmp_path, caplog):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    paths = [write_file(tmp_path / f"{i}.parquet") for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="raptorx_py.cache.footer_cache"):
        cache = FooterCache(str(blocker / "footers"), max_bytes=1 << 20, ttl=60)
        loads = [Loader(p) for p in paths]
        for p, ld in zip(paths, loads):
            cache.get_or_load(identity(p), ld)
            cache.get_or_load(identity(p), ld)
    assert not cache.disk_enabled and [ld.calls for ld in loads] == [1, 1, 1]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not writable" in warnings[0].getMessage()


def test_disk_fault_after_start_is_counted_not_raised(tmp_path, caplog):
    d = tmp_path / "footers"
    cache = FooterCache(str(d), max_bytes=1 << 20, ttl=60)
    shutil.rmtree(d)
    d.write_text("the directory was replaced by a file")
    paths = [write_file(tmp_path / f"{i}.parquet") for i in range(2)]
    c = CounterDeltas()
    with caplog.at_level(logging.WARNING, logger="raptorx_py.cache.footer_cache"):
        for p in paths:
            assert cache.get_or_load(identity(p), Loader(p)).num_rows == 3
    assert c["footer_cache.put_errors"] == 2 and len(cache) == 2
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_disk_size_is_bounded_least_recently_used_first(tmp_path):
    paths = [write_file(tmp_path / f"{i}.parquet") for i in range(8)]
    d = tmp_path / "footers"
    FooterCache(str(d), max_bytes=1 << 20, ttl=60).get_or_load(identity(paths[0]), Loader(paths[0]))
    one = os.path.getsize(disk_entries(d)[0])
    bound = int(one * 3.5)
    cache, c = FooterCache(str(d), max_bytes=1 << 20, ttl=60, max_disk_bytes=bound), CounterDeltas()
    for i, p in enumerate(paths):
        cache.get_or_load(identity(p), Loader(p))
        # Make recency explicit (file mtimes are the cross-process LRU order).
        for entry in disk_entries(d):
            if os.path.getmtime(entry) > i:
                os.utime(entry, (i + 1, i + 1))
        total = sum(os.path.getsize(e) for e in disk_entries(d))
        assert total <= bound
    assert c["footer_cache.disk_evictions"] == 8 - 3
    # The newest three survive: a fresh process hits them on disk.
    fresh = FooterCache(str(d), max_bytes=1 << 20, ttl=60, max_disk_bytes=bound)
    for p in paths[-3:]:
        fresh.get_or_load(identity(p), refuse)


def test_footer_cache_for_settings(tmp_path):
    def settings(**props):
        return load_settings(
            overrides={"cache.base-directory": str(tmp_path / "base"), **props},
            env={},
            cwd=tmp_path,
        )

    assert footer_cache_for(settings().footer_cache) is not None  # on by default
    assert (
        footer_cache_for(settings(**{"hive.parquet.metadata-cache-enabled": "false"}).footer_cache)
        is None
    )
    on = settings(
        **{
            "hive.parquet.metadata-cache-enabled": "true",
            "hive.parquet.metadata-cache-size": "1MB",
            "hive.parquet.metadata-cache-ttl-since-last-access": "10m",
        }
    )
    cache = footer_cache_for(on.footer_cache)
    assert cache is footer_cache_for(on.footer_cache)  # one per process
    assert cache.directory == str(tmp_path / "base" / "footers")
    assert (cache.max_bytes, cache.ttl, cache.disk_enabled) == (1 << 20, 600.0, True)
    resized = footer_cache_for(
        with_overrides(on, {"hive.parquet.metadata-cache-size": "2MB"}).footer_cache
    )
    assert resized is not cache and resized.max_bytes == 2 << 20


def test_a_disk_over_a_lowered_bound_shrinks_when_the_cache_opens(tmp_path):
    """A footer directory filled under a larger bound is cut to a lowered one when a cache
    opens on it, before any put (the bound of a process started with a smaller setting)."""
    paths = [write_file(tmp_path / f"{i}.parquet") for i in range(6)]
    d = tmp_path / "footers"
    unbounded = FooterCache(str(d), max_bytes=1 << 20, ttl=60)
    for i, p in enumerate(paths):
        unbounded.get_or_load(identity(p), Loader(p))
        for entry in disk_entries(d):  # recency by mtime (the cross-process LRU order)
            if os.path.getmtime(entry) > i:
                os.utime(entry, (i + 1, i + 1))
    sizes = [os.path.getsize(e) for e in disk_entries(d)]
    assert len(sizes) == 6
    bound = int(sizes[0] * 2.5)
    c = CounterDeltas()
    FooterCache(str(d), max_bytes=1 << 20, ttl=60, max_disk_bytes=bound)
    assert sum(os.path.getsize(e) for e in disk_entries(d)) <= bound
    assert c["footer_cache.disk_evictions"] >= 4
    # The newest footer stayed: a fresh cache hits it on disk.
    FooterCache(str(d), max_bytes=1 << 20, ttl=60, max_disk_bytes=bound).get_or_load(
        identity(paths[-1]), refuse
    )
