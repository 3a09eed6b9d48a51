"""Soft affinity on a real Spark standalone cluster, over local files and over the remote
store: ``make bench-affinity`` / ``python -m benchmarks.cluster_affinity``.

    python -m benchmarks.cluster_affinity --scale 0.1 --out bench-out/affinity \\
        [--queries 1,6] [--workers 2] [--locality-wait 3s] [--stores local,s3] \\
        [--cache-shares 0.65,all] [--latency-ms 20] [--max-split-imbalance 0] \\
        [--strategies SOFT_AFFINITY,NO_PREFERENCE] [--no-fragment-cache] [--work-dir DIR]

What it does, in order:

1. Generates TPC-H at the scale factor (``<work>/tpch/sf<scale>``, reused between runs) and
   loads it into a local warehouse and a SQLite metastore under ``<work>/affinity``; with
   ``s3`` among ``--stores``, also starts the emulated S3 endpoint
   (``devservers.s3_endpoint``, as ``benchmarks/tpch_suite.py`` does), loads the same data
   into it with the latency off, then sets ``--latency-ms`` per request (20 by default).
2. Starts a standalone master and ``--workers`` workers on loopback
   (``devservers.standalone_cluster``), one core each, each worker its own host
   (``127.0.0.<i+1>``) and directory: the block, footer and fragment caches of a node are
   under ``<worker dir>/<app id>/`` (``NODE_CACHE``), shared by the worker's executors, as
   on machines with their own local disks.
3. For each store, each cache size (``--cache-shares``: each node's block cache limit as a
   share of the table data, ``all`` for a limit that holds everything) and each strategy
   (``SOFT_AFFINITY``, then ``NO_PREFERENCE``), one application
   (``devservers.cluster_driver``: fresh executors, empty caches) runs every query twice: a
   cold pass that fills the caches, then the warm pass that is measured.
4. Checks every warm result against DuckDB on the same files, and writes
   ``<out>/results.json`` and ``<out>/results.md``: per store, cache size and strategy the
   warm seconds, the remote store's requests and bytes (counted by the endpoint; over local
   files the block cache's fetches), and per executor the tasks run on their preferred
   executor, another executor of its host and another host, the block, footer and fragment
   caches' hits and misses, and the MiB each node cached.

The cluster and the endpoint are stopped whatever happens. Exit status 0 when every
application ran and every result equals DuckDB's, 1 otherwise.
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

from devservers.local_metastore import (
    CLUSTER_TPCH_DATABASE,
    load_cluster_tpch,
    local_metastore_properties,
)

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = ("SOFT_AFFINITY", "NO_PREFERENCE")
STORES = ("local", "s3")
DRIVER_TIMEOUT_S = 3600
BUCKET = "raptorx-affinity"
#: The node's fragment result cache, beside its block cache (``NODE_CACHE``).
NODE_FRAGMENTS = "../raptorx-fragments"
#: A cache share meaning "a limit that holds everything".
ALL = "all"


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
        "--stores",
        default=",".join(STORES),
        help="where the table data is: local (files), s3 (the emulated S3 endpoint); default both",
    )
    p.add_argument(
        "--latency-ms",
        type=float,
        default=20.0,
        help="the S3 endpoint's emulated latency per request (default 20, as the TPC-H suite)",
    )
    p.add_argument(
        "--cache-shares",
        default=f"0.65,{ALL}",
        help="each node's block cache limit (cache.alluxio.max-cache-size) as a share of "
        "the table data's bytes, comma-separated; 'all': a limit that holds everything "
        "(default 0.65,all: 0.65 leaves room for the files a node owns under soft affinity, "
        "not for all of them)",
    )
    p.add_argument(
        "--max-split-imbalance",
        type=int,
        default=0,
        help="hive.soft-affinity.max-split-imbalance for SOFT_AFFINITY (default 0: none)",
    )
    p.add_argument(
        "--strategies",
        default=",".join(STRATEGIES),
        help="hive.node-selection-strategy values to run, in order (default: "
        f"{','.join(STRATEGIES)})",
    )
    p.add_argument(
        "--no-fragment-cache",
        action="store_true",
        help="leave the fragment result cache off (default: on, in each node's directory)",
    )
    p.add_argument("--out", default="bench-out/affinity", help="report directory")
    p.add_argument("--work-dir", default=None, help="generated data (default: work-data/)")
    args = p.parse_args(argv)
    args.strategy_list = [s for s in args.strategies.split(",") if s]
    if not args.strategy_list or not set(args.strategy_list) <= set(STRATEGIES):
        p.error(f"--strategies: {args.strategies!r}; expected some of {', '.join(STRATEGIES)}")
    args.store_list = [s for s in args.stores.split(",") if s]
    bad = [s for s in args.store_list if s not in STORES]
    if bad or not args.store_list:
        p.error(f"--stores: {bad or 'none'}; expected some of {', '.join(STORES)}")
    args.share_list = []
    for item in (s for s in args.cache_shares.split(",") if s):
        if item == ALL:
            args.share_list.append(ALL)
            continue
        try:
            share = float(item)
        except ValueError:
            p.error(f"--cache-shares: {item!r} is neither a number nor '{ALL}'")
        if share <= 0:
            p.error(f"--cache-shares: {item} must be above 0 (or '{ALL}')")
        args.share_list.append(share)
    if not args.share_list:
        p.error("--cache-shares: none given")
    return args


def load_local(scale: float, work: Path) -> dict[str, str]:
    """TPC-H loaded into a fresh metastore under ``work/affinity``; its properties."""
    return load_cluster_tpch(scale, work / "affinity", work_dir=str(work / "tpch"))


def load_s3(scale: float, work: Path, endpoint) -> dict[str, str]:
    """TPC-H loaded into ``s3://BUCKET/warehouse`` on ``endpoint`` and registered in a fresh
    metastore under ``work/affinity-s3``; its properties (the endpoint's included)."""
    from raptorx_py.config import load_settings
    from raptorx_py.tpch.load import load_tpch

    root = work / "affinity-s3"
    root.mkdir(parents=True, exist_ok=True)
    (root / "metastore.db").unlink(missing_ok=True)
    endpoint.create_bucket(BUCKET)
    warehouse = f"s3://{BUCKET}/warehouse"
    props = {
        **local_metastore_properties(root),
        **endpoint.s3_properties(),
        "hive.metastore.warehouse.dir": warehouse,
    }
    load_tpch(
        scale,
        warehouse,
        load_settings(overrides=props),
        database=CLUSTER_TPCH_DATABASE,
        work_dir=str(work / "tpch"),
        progress=False,
    )
    return props


def data_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def app_dirs(cluster) -> set[Path]:
    """The application directories on every worker (``<worker dir>/<app id>``)."""
    return {p for p in cluster.root.glob("worker*/app-*") if p.is_dir()}


def node_cached_bytes(app: Path) -> int:
    """Bytes a node holds for one application: its block/footer and fragment caches."""
    return sum(
        data_bytes(d) for d in (app / "raptorx-cache", app / "raptorx-fragments") if d.is_dir()
    )


def run_one(
    cluster,
    props: dict[str, str],
    strategy: str,
    args,
    queries: list[int],
    result_file: Path,
    cache_size: int,
    store_stats: str | None,
) -> tuple[dict[str, Any], dict[str, int]]:
    """One application on the cluster: a cold pass, then the measured warm pass; its passes
    and the bytes each node holds in its caches afterwards."""
    from devservers.standalone_cluster import NODE_CACHE

    before = app_dirs(cluster)
    options = {
        "hive.node-selection-strategy": strategy,
        "cache.enabled": "true",
        "hive.parquet.metadata-cache-enabled": "true",
        # Relative: the node's directory (shared by the worker's executors).
        "cache.base-directory": NODE_CACHE,
        "cache.alluxio.max-cache-size": f"{cache_size}B",
        # The driver's tiers, as the TPC-H suite's warm configurations keep them: without
        # them every scan LISTs its partitions and asks the metastore again, the same for
        # both strategies.
        "hive.metastore-cache-ttl": "1h",
        "hive.file-status-cache-tables": "*",
    }
    if strategy == "SOFT_AFFINITY" and args.max_split_imbalance:
        options["hive.soft-affinity.max-split-imbalance"] = str(args.max_split_imbalance)
    if not args.no_fragment_cache:
        options["fragment-result-cache.enabled"] = "true"
        options["fragment-result-cache.base-directory"] = NODE_FRAGMENTS
    spec = {
        "master": cluster.master_url,
        "executors": args.workers,
        "properties": props,
        "options": options,
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
            **({"store_stats": store_stats} if store_stats else {}),
        },
    }
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
        f"node {app.parent.name}": node_cached_bytes(app)
        for app in sorted(app_dirs(cluster) - before)
    }
    return passes, cached


