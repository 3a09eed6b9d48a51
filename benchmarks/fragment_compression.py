"""What compressing the fragment entries' Arrow IPC buffers costs on hits, and what it saves
on disk: none, LZ4 frame and ZSTD (``pa.ipc.IpcWriteOptions(compression=...)``; the JVM reads
both with arrow-compression's ``CommonsCompressionFactory``), in the same run.

``python -m benchmarks.fragment_compression [--rows 120000] [--entries 8] [--repetitions 7]
[--out result.json]`` builds the lineitem-like table of ``benchmarks.fragment_mac`` (ints,
decimals, dates, short strings), stores it ``--entries`` times per codec through
``FragmentCache`` (real entry files: header, HMAC-SHA256, stream), and reports per codec:
- ``entry_bytes``: one entry file's size, and its ratio to the uncompressed entry's;
- ``python_ms_per_hit``: ``FragmentCache.get`` (read, verify, decode to batches), the median
  of ``--repetitions`` passes over the entries, codecs interleaved within each repetition;
- ``jvm_ms_per_hit``: what the native reader does per hit (``fragment_compression/
  FragmentDecode.java``, run with the ``java`` on PATH and pyspark's jars): read, HMAC-SHA256,
  ``ArrowStreamReader`` with ``CommonsCompressionFactory``, every batch loaded;
and each time as a ratio to the uncompressed entry's. Files are in the page cache (a hit on a
node's local disk usually is): the saving is disk space, not read time.

``--spark --scale 0.1`` measures the same through Spark instead: TPC-H ``lineitem`` (local
files, registered sealed) read by ``tiered_hive`` with the fragment result cache on and
aggregation pushdown off (a split's entry is its filtered rows), a query run until every
split is stored (ZSTD, as the workers write), the cache directory copied and every entry in
the copy rewritten uncompressed (the same keys, the same secret); then the query timed over
each directory in turn, ``--repetitions`` times, every split a JVM hit (checked by counts).
Reported: the entries' bytes and the median seconds of each, and their ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

from benchmarks.fragment_mac import lineitem_like
from raptorx_py.cache.fragment_cache import FragmentCache, entry_path

JAVA_SOURCE = Path(__file__).with_name("fragment_compression") / "FragmentDecode.java"
CODECS = ("none", "lz4", "zstd")


SPARK_QUERY = (
    "SELECT count(*), sum(l_extendedprice), max(l_comment), min(l_shipdate) FROM {view} "
    "WHERE l_quantity < 40"
)


def _entry_files(directory: str) -> list[str]:
    return sorted(
        os.path.join(d, f)
        for d, _, files in os.walk(os.path.join(directory, "entries"))
        for f in files
        if f.endswith(".arrow") and not f.startswith(".")
    )


def _rewrite_uncompressed(directory: str) -> None:
    """Every entry under ``directory`` stored again uncompressed, under its own key."""
    import pyarrow as pa

    from raptorx_py.cache.fragment_cache import HEADER_BYTES

    cache = FragmentCache(
        directory,
        max_bytes=2**40,
        max_entries=10**6,
        max_entry_bytes=2**40,
        ttl=None,
        compression=None,
    )
    for path in _entry_files(directory):
        key = bytes.fromhex(os.path.basename(path)[: -len(".arrow")])
        with open(path, "rb") as f:
            stream = f.read()[HEADER_BYTES:]
        with pa.ipc.open_stream(stream) as r:
            assert cache.put(key, r.schema, list(r))
    cache.close()


def spark_main(args: argparse.Namespace) -> dict:
    """``--spark``: see the module's docstring."""
    from devservers.local_metastore import local_metastore_properties, register_table
    from raptorx_py import tiered_session
    from raptorx_py.metrics import MetricsSink, diff, flush
    from raptorx_py.tpch.generate import format_scale, generate_tpch

    work = Path(args.work_dir).resolve()
    data = work / "tpch" / f"sf{format_scale(args.scale)}"
    generate_tpch(args.scale, str(data))
    root = work / "fragment-compression"
    shutil.rmtree(root, ignore_errors=True)
    props = local_metastore_properties(root)
    register_table(props, "fc.lineitem", f"file://{data / 'lineitem'}", sealed=True)
    dirs = {"zstd": str(root / "fragments-zstd"), "none": str(root / "fragments-none")}
    spark = tiered_session(properties=props, app_name="fragment-compression")
    sink = MetricsSink(props["metrics.directory"])

    def view(codec: str) -> str:
        spark.read.format("tiered_hive").option("fragment-result-cache.enabled", "true").option(
            "fragment-result-cache.base-directory", dirs[codec]
        ).option("hive.aggregation-pushdown-enabled", "false").load(
            "fc.lineitem"
        ).createOrReplaceTempView(f"li_{codec}")
        return f"li_{codec}"

    def run(codec: str) -> tuple[float, dict, list]:
        flush(props["metrics.directory"])
        before = sink.totals()
        t0 = time.perf_counter()
        rows = spark.sql(SPARK_QUERY.format(view=f"li_{codec}")).collect()
        seconds = time.perf_counter() - t0
        flush(props["metrics.directory"])
        return seconds, diff(sink.totals(), before), [tuple(r) for r in rows]

    try:
        view("zstd")
        for _ in range(3):  # until every split is stored (AUTO reads a first run with Spark's)
            _, counts, answer = run("zstd")
            if counts.get("fragment_cache.hits", 0) and not counts.get("fragment_cache.misses"):
                break
        shutil.copytree(dirs["zstd"], dirs["none"])
        _rewrite_uncompressed(dirs["none"])
        view("none")
        seconds: dict[str, list[float]] = {c: [] for c in dirs}
        hits: dict[str, float] = {}
        for _ in range(args.repetitions):
            for codec in dirs:
                took, counts, got = run(codec)
                assert got == answer, (codec, got, answer)
                assert not counts.get("fragment_cache.misses"), counts
                seconds[codec].append(took)
                hits[codec] = counts.get("fragment_cache.jvm_hits", 0)
    finally:
        spark.stop()
    size = {c: sum(os.path.getsize(p) for p in _entry_files(d)) for c, d in dirs.items()}
    med = {c: statistics.median(v) for c, v in seconds.items()}
    return {
        "scale": args.scale,
        "query": SPARK_QUERY,
        "jvm_hits_per_run": hits,
        "entries": len(_entry_files(dirs["zstd"])),
        "entry_bytes": size,
        "bytes_ratio": round(size["zstd"] / size["none"], 3),
        "seconds": {c: round(m, 3) for c, m in med.items()},
        "seconds_ratio": round(med["zstd"] / med["none"], 2),
        "runs": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=120_000)
    ap.add_argument("--entries", type=int, default=8)
    ap.add_argument("--repetitions", type=int, default=7)
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--work-dir", default="work-data")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.spark:
        spark_result = spark_main(args)
        spark_result["machine"] = machine()
        print(json.dumps(spark_result, indent=2))
        if args.out:
            Path(args.out).write_text(json.dumps(spark_result, indent=2) + "\n")
        return 0
    table = lineitem_like(args.rows)
    result: dict = {"rows": args.rows, "entries": args.entries, "codecs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        caches, keys = {}, [i.to_bytes(4, "big") * 5 for i in range(args.entries)]
        for codec in CODECS:
            cache = caches[codec] = FragmentCache(
                os.path.join(tmp, codec),
                max_bytes=2**34,
                max_entries=args.entries + 1,
                max_entry_bytes=2**31,
                ttl=None,
                compression=None if codec == "none" else codec,
            )
            for key in keys:
                assert cache.put(key, table.schema, table.to_batches())
        sizes = {c: os.path.getsize(entry_path(caches[c].directory, keys[0])) for c in CODECS}
        python_ms: dict[str, list[float]] = {c: [] for c in CODECS}
        for c in CODECS:  # warm
            for key in keys:
                assert caches[c].get(key) is not None
        for _ in range(args.repetitions):
            for c in CODECS:
                t0 = time.perf_counter()
                for key in keys:
                    batches = caches[c].get(key)
                    assert batches is not None and sum(b.num_rows for b in batches) == args.rows
                python_ms[c].append((time.perf_counter() - t0) * 1000 / len(keys))
        jars = os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")
        jvm = subprocess.run(
            [
                "java",
                "--add-opens=java.base/java.nio=ALL-UNNAMED",
                "-cp",
                jars,
                str(JAVA_SOURCE),
                str(args.repetitions),
                str(len(keys)),
            ]
            + [f"{c}={entry_path(caches[c].directory, keys[0])}" for c in CODECS],
            capture_output=True,
            text=True,
            check=True,
        )
        jvm_ms = json.loads(jvm.stdout.strip().splitlines()[-1])
        for cache in caches.values():
            cache.close()
    py = {c: statistics.median(python_ms[c]) for c in CODECS}
    for c in CODECS:
        result["codecs"][c] = {
            "entry_bytes": sizes[c],
            "bytes_ratio": round(sizes[c] / sizes["none"], 3),
            "python_ms_per_hit": round(py[c], 3),
            "python_ratio": round(py[c] / py["none"], 2),
            "jvm_ms_per_hit": jvm_ms[c],
            "jvm_ratio": round(jvm_ms[c] / jvm_ms["none"], 2),
        }
    result["machine"] = {**machine(), "java": jvm_ms.get("java")}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def machine() -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0],
    }


if __name__ == "__main__":
    sys.exit(main())
