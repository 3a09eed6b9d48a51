"""Seeded fuzz test of the block cache file: thousands of random reads, seeks, tail reads
and readintos across block boundaries and past EOF, compared byte for byte with the source,
while a small capacity evicts and blocks are damaged now and then."""

from __future__ import annotations

import io
import os
import random

import pytest
from fsspec.implementations.local import LocalFileSystem

from raptorx_py.cache.block_cache import BlockCacheFileSystem
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock

SEED = 20261122


def _sizes(block_size: int) -> list[int]:
    return [0, 1, block_size - 1, block_size, block_size + 1, 3 * block_size, 7 * block_size + 13]


def _damage_one(fs: BlockCacheFileSystem, rng: random.Random, path: str, size: int) -> str:
    """Damage one block file of ``path`` if cached: flip a byte, truncate it, or delete it.
    The block is chosen by index (not by file name, which depends on tmp_path), so a seed
    replays the same run."""
    if size == 0:
        return "none"
    index = rng.randrange((size + fs.block_size - 1) // fs.block_size)
    block = fs.store.path_of(f"{fs.block_key(path, size, 'v1')}-{index}")
    kind = rng.choice(["flip", "truncate", "delete"])
    try:
        raw = bytearray(open(block, "rb").read())
        if kind == "flip" and raw:
            raw[rng.randrange(len(raw))] ^= 0x5A
            with open(block + ".x", "wb") as f:
                f.write(raw)
            os.replace(block + ".x", block)  # a new file, so it is verified again
        elif kind == "truncate":
            os.truncate(block, len(raw) // 2)
        else:
            os.unlink(block)
    except FileNotFoundError:
        return "none"
    return kind


@pytest.mark.parametrize("block_size", [64, 100, 4096])
def test_random_reads_match_the_source(tmp_path, block_size):
    rng = random.Random(SEED + block_size)
    sources = {}
    for size in _sizes(block_size):
        path = str(tmp_path / f"f{size}.bin")
        data = rng.randbytes(size)
        with open(path, "wb") as f:
            f.write(data)
        sources[path] = data
    total = sum(len(d) for d in sources.values())
    # Room for about a third of the bytes: eviction runs all the time.
    fs = BlockCacheFileSystem(
        LocalFileSystem(),
        str(tmp_path / "cache"),
        block_size=block_size,
        max_size=max(total // 3, 4 * block_size),
        # A deterministic clock (1, 2, 3, ...): LRU order, hence the run, repeats.
        clock=FakeClock(0.0, step=1.0),
    )
    counted = CounterDeltas()
    operations = 0
    for _round in range(20):
        path = rng.choice(sorted(sources))
        data = sources[path]
        size = len(data)
        with fs.open(path, "rb", size=size, version="v1") as f:
            model = io.BytesIO(data)
            for _ in range(250):
                op = rng.random()
                if op < 0.35:
                    target = rng.choice(
                        [
                            rng.randrange(size + 2 * block_size + 1),
                            rng.randrange(max(1, size // block_size) + 2) * block_size
                            + rng.choice([-1, 0, 1]),
                        ]
                    )
                    target = max(0, target)
                    assert f.seek(target) == model.seek(target)
                elif op < 0.45:
                    back = -rng.randrange(min(size, 3 * block_size) + 1)
                    assert f.seek(back, io.SEEK_END) == model.seek(back, io.SEEK_END)
                elif op < 0.5:
                    delta = rng.randrange(-block_size, block_size)
                    if model.tell() + delta >= 0:
                        assert f.seek(delta, io.SEEK_CUR) == model.seek(delta, io.SEEK_CUR)
                elif op < 0.85:
                    n = rng.choice(
                        [-1, 0, 1, rng.randrange(1, 3 * block_size), block_size, 2 * block_size + 1]
                    )
                    assert f.read(n) == model.read(n), (path, model.tell(), n)
                elif op < 0.97:
                    buf = bytearray(rng.randrange(0, 3 * block_size))
                    expected = model.read(len(buf))
                    assert f.readinto(buf) == len(expected)
                    assert bytes(buf[: len(expected)]) == expected
                else:
                    _damage_one(fs, rng, path, size)
                assert f.tell() == model.tell()
                operations += 1
    delta = counted.delta
    assert operations == 20 * 250
    assert delta.get("block_cache.hits", 0) > 0 and delta.get("block_cache.misses", 0) > 0
    assert delta.get("block_cache.evictions", 0) > 0
    assert delta.get("block_cache.corrupt_blocks", 0) > 0  # damage was met, and survived
    assert fs.store.total_bytes() <= fs.store.max_size
    assert fs.store.total_bytes() == sum(fs.store.entries().values())
