"""A dashboard query over a date window that moves one day per run, with and without the
fragment result cache: ``python -m benchmarks.sliding_window``.

    python -m benchmarks.sliding_window --scale 1 --runs 10 --out bench-out/sliding-window \\
        [--window-days 90] [--work-dir DIR]

TPC-H ``lineitem`` (partitioned by ship month, sealed: its statistics are trusted) is
registered over the local generated files, and each run asks for the revenue per return flag
over ``[start + k days, start + k + window days)``. A month wholly inside the window has
both bounds always true by its statistics, so its splits carry no predicate and their
cached partial aggregations serve every run whose window still covers the month; only the
months the window's ends cut are computed again. The same runs without the fragment cache
(storage tiers alike: none, local files) are the baseline; both sides run interleaved after
one warm-up run each. Written: ``<out>/results.json`` and ``<out>/results.md``, per run the
fragments computed and served and the seconds of both sides.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path

from devservers.local_metastore import local_metastore_properties, register_table

ROOT = Path(__file__).resolve().parents[1]
QUERY = (
    "SELECT l_returnflag, sum(l_extendedprice * (1 - l_discount)) AS revenue, count(*) "
    "FROM {view} WHERE l_shipdate >= date '{lo}' AND l_shipdate < date '{hi}' "
    "GROUP BY l_returnflag ORDER BY l_returnflag"
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sliding_window")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=10, help="timed runs, the window one day later each")
    p.add_argument("--window-days", type=int, default=90)
    p.add_argument("--start", default="1995-01-10", help="the first window's first day")
    p.add_argument("--out", default="bench-out/sliding-window")
    p.add_argument("--work-dir", default=None)
    args = p.parse_args(argv)

    from raptorx_py import tiered_session
    from raptorx_py.metrics import MetricsSink, diff, flush
    from raptorx_py.tpch.generate import format_scale, generate_tpch
    from raptorx_py.tpch.oracle import spark_rows

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or ROOT / "work-data").resolve()
    data = work / "tpch" / f"sf{format_scale(args.scale)}"
    print(f"generating TPC-H SF {args.scale:g} in {data}", flush=True)
    generate_tpch(args.scale, str(data))
    root = work / "sliding-window"
    shutil.rmtree(root, ignore_errors=True)
    props = local_metastore_properties(root)
    register_table(props, "sw.lineitem", f"file://{data / 'lineitem'}", sealed=True)
    spark = tiered_session(properties=props, app_name="raptorx-sliding-window")
    fragments = str(root / "fragments")
    spark.read.format("tiered_hive").option("fragment-result-cache.enabled", "true").option(
        "fragment-result-cache.base-directory", fragments
    ).load("sw.lineitem").createOrReplaceTempView("with_cache")
    spark.read.format("tiered_hive").load("sw.lineitem").createOrReplaceTempView("without")
    sink = MetricsSink(props["metrics.directory"])
    start = _dt.date.fromisoformat(args.start)

    def run(view: str, k: int) -> dict:
        lo = start + _dt.timedelta(days=k)
        hi = lo + _dt.timedelta(days=args.window_days)
        flush(props["metrics.directory"])
        before = sink.totals()
        began = time.monotonic()
        rows = spark_rows(spark.sql(QUERY.format(view=view, lo=lo, hi=hi)))
        seconds = time.monotonic() - began
        flush(props["metrics.directory"])
        c = diff(sink.totals(), before)
        return {
            "window": f"{lo} .. {hi}",
            "seconds": seconds,
            "rows": rows,
            "computed": c.get("reader.fragments_computed", 0),
            "served": c.get("fragment_cache.hits", 0),
        }

    results = []
    try:
        run("with_cache", -1)  # warm-up: fills the cache for the window before the first
        run("without", -1)
        for k in range(args.runs):
            a, b = run("with_cache", k), run("without", k)
            if a["rows"] != b["rows"]:
                print(f"run {k}: results differ", file=sys.stderr)
                return 1
            results.append({"k": k, "with_cache": a, "without": b})
            print(
                f"run {k}: {a['window']}: computed {a['computed']}, served {a['served']}; "
                f"{a['seconds']:.3f} s with the fragment cache, {b['seconds']:.3f} s without",
                flush=True,
            )
    finally:
        spark.stop()
    total_with = sum(r["with_cache"]["seconds"] for r in results)
    total_without = sum(r["without"]["seconds"] for r in results)
    lines = [
        "# Sliding-window dashboard query with and without the fragment result cache",
        "",
        f"- Command: `python -m benchmarks.sliding_window {shlex.join(argv or sys.argv[1:])}`",
        f"- Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        f"- TPC-H SF {args.scale:g} lineitem on local files; window {args.window_days} days "
        f"from {args.start}, one day later per run; one warm-up run per side",
        f"- Total over {len(results)} runs: {total_with:.2f} s with the cache, "
        f"{total_without:.2f} s without (**{total_with / total_without:.2f}x**)",
        "",
        "| run | window | fragments computed | served | with cache s | without s |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        a, b = r["with_cache"], r["without"]
        lines.append(
            f"| {r['k']} | {a['window']} | {a['computed']} | {a['served']} | "
            f"{a['seconds']:.3f} | {b['seconds']:.3f} |"
        )
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
