"""Soft affinity on a real Spark standalone cluster: ``make bench-affinity`` /
``python -m benchmarks.cluster_affinity``.

    python -m benchmarks.cluster_affinity --scale 0.1 --out bench-out/affinity \\
        [--queries 1,6] [--workers 2] [--locality-wait 3s] [--work-dir DIR]

What it does, in order:

1. Generates TPC-H at the scale factor (``<work>/tpch/sf<scale>``, reused between runs) and
   loads it into a local warehouse and a SQLite metastore under ``<work>/affinity``.
2. Starts a standalone master and ``--workers`` workers on loopback
   (``devservers.standalone_cluster``), one core each, each worker with its own directory:
   every executor's caches are under its own working directory (a relative
   ``cache.base-directory``), as on machines with their own local disks.
3. For ``SOFT_AFFINITY`` and then ``NO_PREFERENCE`` (``hive.node-selection-strategy``), one
   application (``devservers.cluster_driver``: fresh executors, so empty caches) runs every
   query twice: a cold pass that fills the caches, then the warm pass that is measured.
4. Checks every warm result against DuckDB on the same files, and writes
   ``<out>/results.json`` and ``<out>/results.md``: per strategy, seconds per query, and per
   executor the tasks run on their preferred executor and on a fallback, and the block and
   footer caches' hit ratios.

The cluster is stopped whatever happens. Exit status 0 when both strategies ran and every
result equals DuckDB's, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import pickle
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from devservers.local_metastore import CLUSTER_TPCH_DATABASE, load_cluster_tpch

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = ("SOFT_AFFINITY", "NO_PREFERENCE")
DRIVER_TIMEOUT_S = 3600


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.cluster_affinity", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    p.add_argument("--queries", default="", help="comma-separated query numbers (default: all 22)")
    p.add_argument("--workers", type=int, default=2, help="standalone workers (default 2)")
    p.add_argument(
        "--locality-wait",
        default="3s",
        help="spark.locality.wait: how long Spark waits for a task's preferred executor "
        "(default 3s, Spark's own default)",
    )
    p.add_argument(
        "--cache-share",
        type=float,
        default=0.65,
        help="each executor's cache size (cache.alluxio.max-cache-size) as a share of the "
        "table data's bytes (default 0.65: room for the half of the files an executor owns "
        "under soft affinity, not for all of them); 0: the property's default",
    )
    p.add_argument("--out", default="bench-out/affinity", help="report directory")
    p.add_argument("--work-dir", default=None, help="generated data (default: work-data/)")
    return p.parse_args(argv)


def load(scale: float, work: Path) -> tuple[dict[str, str], str]:
    """TPC-H loaded into a fresh metastore under ``work/affinity``; its properties and the
    generated data's directory (for DuckDB)."""
    props = load_cluster_tpch(scale, work / "affinity", work_dir=str(work / "tpch"))
    return props, str(work / "tpch" / f"sf{scale:g}")


def data_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def executor_dirs(cluster) -> set[Path]:
    """The working directories of every executor the cluster's workers ever started
    (``<worker dir>/<app id>/<executor id>``)."""
    return {p for p in cluster.root.glob("worker*/app-*/*") if p.is_dir()}


