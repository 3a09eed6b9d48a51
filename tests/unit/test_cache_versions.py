"""A cached block is never combined with bytes of another version of
its file. A sealed partition's file rewritten with the same size, after a partial eviction
of its blocks, must fail the read by name (and drop the file's blocks), never return a mix.
"""

from __future__ import annotations

import os

import pytest
from fsspec.implementations.local import LocalFileSystem

from raptorx_py.cache.block_cache import BlockCacheFileSystem
from raptorx_py.errors import FileChangedError
from raptorx_py.storage.file_versions import current_identity
from tests.support.counter_deltas import CounterDeltas

BS = 256


def _write(path: str, data: bytes, mtime: float) -> None:
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, (mtime, mtime))


def _listed_version(path: str) -> str:
    """What the planner lists for a local file (``file_versions.current_identity``)."""
    version = current_identity(LocalFileSystem(), path)[1]
    assert version is not None
    return version


def _key_blocks(fs, key):
    return {n for n in fs.store.entries() if n.startswith(key + "-")}


def test_a_same_size_rewrite_after_partial_eviction_is_never_a_torn_read(tmp_path):
    path = str(tmp_path / "part-0.bin")
    old, new = bytes([1]) * (4 * BS), bytes([2]) * (4 * BS)
    _write(path, old, 1_700_000_000.25)
    version = _listed_version(path)
    fs = BlockCacheFileSystem(
        LocalFileSystem(), str(tmp_path / "cache"), block_size=BS, max_size=1 << 20
    )
    with fs.open(path, "rb", size=len(old), version=version) as f:
        assert f.read() == old
    key = fs.block_key(path, len(old), version)
    assert len(_key_blocks(fs, key)) == 4

    _write(path, new, 1_700_000_100.5)  # same size, other bytes, other mtime
    fs.store.evict_to(fs.store.total_bytes() // 2)  # a partial eviction: 2 blocks stay
    assert len(_key_blocks(fs, key)) == 2
    deltas = CounterDeltas()
    # The reader still holds the listed (old) identity, as a sealed partition's cached
    # listing gives it.
    with pytest.raises(FileChangedError, match=r"part-0\.bin.*changed after it was listed"):
        with fs.open(path, "rb", size=len(old), version=version) as f:
            f.read()
    assert _key_blocks(fs, key) == set()  # the old version's blocks are gone with it
    assert deltas["block_cache.version_mismatches"] == 1
    # Listed again, the new version reads whole.
    with fs.open(path, "rb", size=len(new), version=_listed_version(path)) as f:
        assert f.read() == new


def test_a_file_changed_before_its_first_fetch_is_not_cached(tmp_path):
    path = str(tmp_path / "f.bin")
    _write(path, b"a" * (2 * BS), 1_700_000_000.0)
    version = _listed_version(path)
    _write(path, b"b" * (2 * BS), 1_700_000_001.0)
    fs = BlockCacheFileSystem(
        LocalFileSystem(), str(tmp_path / "cache"), block_size=BS, max_size=1 << 20
    )
    with pytest.raises(FileChangedError):
        with fs.open(path, "rb", size=2 * BS, version=version) as f:
            f.read()
    assert fs.store.entries() == {}


@pytest.mark.s3
def test_s3_rewrite_after_partial_eviction_fails_and_drops_the_blocks(
    s3_endpoint, s3_bucket, tmp_path
):
    from raptorx_py.config import load_settings
    from raptorx_py.storage.fs import filesystem_for

    settings = load_settings(overrides=s3_endpoint.s3_properties())
    s3, _ = filesystem_for(f"s3://{s3_bucket}", settings)
    path = f"{s3_bucket}/t/part-0.bin"
    old, new = bytes([1]) * (4 * BS), bytes([2]) * (4 * BS)
    s3.pipe_file(path, old)
    etag = s3.info(path)["ETag"].strip('"')
    fs = BlockCacheFileSystem(s3, str(tmp_path / "cache"), block_size=BS, max_size=1 << 20)
    with fs.open(path, "rb", size=len(old), version=etag, etag=etag) as f:
        assert f.read() == old
    s3.pipe_file(path, new)
    assert s3.info(path)["ETag"].strip('"') != etag
    fs.store.evict_to(fs.store.total_bytes() // 2)
    key = fs.block_key(path, len(old), etag)
    assert len(_key_blocks(fs, key)) == 2
    with pytest.raises(Exception) as raised:
        with fs.open(path, "rb", size=len(old), version=etag, etag=etag) as f:
            data = f.read()
            assert data in (old, new), "a torn read"
    assert not isinstance(raised.value, AssertionError)
    assert _key_blocks(fs, key) == set()


def test_a_cached_footer_is_never_used_with_another_versions_data(tmp_path):
    """Footer cache on, block cache off: a same-size rewrite of a local file must not be
    decoded with the old version's cached footer."""
    import functools

    import pyarrow as pa
    import pyarrow.parquet as pq

    from raptorx_py.cache.footer_cache import FileIdentity, FooterCache
    from raptorx_py.storage.parquet_files import open_parquet

    path = str(tmp_path / "t.parquet")

    def write(values, mtime):
        pq.write_table(
            pa.table({"v": pa.array(values, pa.int64())}),
            path,
            use_dictionary=False,
            compression="none",
        )
        os.utime(path, (mtime, mtime))

    write(list(range(100)), 1_700_000_000.0)
    size, version = os.path.getsize(path), _listed_version(path)
    cache = FooterCache(str(tmp_path / "footers"), max_bytes=1 << 20, ttl=3600)
    ident = FileIdentity(path, size, version)
    fs = LocalFileSystem()
    pf = open_parquet(
        fs, path, size=size, version=version, footer=functools.partial(cache.get_or_load, ident)
    )
    assert sum(pf.read().column("v").to_pylist()) == sum(range(100))
    pf.close()
    write(list(range(1000, 1100)), 1_700_000_050.0)
    assert os.path.getsize(path) == size
    with pytest.raises(FileChangedError, match="changed after it was listed"):
        open_parquet(
            fs, path, size=size, version=version, footer=functools.partial(cache.get_or_load, ident)
        ).read()
