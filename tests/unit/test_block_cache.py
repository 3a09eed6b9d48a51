"""The block cache tier: alignment, coalescing, identity, checksums, recovery, capacity,
faults and processes. The target is the local filesystem under tmp_path, wrapped so that
every ranged read it serves is recorded."""

from __future__ import annotations

import errno
import io
import logging
import multiprocessing
import os
import random
import sqlite3
import subprocess
import sys
import threading

import pytest
from fsspec.implementations.local import LocalFileSystem

from raptorx_py.cache import block_store
from raptorx_py.cache.block_cache import BlockCacheFileSystem, block_cache_for
from raptorx_py.cache.block_store import TRAILER, BlockStore
from raptorx_py.config import load_settings
from raptorx_py.errors import FileChangedError
from raptorx_py.storage.file_versions import stat_version
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock

BS = 256  # block size of most tests


class RecordingFile:
    """A target file that records each read as (offset, length) in its filesystem."""

    def __init__(self, raw, fs):
        self._raw, self._fs = raw, fs

    def seek(self, *args):
        return self._raw.seek(*args)

    def tell(self):
        return self._raw.tell()

    def read(self, n=-1):
        offset = self._raw.tell()
        data = self._raw.read(n)
        self._fs.requests.append((offset, len(data)))
        return data

    def write(self, data):
        return self._raw.write(data)

    def close(self):
        self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RecordingFS(LocalFileSystem):
    """The local filesystem, recording ranged reads, opens and info calls."""

    cachable = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.requests: list[tuple[int, int]] = []
        self.opens = 0
        self.infos = 0

    def _open(self, path, mode="rb", **kwargs):
        self.opens += 1
        return RecordingFile(super()._open(path, mode, **kwargs), self)

    def info(self, path, **kwargs):
        self.infos += 1
        return super().info(path, **kwargs)

    def special(self):
        return "the target's own method"


def write_file(path, size, seed=0) -> bytes:
    data = random.Random(seed).randbytes(size)
    with open(path, "wb") as f:
        f.write(data)
    return data


@pytest.fixture
def target():
    return RecordingFS()


@pytest.fixture
def source(tmp_path):
    path = str(tmp_path / "data.bin")
    return path, write_file(path, 10 * BS + 37)


def make_cache(target, tmp_path, **kwargs) -> BlockCacheFileSystem:
    kwargs.setdefault("block_size", BS)
    kwargs.setdefault("max_size", 1 << 20)
    return BlockCacheFileSystem(target, str(tmp_path / "cache"), **kwargs)


def block_indexes(store: BlockStore) -> set[int]:
    return {int(name.rsplit("-", 1)[1]) for name in store.entries()}


def block_path(fs: BlockCacheFileSystem, path: str, size: int, version: str, index: int):
    return fs.store.path_of(f"{fs.block_key(path, size, version)}-{index}")


# --- reads ----------------------------------------------------------------------------------


