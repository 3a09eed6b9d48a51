"""Stress: several processes read overlapping ranges of several files through one cache
directory whose small capacity forces eviction all the time; every read is verified, and
at the end the index and the disk agree and every block file verifies."""

from __future__ import annotations

import multiprocessing
import os
import random

import pytest
from fsspec.implementations.local import LocalFileSystem

from raptorx_py.cache.block_cache import BlockCacheFileSystem
from raptorx_py.cache.block_store import BlockStore
from raptorx_py.metrics import counters

pytestmark = pytest.mark.stress

BLOCK = 4096
PROCESSES = 4
READS_PER_PROCESS = 1500


def _worker(directory: str, files: dict[str, int], max_size: int, seed: int) -> dict:
    counters.drain()  # what the parent or an earlier task counted is not ours
    fs = BlockCacheFileSystem(LocalFileSystem(), directory, block_size=BLOCK, max_size=max_size)
    rng = random.Random(seed)
    sources = {path: open(path, "rb").read() for path in files}
    paths = sorted(files)
    bad = []
    for _ in range(READS_PER_PROCESS):
        path = rng.choice(paths)
        data = sources[path]
        # Overlapping hot ranges: most reads start in the first quarter of a file.
        start = rng.randrange(len(data) // 4 if rng.random() < 0.7 else len(data))
        n = rng.randrange(1, 12 * BLOCK)
        with fs.open(path, "rb", size=len(data), version="v1") as f:
            f.seek(start)
            if f.read(n) != data[start : start + n]:
                bad.append((path, start, n))
    fs.store.close()
    return {"bad": bad, "counters": counters.drain()}


def test_processes_under_eviction_always_read_right_bytes(tmp_path):
    rng = random.Random(7)
    files = {}
    for i in range(4):
        path = str(tmp_path / f"file{i}.bin")
        size = rng.randrange(200, 400) * BLOCK + rng.randrange(BLOCK)
        with open(path, "wb") as f:
            f.write(rng.randbytes(size))
        files[path] = size
    directory = str(tmp_path / "cache")
    max_size = 64 * (BLOCK + 24)  # far less than the ~1200 blocks read
    BlockStore(directory, max_size=max_size).close()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(PROCESSES) as pool:
        results = pool.starmap(
            _worker, [(directory, files, max_size, seed) for seed in range(PROCESSES * 2)]
        )
    assert [r["bad"] for r in results] == [[]] * (PROCESSES * 2)
    evictions = sum(r["counters"].get("block_cache.evictions", 0) for r in results)
    hits = sum(r["counters"].get("block_cache.hits", 0) for r in results)
    assert evictions > 0 and hits > 0
    store = BlockStore(directory, max_size=max_size)
    recovery = store.last_recovery
    assert recovery["partial_files"] == 0 and recovery["adopted"] == 0
    assert recovery["orphan_temps"] == 0
    assert store.total_bytes() <= max_size
    assert store.total_bytes() == sum(store.entries().values())
    for name in store.entries():
        assert store.verify_file(store.path_of(name)), name
    assert os.listdir(store.tmp_dir) == []