def run_strategy(
    cluster,
    props: dict[str, str],
    strategy: str,
    args,
    queries: list[int],
    out: Path,
    cache_size: int | None,
) -> tuple[dict[str, Any], dict[str, int]]:
    """One application on the cluster: a cold pass, then the measured warm pass; its passes
    and the bytes each of its executors holds in its caches afterwards."""
    result_file = out / f"{strategy.lower()}.pickle"
    before = executor_dirs(cluster)
    spec = {
        "master": cluster.master_url,
        "executors": args.workers,
        "properties": props,
        "options": {
            "hive.node-selection-strategy": strategy,
            "cache.enabled": "true",
            "hive.parquet.metadata-cache-enabled": "true",
            # Relative: each executor's own working directory, so its own caches.
            "cache.base-directory": "raptorx-cache",
            **({"cache.alluxio.max-cache-size": f"{cache_size}B"} if cache_size else {}),
        },
        "spark_conf": {
            "spark.locality.wait": args.locality_wait,
            "spark.sql.shuffle.partitions": str(2 * args.workers),
        },
        "tpch": {
            "database": CLUSTER_TPCH_DATABASE,
            "scale": args.scale,
            "queries": queries,
            "passes": ["cold", "warm"],
            "out": str(result_file),
        },
    }
    print(f"{strategy}: cold pass, then warm pass over {len(queries)} queries", flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "devservers.cluster_driver", json.dumps(spec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{strategy}: the driver failed:\n{done.stderr[-4000:]}")
    with open(result_file, "rb") as f:
        passes = pickle.load(f)["passes"]
    cached = {
        f"executor {d.name}": data_bytes(d / "raptorx-cache")
        for d in sorted(executor_dirs(cluster) - before)
        if (d / "raptorx-cache").is_dir()
    }
    return passes, cached


def ratio(hits: int, total: int) -> float | None:
    return hits / total if total else None


def executor_figures(counters: dict[str, int]) -> dict[str, Any]:
    """Placement and cache figures of one process's (or all processes') counters."""
    preferred = counters.get("affinity.preferred", 0)
    fallback = counters.get("affinity.fallback", 0)
    block_hits, block_misses = (
        counters.get("block_cache.hits", 0),
        counters.get("block_cache.misses", 0),
    )
    footer_hits = counters.get("footer_cache.hits_memory", 0) + counters.get(
        "footer_cache.hits_disk", 0
    )
    footer_misses = counters.get("footer_cache.misses", 0)
    return {
        "tasks_preferred": preferred,
        "tasks_fallback": fallback,
        "preferred_share": ratio(preferred, preferred + fallback),
        "block_hits": block_hits,
        "block_misses": block_misses,
        "block_hit_ratio": ratio(block_hits, block_hits + block_misses),
        "footer_hits": footer_hits,
        "footer_misses": footer_misses,
        "footer_hit_ratio": ratio(footer_hits, footer_hits + footer_misses),
        "rows_read": counters.get("reader.rows_read", 0),
    }


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def report(results: dict[str, Any], out: Path) -> str:
    lines = [
        "# Soft affinity on a standalone cluster",
        "",
        f"- Command: `{results['command']}`",
        f"- Machine: {results['machine']}",
        f"- Started {results['started']}, {results['workers']} workers × 1 core on loopback, "
        f"TPC-H SF {results['scale']:g}, spark.locality.wait={results['locality_wait']}",
        f"- Table data: {results['data_bytes'] / 2**20:.1f} MiB; each executor's cache "
        f"limit: {results['cache_limit']}",
        f"- Results equal DuckDB's: {results['equal_duckdb']}",
        "",
        "## Warm pass, all executors",
        "",
        "| strategy | warm s (sum) | tasks on preferred / fallback | preferred share | "
        "block cache hits / misses | block hit ratio | footer hit ratio | cached MiB per "
        "executor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s, r in results["strategies"].items():
        f = r["warm_total"]
        cached = " + ".join(f"{b / 2**20:.1f}" for _, b in sorted(r["cached_bytes"].items()))
        lines.append(
            f"| {s} | {r['warm_seconds']:.2f} | {f['tasks_preferred']} / {f['tasks_fallback']} | "
            f"{pct(f['preferred_share'])} | {f['block_hits']} / {f['block_misses']} | "
            f"{pct(f['block_hit_ratio'])} | {pct(f['footer_hit_ratio'])} | {cached or '–'} |"
        )
    for s, r in results["strategies"].items():
        lines += [
            "",
            f"## {s}: warm pass per executor",
            "",
            "| process | tasks on preferred / fallback | block cache hits / misses | "
            "block hit ratio | footer hits / misses | footer hit ratio | rows read |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for source, f in sorted(r["warm_by_source"].items()):
            lines.append(
                f"| {source} | {f['tasks_preferred']} / {f['tasks_fallback']} | "
                f"{f['block_hits']} / {f['block_misses']} | {pct(f['block_hit_ratio'])} | "
                f"{f['footer_hits']} / {f['footer_misses']} | {pct(f['footer_hit_ratio'])} | "
                f"{f['rows_read']} |"
            )
    lines += ["", "## Seconds per query (warm pass)", ""]
    names = list(results["strategies"])
    lines.append("| query | " + " | ".join(names) + " |")
    lines.append("|---|" + "---:|" * len(names))
    for q in results["queries"]:
        cells = [f"{results['strategies'][s]['warm_query_seconds'][str(q)]:.3f}" for s in names]
        lines.append(f"| Q{q} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    return text


def main(argv: list[str] | None = None) -> int:
    from devservers.standalone_cluster import StandaloneCluster
    from raptorx_py.tpch import oracle, queries

    args = parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or ROOT / "work-data").resolve()
    numbers = (
        [int(q) for q in args.queries.split(",") if q] if args.queries else queries.QUERY_NUMBERS
    )
    numbers = list(numbers)
    results: dict[str, Any] = {
        "command": "python -m benchmarks.cluster_affinity " + shlex.join(argv or sys.argv[1:]),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "started": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "scale": args.scale,
        "workers": args.workers,
        "locality_wait": args.locality_wait,
        "queries": numbers,
        "strategies": {},
    }
    print(f"loading TPC-H SF {args.scale:g} under {work}", flush=True)
    props, data_dir = load(args.scale, work)
    results["data_bytes"] = data_bytes(work / "affinity" / "warehouse")
    cache_size = int(args.cache_share * results["data_bytes"]) if args.cache_share > 0 else None
    results["cache_limit"] = (
        f"{cache_size / 2**20:.1f} MiB ({args.cache_share:g} of the data)"
        if cache_size
        else "the default (cache.alluxio.max-cache-size)"
    )
    passes, cached = {}, {}
    cluster = StandaloneCluster(work / "affinity" / "cluster", workers=args.workers)
    try:
        cluster.start()
        for strategy in STRATEGIES:
            passes[strategy], cached[strategy] = run_strategy(
                cluster, props, strategy, args, numbers, out, cache_size
            )
    finally:
        cluster.stop()
    expected = oracle.duckdb_results(data_dir, numbers, args.scale, threads=2)
    wrong = []
    for strategy, p in passes.items():
        warm = p["warm"]
        for n in numbers:
            diff = oracle.compare_results(
                expected[n],
                warm["rows"][n],
                ordered=queries.ordered(n),
                sort_key=queries.ORDER_BY_COLUMNS[n],
            )
            if diff is not None:
                wrong.append(f"{strategy} Q{n}: {diff}")
        results["strategies"][strategy] = {
            "warm_seconds": sum(warm["seconds"].values()),
            "cold_seconds": sum(p["cold"]["seconds"].values()),
            "warm_query_seconds": {str(n): s for n, s in warm["seconds"].items()},
            "warm_total": executor_figures(warm["counters"]),
            "warm_by_source": {s: executor_figures(c) for s, c in warm["by_source"].items()},
            "cold_total": executor_figures(p["cold"]["counters"]),
            "cached_bytes": cached[strategy],
        }
    results["equal_duckdb"] = "yes, every query" if not wrong else "NO: " + "; ".join(wrong)
    print(report(results, out))
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