def test_read_fetches_whole_aligned_blocks_in_one_request(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    with CounterDeltas() as c, fs.open(path, "rb", size=len(data), version="v1") as f:
        f.seek(300)
        assert f.read(600) == data[300:900]
    # bytes 300..900 lie in blocks 1..3: one request for exactly those blocks
    assert target.requests == [(BS, 3 * BS)]
    assert block_indexes(fs.store) == {1, 2, 3}
    assert set(fs.store.entries().values()) == {BS + TRAILER.size}
    assert c == {
        "block_cache.misses": 3,
        "block_cache.remote_requests": 1,
        "block_cache.bytes_from_remote": 3 * BS,
        # what every remote read counts (the scan node's "remote requests")
        "storage.remote_requests": 1,
        "storage.remote_bytes": 3 * BS,
    }


def test_last_block_is_short_and_tail_reads_stop_at_eof(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    with fs.open(path, "rb", size=len(data), version="v1") as f:
        f.seek(-10, io.SEEK_END)
        assert f.read(100) == data[-10:]
        assert f.read(5) == b""
        f.seek(len(data) + 1000)
        assert f.read() == b""
        assert f.tell() == len(data) + 1000
    assert target.requests == [(10 * BS, 37)]
    assert fs.store.entries() == {f"{fs.block_key(path, len(data), 'v1')}-10": 37 + TRAILER.size}


def test_missing_runs_are_coalesced_one_request_each(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    with fs.open(path, "rb", size=len(data), version="v1") as f:
        for index in (2, 5):  # warm two single blocks
            f.seek(index * BS + 7)
            assert f.read(1) == data[index * BS + 7 : index * BS + 8]
    target.requests.clear()
    with CounterDeltas() as c, fs.open(path, "rb", size=len(data), version="v1") as f:
        assert f.read() == data
    assert target.requests == [(0, 2 * BS), (3 * BS, 2 * BS), (6 * BS, 4 * BS + 37)]
    assert c["block_cache.remote_requests"] == 3
    assert c["block_cache.misses"] == 9 and c["block_cache.hits"] == 2
    assert c["block_cache.bytes_from_cache"] == 2 * BS
    assert c["block_cache.bytes_from_remote"] == len(data) - 2 * BS


def test_warm_reads_make_no_request_and_open_nothing(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    with fs.open(path, "rb", size=len(data), version="v1") as f:
        assert f.read() == data
    target.requests.clear()
    target.opens = 0
    rng = random.Random(3)
    with CounterDeltas() as c, fs.open(path, "rb", size=len(data), version="v1") as f:
        for _ in range(200):
            start = rng.randrange(len(data))
            n = rng.randrange(1, 3 * BS)
            f.seek(start)
            assert f.read(n) == data[start : start + n]
    assert target.requests == [] and target.opens == 0
    assert c.get("block_cache.misses", 0) == 0 and c["block_cache.hits"] >= 200


def test_readinto_seek_and_closed_file(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    f = fs.open(path, "rb", size=len(data), version="v1")
    buf = bytearray(700)
    f.seek(100)
    assert f.readinto(buf) == 700 and bytes(buf) == data[100:800]
    assert f.seek(-50, io.SEEK_CUR) == 750
    assert f.read(10) == data[750:760]
    f.seek(len(data) - 5)
    assert f.readinto(buf) == 5 and bytes(buf[:5]) == data[-5:]
    with pytest.raises(ValueError, match="negative seek"):
        f.seek(-1)
    f.close()
    with pytest.raises(ValueError):
        f.read(1)


@pytest.mark.parametrize("size", [0, 1, BS, 3 * BS])
def test_small_and_exact_multiple_sizes(target, tmp_path, size):
    path = str(tmp_path / f"f{size}")
    data = write_file(path, size, seed=size)
    fs = make_cache(target, tmp_path)
    for _ in range(2):  # cold, then warm
        with fs.open(path, "rb", size=size, version="v") as f:
            assert f.read() == data
            assert f.read() == b""
    assert len(target.requests) == (1 if size else 0)


def test_identity_from_info_when_not_given(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    with fs.open(path) as f:
        assert f.size == len(data) and f.read() == data
        # A local file's identity is its stat (file_versions), not the target's info().
        assert f.version == stat_version(os.stat(path)) and target.infos == 0
    # Overwritten with the same size and its mtime put back: a new identity (its change
    # time), never the old bytes.
    before = os.stat(path)
    new = write_file(path, len(data), seed=99)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    while os.stat(path).st_ctime_ns == before.st_ctime_ns:  # the kernel clock's next tick
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with fs.open(path) as f:
        assert f.read() == new


def test_a_new_version_never_serves_or_mixes_old_bytes(target, source, tmp_path):
    path, old = source
    fs = make_cache(target, tmp_path)
    with fs.open(path, "rb", size=len(old), version="v1") as f:
        f.seek(BS)
        assert f.read(2 * BS) == old[BS : 3 * BS]  # blocks 1, 2 of version 1 cached
    new = write_file(path, len(old), seed=42)
    target.requests.clear()
    with fs.open(path, "rb", size=len(new), version="v2") as f:
        assert f.read() == new
    assert target.requests == [(0, len(new))]  # no block of version 1 was used
    bigger = write_file(path, len(old) + 5, seed=43)  # same version string, new size
    with fs.open(path, "rb", size=len(bigger), version="v2") as f:
        assert f.read() == bigger


def test_file_shorter_than_listed_raises_file_changed(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    with fs.open(path, "rb", size=len(data) + BS, version="v1") as f:
        f.seek(len(data) - 5)
        with pytest.raises(FileChangedError, match="changed after it was listed"):
            f.read(100)
    assert block_indexes(fs.store) == set()  # nothing cached from a failed fetch


def test_parquet_through_the_cache(target, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"a": list(range(20_000)), "b": [f"v{i % 97}" for i in range(20_000)]})
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path, row_group_size=2_000)
    size = os.path.getsize(path)
    fs = make_cache(target, tmp_path, block_size=4096)
    for _ in range(2):
        with fs.open(path, "rb", size=size, version="v") as f:
            assert pq.ParquetFile(f, pre_buffer=True).read(use_threads=True).equals(table)
    with CounterDeltas() as c, fs.open(path, "rb", size=size, version="v") as f:
        assert pq.ParquetFile(f, pre_buffer=True).read(use_threads=True).equals(table)
    assert c.get("block_cache.remote_requests", 0) == 0 and c["block_cache.hits"] > 0


def test_threads_sharing_the_store(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path, block_size=64)
    errors: list[str] = []

    def reader(seed):
        rng = random.Random(seed)
        with fs.open(path, "rb", size=len(data), version="v1") as f:
            for _ in range(100):
                start, n = rng.randrange(len(data)), rng.randrange(1, 400)
                f.seek(start)
                if f.read(n) != data[start : start + n]:
                    errors.append(f"thread {seed}: bytes {start}+{n} differ")

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# --- checksums and damaged files ---------------------------------------------------------


def _warm(fs, path, data, version="v1"):
    with fs.open(path, "rb", size=len(data), version=version) as f:
        assert f.read() == data


def test_checksum_mismatch_is_a_counted_miss_with_right_bytes(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    _warm(fs, path, data)
    block = block_path(fs, path, len(data), "v1", 4)
    damaged = bytearray(open(block, "rb").read())
    damaged[10] ^= 0xFF
    with open(block + ".new", "wb") as f:
        f.write(damaged)
    os.replace(block + ".new", block)  # a new file: this process has not verified it
    target.requests.clear()
    with CounterDeltas() as c, fs.open(path, "rb", size=len(data), version="v1") as f:
        f.seek(4 * BS)
        assert f.read(BS) == data[4 * BS : 5 * BS]
    assert c["block_cache.corrupt_blocks"] == 1 and c["block_cache.misses"] == 1
    assert target.requests == [(4 * BS, BS)]
    assert open(block, "rb").read()[:BS] == data[4 * BS : 5 * BS]  # fetched and stored again


def test_in_place_damage_is_found_by_a_new_process_or_verify_every_read(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    _warm(fs, path, data)
    block = block_path(fs, path, len(data), "v1", 2)

    def damage_and_read(cache):
        with open(block, "r+b") as f:
            f.seek(3)
            f.write(b"\x00\x01\x02")
        with CounterDeltas() as c, cache.open(path, "rb", size=len(data), version="v1") as f:
            f.seek(2 * BS)
            assert f.read(BS) == data[2 * BS : 3 * BS]
        assert c["block_cache.corrupt_blocks"] == 1 and c["block_cache.misses"] == 1

    damage_and_read(make_cache(target, tmp_path))  # another process verifies on first read
    paranoid = make_cache(target, tmp_path, verify_every_read=True)
    _warm(paranoid, path, data)  # verified once by this instance, then damaged in place
    damage_and_read(paranoid)


def test_short_block_file_is_a_counted_miss(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    _warm(fs, path, data)
    block = block_path(fs, path, len(data), "v1", 7)
    os.truncate(block, 100)
    target.requests.clear()
    with CounterDeltas() as c, fs.open(path, "rb", size=len(data), version="v1") as f:
        assert f.read() == data
    assert c["block_cache.corrupt_blocks"] == 1 and c["block_cache.misses"] == 1
    assert target.requests == [(7 * BS, BS)]
    assert os.path.getsize(block) == BS + TRAILER.size


def test_index_row_without_file_is_a_miss_and_heals(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    _warm(fs, path, data)
    os.unlink(block_path(fs, path, len(data), "v1", 3))
    with CounterDeltas() as c:
        _warm(fs, path, data)
    assert c["block_cache.misses"] == 1 and c.get("block_cache.corrupt_blocks", 0) == 0
    assert os.path.exists(block_path(fs, path, len(data), "v1", 3))
    assert fs.store.total_bytes() == sum(fs.store.entries().values())


# --- start-up recovery ---------------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_startup_recovery_makes_index_and_disk_agree(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    _warm(fs, path, data)
    store = fs.store
    name = lambda i: f"{fs.block_key(path, len(data), 'v1')}-{i}"  # noqa: E731
    # a crash mid-write: orphan temps (dead writer, unknown name) ...
    orphan = os.path.join(store.tmp_dir, f"{_dead_pid()}.abcdef.part")
    open(orphan, "wb").write(b"half a block")
    stray = os.path.join(store.tmp_dir, "not-ours.tmp")
    open(stray, "wb").write(b"?")
    live = os.path.join(store.tmp_dir, f"{os.getpid()}.0123.part")  # a live writer's
    open(live, "wb").write(b"in progress")
    os.truncate(store.path_of(name(1)), 10)  # ... a partial block file ...
    os.unlink(store.path_of(name(2)))  # ... an index row without its file ...
    conn = sqlite3.connect(store.index_path)
    with conn:  # ... files without rows: one valid (adopted), one garbage (removed)
        conn.execute("DELETE FROM blocks WHERE name IN (?, ?)", (name(3), name(4)))
    conn.close()
    with open(store.path_of(name(4)), "r+b") as f:
        f.write(b"garbage")
    foreign = os.path.join(store.data_dir, name(5)[:2], "foreign.txt")
    open(foreign, "w").write("not a block")
    store.close()

    recovered = make_cache(target, tmp_path).store
    assert recovered.last_recovery == {
        "orphan_temps": 2,
        "partial_files": 2,
        "missing_files": 1,
        "adopted": 1,
        "foreign_files": 1,
        "evicted": 0,
    }
    assert not os.path.exists(orphan) and not os.path.exists(stray)
    assert os.path.exists(live)
    assert not os.path.exists(foreign)
    assert block_indexes(recovered) == set(range(11)) - {1, 2, 4}
    assert recovered.total_bytes() == sum(recovered.entries().values())
    on_disk = {
        e
        for sub in os.listdir(recovered.data_dir)
        for e in os.listdir(os.path.join(recovered.data_dir, sub))
    }
    assert on_disk == set(recovered.entries())


def test_recovery_evicts_past_a_smaller_capacity(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    _warm(fs, path, data)
    fs.store.close()
    with CounterDeltas() as c:
        small = make_cache(target, tmp_path, max_size=3 * (BS + TRAILER.size))
    assert small.store.last_recovery["evicted"] == 8
    assert c["block_cache.evictions"] == 8
    assert len(small.store.entries()) == 3
    assert small.store.total_bytes() <= 3 * (BS + TRAILER.size)


# --- capacity ----------------------------------------------------------------------------------


def test_eviction_by_bytes_in_lru_order(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path, max_size=3 * (BS + TRAILER.size) + 10)
    fs.store.clock = FakeClock(1000.0, step=1.0)

    def read_block(i):
        with fs.open(path, "rb", size=len(data), version="v1") as f:
            f.seek(i * BS)
            assert f.read(BS) == data[i * BS : (i + 1) * BS]

    for i in (0, 1, 2):
        read_block(i)
    read_block(0)  # a hit: block 1 is now the least recently used
    with CounterDeltas() as c:
        read_block(3)
    assert c["block_cache.evictions"] == 1
    assert block_indexes(fs.store) == {0, 2, 3}
    assert fs.store.total_bytes() == 3 * (BS + TRAILER.size)
    with CounterDeltas() as c:
        read_block(4)  # now block 2 is the oldest
    assert c["block_cache.evictions"] == 1
    assert block_indexes(fs.store) == {0, 3, 4}


def test_block_larger_than_capacity_is_not_stored(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path, max_size=BS)
    with CounterDeltas() as c:
        _warm(fs, path, data)
    assert block_indexes(fs.store) == {10}  # only the short last block fits
    assert c.get("block_cache.put_errors", 0) == 0


# --- faults ----------------------------------------------------------------------------------


def test_unusable_directory_turns_the_cache_off_with_one_warning(target, source, tmp_path, caplog):
    path, data = source
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    settings = load_settings(
        overrides={
            "cache.enabled": "true",
            "cache.base-directory": str(blocker / "cache"),
            "cache.block-size": "256B",
        },
        env={},
        cwd=tmp_path,
    )
    with caplog.at_level(logging.WARNING, logger="raptorx_py.cache.block_store"):
        fs = block_cache_for(settings.block_cache, target)
        again = block_cache_for(settings.block_cache, target)
        for cache in (fs, again):
            with cache.open(path, "rb", size=len(data), version="v1") as f:
                assert f.read() == data
    assert fs is again and not fs.enabled
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(blocker) in warnings[0].getMessage()


def test_unwritable_publish_counts_put_errors_and_reads_right(
    target, source, tmp_path, monkeypatch
):
    path, data = source
    fs = make_cache(target, tmp_path)

    def read_only_fs(src, dst):
        raise OSError(errno.EROFS, "Read-only file system", dst)

    monkeypatch.setattr(block_store.os, "replace", read_only_fs)
    with CounterDeltas() as c:
        _warm(fs, path, data)
    assert c["block_cache.put_errors"] == 11
    assert fs.store.entries() == {}
    assert os.listdir(fs.store.tmp_dir) == []  # no temp file left behind


def test_full_disk_evicts_then_fails_the_put_not_the_read(target, source, tmp_path, monkeypatch):
    path, data = source
    fs = make_cache(target, tmp_path)
    other = str(tmp_path / "other.bin")
    other_data = write_file(other, 4 * BS, seed=5)
    _warm(fs, other, other_data)  # 4 blocks that eviction can free

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(block_store, "open", disk_full, raising=False)
    with CounterDeltas() as c:
        _warm(fs, path, data)
    assert c["block_cache.put_errors"] == 11
    assert c["block_cache.evictions"] == 4
    assert fs.store.entries() == {}


def test_full_disk_once_succeeds_after_eviction(target, source, tmp_path, monkeypatch):
    path, data = source
    fs = make_cache(target, tmp_path)
    other = str(tmp_path / "other.bin")
    other_data = write_file(other, 2 * BS, seed=5)
    _warm(fs, other, other_data)
    failures = iter([OSError(errno.ENOSPC, "No space left on device")])

    def full_once(*args, **kwargs):
        for e in failures:
            raise e
        return open(*args, **kwargs)

    monkeypatch.setattr(block_store, "open", full_once, raising=False)
    with CounterDeltas() as c, fs.open(path, "rb", size=len(data), version="v1") as f:
        assert f.read(BS) == data[:BS]
    assert c["block_cache.evictions"] >= 1 and c.get("block_cache.put_errors", 0) == 0
    assert block_indexes(fs.store) >= {0}


def test_a_broken_index_never_fails_a_read(target, source, tmp_path, monkeypatch):
    path, data = source
    fs = make_cache(target, tmp_path)

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(fs.store, "_write", locked)
    with CounterDeltas() as c:
        _warm(fs, path, data)
    assert c["block_cache.put_errors"] == 11


# --- the filesystem's other methods and the per-process registry ------------------------


def test_other_methods_are_the_targets(target, source, tmp_path):
    path, data = source
    fs = make_cache(target, tmp_path)
    assert fs.special() == "the target's own method"
    assert fs.protocol == target.protocol
    assert fs.info(path)["size"] == len(data)
    assert fs.ls(str(tmp_path), detail=False) == target.ls(str(tmp_path), detail=False)
    assert fs.cat_file(path, 5, 9) == data[5:9]
    assert fs.exists(path) and not fs.exists(path + ".nope")
    assert fs.async_impl is False
    with fs.open(str(tmp_path / "written.bin"), "wb") as f:  # writes go to the target
        f.write(b"hello")
    assert open(tmp_path / "written.bin", "rb").read() == b"hello"
    assert fs != make_cache(target, tmp_path) and fs == fs


def test_block_cache_for_uses_settings_and_reuses_instances(target, tmp_path):
    off = load_settings(overrides={"cache.enabled": "false"}, env={}, cwd=tmp_path)
    assert block_cache_for(off.block_cache, target) is target
    default = load_settings(
        overrides={"cache.base-directory": str(tmp_path / "default")}, env={}, cwd=tmp_path
    )
    assert isinstance(
        block_cache_for(default.block_cache, target), BlockCacheFileSystem
    )  # on by default
    on = load_settings(
        overrides={
            "cache.enabled": "true",
            "cache.base-directory": str(tmp_path / "base"),
            "cache.block-size": "64kB",
            "cache.alluxio.max-cache-size": "10MB",
        },
        env={},
        cwd=tmp_path,
    )
    fs = block_cache_for(on.block_cache, target)
    assert isinstance(fs, BlockCacheFileSystem) and fs.enabled
    assert fs.store.directory == str(tmp_path / "base" / "blocks")
    assert fs.block_size == 64 * 1024 and fs.store.max_size == 10 * 1024 * 1024
    assert block_cache_for(on.block_cache, target) is fs
    assert block_cache_for(on.block_cache, RecordingFS()) is not fs


# --- processes ---------------------------------------------------------------------------


def _read_in_process(directory, path, size, seed):
    """A worker process: its own cache instance on the shared directory."""
    fs = BlockCacheFileSystem(LocalFileSystem(), directory, block_size=BS, max_size=1 << 20)
    rng = random.Random(seed)
    with open(path, "rb") as f:
        data = f.read()
    bad = []
    with fs.open(path, "rb", size=size, version="v1") as f:
        for _ in range(150):
            start, n = rng.randrange(size), rng.randrange(1, 4 * BS)
            f.seek(start)
            if f.read(n) != data[start : start + n]:
                bad.append((start, n))
    fs.store.close()
    return bad


def test_processes_reading_the_same_blocks_all_get_right_bytes(source, tmp_path):
    path, data = source
    directory = str(tmp_path / "cache")
    BlockStore(directory, max_size=1 << 20).close()  # the directory exists before the race
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        results = pool.starmap(
            _read_in_process, [(directory, path, len(data), seed % 2) for seed in range(6)]
        )
    assert results == [[]] * 6
    store = BlockStore(directory, max_size=1 << 20)
    assert store.last_recovery["partial_files"] == 0
    for name in store.entries():
        assert store.verify_file(store.path_of(name)), name


# --- an object store as the target ----------------------------------------------------------


@pytest.mark.s3
def test_s3_one_ranged_get_per_run_and_overwrite_detected(s3_endpoint, s3_bucket, tmp_path):
    from raptorx_py.storage.fs import filesystem_for

    data = random.Random(11).randbytes(5 * 4096 + 123)
    s3_endpoint.client().put_object(Bucket=s3_bucket, Key="k.bin", Body=data)
    settings = load_settings(overrides=s3_endpoint.s3_properties(), env={}, cwd=tmp_path)
    s3, path = filesystem_for(f"s3://{s3_bucket}/k.bin", settings)
    etag = s3.info(path)["ETag"].strip('"')
    fs = BlockCacheFileSystem(s3, str(tmp_path / "cache"), block_size=4096)
    s3_endpoint.reset_stats()
    for _ in range(2):  # cold: blocks 1..3 in one ranged GET; warm: no request
        with fs.open(path, "rb", size=len(data), version=etag, etag=etag) as f:
            f.seek(5000)
            assert f.read(10_000) == data[5000:15_000]
    stats = s3_endpoint.stats()
    assert stats["total_requests"] == 1 and stats["requests"]["RANGED_GET"] == 1
    assert stats["bytes"]["RANGED_GET"] == 3 * 4096
    s3_endpoint.client().put_object(Bucket=s3_bucket, Key="k.bin", Body=bytes(len(data)))
    with fs.open(path, "rb", size=len(data), version=etag, etag=etag) as f:
        with pytest.raises(Exception) as failed:  # old identity, new object: refused
            f.read()
    assert type(failed.value).__name__ == "FileExpired"
    # Nothing of the new object cached, and the old one's blocks dropped: the store no
    # longer holds that version.
    assert block_indexes(fs.store) == set()
