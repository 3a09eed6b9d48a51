"""Cache files are private by default (0700 directories, 0600
files, whatever the umask; ``cache.group-shared`` for a group), a block whose plain checksum
was recomputed (or a valid block copied under another name) is rejected, counted, deleted
and read again from the store, and a cache fault names the cache file."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from raptorx_py.cache import block_store
from raptorx_py.cache.block_cache import BlockCacheFileSystem
from raptorx_py.cache.block_store import FORMAT_VERSION, MAGIC, TRAILER
from raptorx_py.cache.footer_cache import FileIdentity, FooterCache
from tests.support.counter_deltas import CounterDeltas

BS = 256


@pytest.fixture
def wide_umask():
    old = os.umask(0o022)  # the usual default, which made 0644 files and 0755 directories
    try:
        yield
    finally:
        os.umask(old)


def _source(tmp_path, n=4 * BS):
    path = str(tmp_path / "data.bin")
    data = bytes(range(256)) * (n // 256)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return path, data


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _all_under(root):
    for d, _dirs, files in os.walk(root):
        yield d, True
        for f in files:
            yield os.path.join(d, f), False


def _read(fs, path, data):
    with fs.open(path, "rb", size=len(data), version="v1") as f:
        return f.read()


def _footer_cache_with_entry(tmp_path, **kwargs):
    fpath = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"x": [1, 2, 3]}), fpath)
    cache = FooterCache(str(tmp_path / "cache" / "footers"), max_bytes=1 << 20, ttl=3600, **kwargs)
    ident = FileIdentity(fpath, os.path.getsize(fpath), "mtime:1.0")
    cache.get_or_load(ident, lambda: pq.read_metadata(fpath))
    return cache, ident, fpath


def test_cache_directories_and_files_are_private_by_default(tmp_path, wide_umask):
    path, data = _source(tmp_path)
    fs = BlockCacheFileSystem(LocalFileSystem(), str(tmp_path / "cache" / "blocks"), block_size=BS)
    assert _read(fs, path, data) == data
    fs.store.flush_touches()
    _footer_cache_with_entry(tmp_path)
    seen = {"dir": 0, "file": 0}
    for p, is_dir in _all_under(str(tmp_path / "cache")):
        if p == str(tmp_path / "cache"):
            continue  # made by make_dirs too, but the test's own parent is not asserted
        assert _mode(p) == (0o700 if is_dir else 0o600), (p, oct(_mode(p)))
        seen["dir" if is_dir else "file"] += 1
    assert seen["file"] >= 4 + 1 + 2 and seen["dir"] >= 4  # blocks, index, secrets, footer


def test_group_shared_cache_is_group_readable_and_writable(tmp_path, wide_umask):
    path, data = _source(tmp_path)
    root = str(tmp_path / "cache" / "blocks")
    fs = BlockCacheFileSystem(LocalFileSystem(), root, block_size=BS, group_shared=True)
    assert _read(fs, path, data) == data
    for p, is_dir in _all_under(root):
        assert _mode(p) == (0o2770 if is_dir else 0o660), (p, oct(_mode(p)))


def test_an_existing_world_readable_cache_directory_is_narrowed(tmp_path, wide_umask):
    root = str(tmp_path / "blocks")
    os.makedirs(os.path.join(root, "data"), mode=0o755)
    BlockCacheFileSystem(LocalFileSystem(), root, block_size=BS)
    assert _mode(root) == 0o700 and _mode(os.path.join(root, "data")) == 0o700


def test_a_block_with_a_recomputed_plain_checksum_is_rejected(tmp_path):
    path, data = _source(tmp_path)
    fs = BlockCacheFileSystem(LocalFileSystem(), str(tmp_path / "cache"), block_size=BS)
    assert _read(fs, path, data) == data
    block = fs.store.path_of(f"{fs.block_key(path, len(data), 'v1')}-1")
    forged = b"\xee" * BS
    # What someone who can write the cache but not read its secret can do: new bytes with
    # the unkeyed checksum the trailer used to hold, as a new file (so it is verified again).
    with open(block + ".x", "wb") as f:
        f.write(forged + TRAILER.pack(MAGIC, FORMAT_VERSION, BS, hashlib.sha256(forged).digest()))
    os.replace(block + ".x", block)
    deltas = CounterDeltas()
    assert _read(fs, path, data) == data  # the right bytes, from the store
    assert deltas["block_cache.corrupt_blocks"] == 1
    assert deltas["block_cache.misses"] == 1
    assert open(block, "rb").read()[:BS] == data[BS : 2 * BS]  # deleted, then stored again


def test_a_valid_block_copied_under_another_name_is_rejected(tmp_path):
    path, data = _source(tmp_path)
    fs = BlockCacheFileSystem(LocalFileSystem(), str(tmp_path / "cache"), block_size=BS)
    assert _read(fs, path, data) == data
    key = fs.block_key(path, len(data), "v1")
    b0, b2 = fs.store.path_of(f"{key}-0"), fs.store.path_of(f"{key}-2")
    with open(b0, "rb") as src, open(b2 + ".x", "wb") as f:
        f.write(src.read())
    os.replace(b2 + ".x", b2)
    deltas = CounterDeltas()
    assert _read(fs, path, data) == data
    assert deltas["block_cache.corrupt_blocks"] == 1


def test_a_footer_entry_with_a_recomputed_plain_checksum_is_rejected(tmp_path):
    from raptorx_py.cache import footer_cache as fc

    cache, ident, fpath = _footer_cache_with_entry(tmp_path)
    entry = cache.path_of(ident)
    raw = open(entry, "rb").read()
    body = raw[: -fc._TRAILER.size]
    with open(entry, "wb") as f:
        f.write(body + fc._TRAILER.pack(hashlib.sha256(body).digest()))
    cache.clear_memory()
    deltas = CounterDeltas()
    md = cache.get_or_load(ident, lambda: pq.read_metadata(fpath))
    assert md.num_rows == 3
    assert deltas["footer_cache.corrupt_entries"] == 1


def test_a_full_cache_disk_names_the_cache_path_and_the_read_succeeds(
    tmp_path, monkeypatch, caplog
):
    path, data = _source(tmp_path)
    root = str(tmp_path / "cache")
    fs = BlockCacheFileSystem(LocalFileSystem(), root, block_size=BS)
    real_open = open

    def full(file, mode="r", *args, **kwargs):
        if "x" in mode:
            f = real_open(file, mode, *args, **kwargs)
            f.close()
            raise OSError(errno.ENOSPC, "No space left on device")  # as write() raises it
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(block_store, "open", full, raising=False)
    deltas = CounterDeltas()
    with caplog.at_level(logging.WARNING, logger="raptorx_py.cache.block_store"):
        assert _read(fs, path, data) == data
    assert deltas["block_cache.put_errors"] == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings  # the first fault; the rest are counted
    assert "No space left on device" in warnings[0]
    assert os.path.join(root, "tmp") in warnings[0]  # the cache file it could not write
    assert "No space left on device" in fs.store.last_fault
