"""Throughput of warm block-cache reads against reading the same file directly.

``python -m benchmarks.block_cache_throughput --size 512MB [--out result.json]`` writes a
file of random bytes, reads it once through a ``BlockCacheFileSystem`` over the local
filesystem (filling the cache) and once directly (warming the page cache), then, for each
read size (1, 2, 4 and 8 MiB by default), reads the whole file sequentially with plain
``open(path, "rb").read(n)`` and with the cached file's ``read(n)``, interleaved and
alternating which goes first, ``--repetitions`` times. It prints the median MB/s of both
and the median ratio of the two passes of each repetition (back to back, so under the same
load from whatever else the machine runs), and writes everything as JSON with ``--out``.
The overall ratio is the median over every read size and repetition.

Both sides read from the page cache, so this measures the cache's own cost (index-free
block lookups, checksum verification, assembly) against the cheapest possible read. The
target is a ratio of at least 0.70. Every warm pass is checked to make no remote request.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import fsspec
import xxhash

from raptorx_py.cache.block_cache import BlockCacheFileSystem
from raptorx_py.config.units import format_data_size, parse_data_size
from raptorx_py.metrics import counters

MIB = 1 << 20
TARGET_RATIO = 0.70


def write_source(path: str, size: int, seed: int = 1) -> str:
    """A file of ``size`` pseudo-random bytes; returns its xxh3-128 hex digest."""
    digest = xxhash.xxh3_128()
    chunk = os.urandom(8 * MIB) if size else b""
    with open(path, "wb") as f:
        written = 0
        while written < size:
            # Vary each chunk cheaply so blocks differ (a repeated chunk would still be read).
            piece = (written.to_bytes(8, "little") + chunk)[: min(8 * MIB, size - written)]
            f.write(piece)
            digest.update(piece)
            written += len(piece)
    return digest.hexdigest()


def read_all(f, read_size: int) -> tuple[int, float]:
    """Read ``f`` to the end in ``read_size`` pieces: (bytes, seconds)."""
    total = 0
    start = time.perf_counter()
    while True:
        data = f.read(read_size)
        if not data:
            break
        total += len(data)
    return total, time.perf_counter() - start


def digest_of(f, read_size: int) -> str:
    digest = xxhash.xxh3_128()
    while data := f.read(read_size):
        digest.update(data)
    return digest.hexdigest()


def run(
    size: int,
    block_size: int,
    read_sizes: list[int],
    repetitions: int,
    directory: str,
    verify_every_read: bool = False,
) -> dict:
    source = os.path.join(directory, "source.bin")
    expected = write_source(source, size)
    local = fsspec.filesystem("file")
    fs = BlockCacheFileSystem(
        local,
        os.path.join(directory, "cache"),
        block_size=block_size,
        max_size=2 * size + 64 * MIB,
        verify_every_read=verify_every_read,
    )
    if not fs.enabled:
        raise SystemExit(f"the block cache in {fs.directory} is disabled; see the warning")
    identity = {"size": size, "version": "bench"}

    # Fill the cache (cold) and the page cache, and check both read the right bytes.
    with fs.open(source, "rb", **identity) as f:
        if digest_of(f, 8 * MIB) != expected:
            raise SystemExit("cached read returned wrong bytes while filling the cache")
    with fs.open(source, "rb", **identity) as f:
        if digest_of(f, 8 * MIB) != expected:
            raise SystemExit("warm cached read returned wrong bytes")
    with open(source, "rb") as f:
        digest_of(f, 8 * MIB)

    results = []
    for read_size in read_sizes:
        direct, cached = [], []
        for rep in range(repetitions):
            order = ("direct", "cached") if rep % 2 == 0 else ("cached", "direct")
            for kind in order:
                before = counters.snapshot().get("block_cache.remote_requests", 0)
                with (
                    open(source, "rb") if kind == "direct" else fs.open(source, "rb", **identity)
                ) as f:
                    nbytes, seconds = read_all(f, read_size)
                if nbytes != size:
                    raise SystemExit(f"{kind} pass read {nbytes} bytes of {size}")
                if counters.snapshot().get("block_cache.remote_requests", 0) != before:
                    raise SystemExit("a warm cached pass went to the target")
                (direct if kind == "direct" else cached).append(size / seconds / 1e6)
        # The two passes of a repetition run back to back, under the same load from
        # whatever else the machine runs: their ratio is steadier than a ratio of medians.
        pair_ratios = [c / d for c, d in zip(cached, direct)]
        results.append(
            {
                "read_size": read_size,
                "direct_mb_per_s": [round(x, 1) for x in direct],
                "cached_mb_per_s": [round(x, 1) for x in cached],
                "direct_median": round(statistics.median(direct), 1),
                "cached_median": round(statistics.median(cached), 1),
                "pair_ratios": [round(x, 3) for x in pair_ratios],
                "ratio": round(statistics.median(pair_ratios), 3),
            }
        )
    fs.store.close()
    overall = round(statistics.median(x for r in results for x in r["pair_ratios"]), 3)
    return {
        "schema_version": 1,
        "command": " ".join(["python -m benchmarks.block_cache_throughput", *sys.argv[1:]]),
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "size": size,
        "block_size": block_size,
        "repetitions": repetitions,
        "verify_every_read": verify_every_read,
        "results": results,
        "ratio": overall,
        "target_ratio": TARGET_RATIO,
        "meets_target": overall >= TARGET_RATIO,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.block_cache_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--size", default="512MB", help="bytes of the test file (512MB)")
    parser.add_argument("--block-size", default="1MB", help="cache block size (1MB)")
    parser.add_argument(
        "--read-sizes",
        default="1MB,2MB,4MB,8MB",
        help="comma-separated sequential read sizes (1MB,2MB,4MB,8MB)",
    )
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument(
        "--verify-every-read",
        action="store_true",
        help="check every block's checksum on every read, not once per process and file",
    )
    parser.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    parser.add_argument("--out", help="write the JSON result here")
    args = parser.parse_args(argv)
    size = parse_data_size(args.size)
    read_sizes = [parse_data_size(s) for s in args.read_sizes.split(",") if s.strip()]
    work = args.dir or tempfile.mkdtemp(prefix="raptorx-block-bench-")
    os.makedirs(work, exist_ok=True)
    try:
        result = run(
            size,
            parse_data_size(args.block_size),
            read_sizes,
            args.repetitions,
            work,
            verify_every_read=args.verify_every_read,
        )
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"block cache throughput, {format_data_size(size)} file, "
        f"{format_data_size(result['block_size'])} blocks, median of {args.repetitions}"
        f"{', checksum on every read' if args.verify_every_read else ''}"
    )
    print(f"{'read size':>10} {'direct MB/s':>12} {'cached MB/s':>12} {'ratio':>6}")
    for r in result["results"]:
        print(
            f"{format_data_size(r['read_size']):>10} {r['direct_median']:>12.0f} "
            f"{r['cached_median']:>12.0f} {r['ratio']:>6.2f}"
        )
    print(
        f"overall median ratio {result['ratio']:.2f} (target >= {TARGET_RATIO:.2f}: "
        f"{'met' if result['meets_target'] else 'NOT met'})"
    )
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