def ratio(hits: int, total: int) -> float | None:
    return hits / total if total else None


def executor_figures(counters: dict[str, int]) -> dict[str, Any]:
    """Placement and cache figures of one process's (or all processes') counters."""
    preferred = counters.get("affinity.preferred", 0)
    preferred_host = counters.get("affinity.preferred_host", 0)
    fallback = counters.get("affinity.fallback", 0)
    block_hits, block_misses = (
        counters.get("block_cache.hits", 0),
        counters.get("block_cache.misses", 0),
    )
    footer_hits = counters.get("footer_cache.hits_memory", 0) + counters.get(
        "footer_cache.hits_disk", 0
    )
    footer_misses = counters.get("footer_cache.misses", 0)
    fragment_hits = counters.get("fragment_cache.hits", 0)
    fragment_misses = counters.get("fragment_cache.misses", 0)
    placed = preferred + preferred_host + fallback
    return {
        "tasks_preferred": preferred,
        "tasks_preferred_host": preferred_host,
        "tasks_fallback": fallback,
        "preferred_share": ratio(preferred + preferred_host, placed),
        "block_hits": block_hits,
        "block_misses": block_misses,
        "block_hit_ratio": ratio(block_hits, block_hits + block_misses),
        "footer_hits": footer_hits,
        "footer_misses": footer_misses,
        "footer_hit_ratio": ratio(footer_hits, footer_hits + footer_misses),
        "fragment_hits": fragment_hits,
        "fragment_misses": fragment_misses,
        "fragment_hit_ratio": ratio(fragment_hits, fragment_hits + fragment_misses),
        "remote_requests": counters.get("block_cache.remote_requests", 0),
        "remote_bytes": counters.get("block_cache.bytes_from_remote", 0),
        "python_tasks": counters.get("reader.python_tasks", 0),
        "rows_read": counters.get("reader.rows_read", 0),
    }


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def report(results: dict[str, Any], out: Path) -> str:
    lines = [
        "# Soft affinity on a standalone cluster",
        "",
        f"- Command: `{results['command']}`",
        f"- Machine: {results['machine']}",
        f"- Started {results['started']}, {results['workers']} workers × 1 core on loopback "
        f"(each its own host), TPC-H SF {results['scale']:g}, "
        f"spark.locality.wait={results['locality_wait']}, "
        f"hive.soft-affinity.max-split-imbalance={results.get('max_split_imbalance', 0)}, "
        f"fragment result cache {'on' if results.get('fragment_cache', True) else 'off'}",
        f"- Table data: {mib(results['data_bytes'])} MiB; S3 endpoint latency "
        f"{results.get('latency_ms', 0):g} ms per request",
        f"- Results equal DuckDB's: {results['equal_duckdb']}",
        "",
        "Remote requests and MiB: over S3, what the endpoint served the warm pass (exact); "
        "over local files, the block cache's fetches. Tasks: on the preferred executor / on "
        "another executor of its host / on another host.",
    ]
    for run in results["runs"]:
        lines += [
            "",
            f"## {run['store']}, cache limit {run['cache_limit']}: warm pass, all executors",
            "",
            "| strategy | warm s (sum) | remote requests | remote MiB | tasks P / H / F | "
            "block hits / misses | block hit ratio | footer hit ratio | fragment hits / "
            "misses | MiB cached per node |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s, r in run["strategies"].items():
            f = r["warm_total"]
            cached = " + ".join(mib(b) for _, b in sorted(r["cached_bytes"].items()))
            store = r.get("warm_store")
            requests = store["requests"] if store else f["remote_requests"]
            nbytes = store["bytes"] if store else f["remote_bytes"]
            lines.append(
                f"| {s} | {r['warm_seconds']:.2f} | {requests} | {mib(nbytes)} | "
                f"{f['tasks_preferred']} / {f['tasks_preferred_host']} / {f['tasks_fallback']} | "
                f"{f['block_hits']} / {f['block_misses']} | {pct(f['block_hit_ratio'])} | "
                f"{pct(f['footer_hit_ratio'])} | {f['fragment_hits']} / {f['fragment_misses']} | "
                f"{cached or '–'} |"
            )
        soft, none = run["strategies"].get("SOFT_AFFINITY"), run["strategies"].get("NO_PREFERENCE")
        if soft and none and soft["warm_seconds"] > 0:
            lines += [
                "",
                f"NO_PREFERENCE / SOFT_AFFINITY warm time: "
                f"**{none['warm_seconds'] / soft['warm_seconds']:.2f}x**",
            ]
        for s, r in run["strategies"].items():
            lines += [
                "",
                f"### {run['store']}, {run['cache_limit']}, {s}: warm pass per executor",
                "",
                "| process | tasks P / H / F | python tasks | block hits / misses | block hit "
                "ratio | footer hits / misses | fragment hits / misses | block cache remote "
                "requests | remote MiB | rows read |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for source, f in sorted(r["warm_by_source"].items()):
                lines.append(
                    f"| {source} | {f['tasks_preferred']} / {f['tasks_preferred_host']} / "
                    f"{f['tasks_fallback']} | {f['python_tasks']} | "
                    f"{f['block_hits']} / {f['block_misses']} | {pct(f['block_hit_ratio'])} | "
                    f"{f['footer_hits']} / {f['footer_misses']} | "
                    f"{f['fragment_hits']} / {f['fragment_misses']} | {f['remote_requests']} | "
                    f"{mib(f['remote_bytes'])} | {f['rows_read']} |"
                )
    lines += ["", "## Seconds per query (warm pass)", ""]
    columns = [
        (run, s) for run in results["runs"] for s in run["strategies"]
    ]  # one column per application
    lines.append(
        "| query | "
        + " | ".join(f"{run['store']} {run['cache_limit']} {s}" for run, s in columns)
        + " |"
    )
    lines.append("|---|" + "---:|" * len(columns))
    for q in results["queries"]:
        cells = [f"{run['strategies'][s]['warm_query_seconds'][str(q)]:.3f}" for run, s in columns]
        lines.append(f"| Q{q} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    return text


def cache_limit(share, nbytes: int) -> tuple[int, str]:
    """The block cache limit of a ``--cache-shares`` item, and how the report names it."""
    if share == ALL:
        size = max(2 * nbytes, 64 * 2**20)  # room for every file, twice
        return size, f"{mib(size)} MiB (holds everything)"
    size = int(share * nbytes)
    return size, f"{mib(size)} MiB ({share:g} of the data)"


def main(argv: list[str] | None = None) -> int:
    import contextlib

    from devservers.s3_endpoint import S3Endpoint
    from devservers.s3_server import CONTROL_PREFIX
    from devservers.standalone_cluster import StandaloneCluster
    from raptorx_py.tpch import oracle, queries

    args = parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or ROOT / "work-data").resolve()
    numbers = list(
        [int(q) for q in args.queries.split(",") if q] if args.queries else queries.QUERY_NUMBERS
    )
    results: dict[str, Any] = {
        "command": "python -m benchmarks.cluster_affinity " + shlex.join(argv or sys.argv[1:]),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "started": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "scale": args.scale,
        "workers": args.workers,
        "locality_wait": args.locality_wait,
        "latency_ms": args.latency_ms if "s3" in args.store_list else 0,
        "max_split_imbalance": args.max_split_imbalance,
        "fragment_cache": not args.no_fragment_cache,
        "queries": numbers,
        "runs": [],
    }
    print(f"loading TPC-H SF {args.scale:g} under {work}", flush=True)
    props = {"local": load_local(args.scale, work)}
    results["data_bytes"] = data_bytes(work / "affinity" / "warehouse")
    expected = oracle.duckdb_results(
        str(work / "tpch" / f"sf{args.scale:g}"), numbers, args.scale, threads=2
    )
    wrong: list[str] = []
    with contextlib.ExitStack() as stack:
        store_stats: dict[str, str | None] = {"local": None}
        if "s3" in args.store_list:
            endpoint = stack.enter_context(S3Endpoint(latency_ms=0.0, throughput_mbps=0.0))
            print(f"loading TPC-H SF {args.scale:g} into the S3 endpoint", flush=True)
            props["s3"] = load_s3(args.scale, work, endpoint)
            endpoint.set_latency(args.latency_ms)
            store_stats["s3"] = f"{endpoint.url}{CONTROL_PREFIX}/stats"
        cluster = StandaloneCluster(work / "affinity" / "cluster", workers=args.workers)
        stack.callback(cluster.stop)
        cluster.start()
        for store in args.store_list:
            for share in args.share_list:
                size, limit = cache_limit(share, results["data_bytes"])
                run: dict[str, Any] = {
                    "store": store,
                    "cache_share": share,
                    "cache_limit": limit,
                    "strategies": {},
                }
                for strategy in args.strategy_list:
                    print(f"{store}, {limit}, {strategy}: cold then warm pass", flush=True)
                    name = f"{store}-{share}-{strategy.lower()}.pickle"
                    passes, cached = run_one(
                        cluster,
                        props[store],
                        strategy,
                        args,
                        numbers,
                        out / name,
                        size,
                        store_stats[store],
                    )
                    warm = passes["warm"]
                    for n in numbers:
                        diff = oracle.compare_results(
                            expected[n],
                            warm["rows"][n],
                            ordered=queries.ordered(n),
                            sort_key=queries.ORDER_BY_COLUMNS[n],
                        )
                        if diff is not None:
                            wrong.append(f"{store} {limit} {strategy} Q{n}: {diff}")
                    run["strategies"][strategy] = {
                        "warm_seconds": sum(warm["seconds"].values()),
                        "cold_seconds": sum(passes["cold"]["seconds"].values()),
                        "warm_query_seconds": {str(n): s for n, s in warm["seconds"].items()},
                        "warm_total": executor_figures(warm["counters"]),
                        "warm_by_source": {
                            s: executor_figures(c) for s, c in warm["by_source"].items()
                        },
                        "warm_store": warm.get("store"),
                        "cold_store": passes["cold"].get("store"),
                        "cold_total": executor_figures(passes["cold"]["counters"]),
                        "cached_bytes": cached,
                    }
                results["runs"].append(run)
                report({**results, "equal_duckdb": "(so far)"}, out)  # partial, as it goes
    results["equal_duckdb"] = "yes, every query" if not wrong else "NO: " + "; ".join(wrong)
    print(report(results, out))
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
