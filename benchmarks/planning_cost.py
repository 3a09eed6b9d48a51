"""Planning cost per scan, with the driver's planner and with pyspark's planning workers.

``python -m benchmarks.planning_cost [--repetitions 15] [--warmup 3] [--out result.json]``
writes two tiny tables (``nation``, 25 rows, and ``region``, 5 rows, as TPC-H's) as Parquet
and registers them in a temporary SQLite metastore, starts a ``local[2]`` session, and times
a query of four scans of them (two of each, joined) in three configurations, interleaved
within each repetition:

- ``spark``: Spark's own Parquet reader over the same files (views over ``read.parquet``);
- ``planner``: ``tiered_hive`` with the application's planner (``driver_planner.py``, what
  ``register`` sets up);
- ``workers``: ``tiered_hive`` with the planner unregistered, so pyspark's planning workers
  plan every scan (as before the driver's planner existed, and as on a Spark Connect server).

Each run is ``spark.sql(query).collect()`` after a fresh ``load()`` per table (as a user's
new DataFrame would be). It prints and writes the median seconds per configuration and, for
the ``tiered_hive`` ones, the planning counters of one run: scans planned, Python worker
calls, planner callbacks and the planner's microseconds per scan (median over runs), LISTs
and metastore round trips. Medians of seconds are for the report; the counters are exact.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

QUERY = """
select count(*), sum(n1.n_nationkey + n2.n_nationkey)
from nation n1 join region r1 on n1.n_regionkey = r1.r_regionkey
join nation n2 on n2.n_regionkey = n1.n_regionkey
join region r2 on r2.r_regionkey = n2.n_regionkey
where r1.r_name <> 'NONE' and r2.r_name <> 'NONE'
"""
CONFIGURATIONS = ("spark", "planner", "workers")
COUNTERS = (
    "planning.scans",
    "planning.worker_calls",
    "planning.driver_calls",
    "planning.driver_micros",
    "storage.listings",
    "metastore.round_trips",
)


def write_tables(root: Path) -> dict[str, str]:
    """nation and region as one Parquet file each under ``root``; their directories."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dirs = {}
    tables = {
        "nation": pa.table(
            {
                "n_nationkey": pa.array(range(25), pa.int64()),
                "n_name": [f"NATION{i}" for i in range(25)],
                "n_regionkey": pa.array([i % 5 for i in range(25)], pa.int64()),
            }
        ),
        "region": pa.table(
            {
                "r_regionkey": pa.array(range(5), pa.int64()),
                "r_name": [f"REGION{i}" for i in range(5)],
            }
        ),
    }
    for name, table in tables.items():
        d = root / "data" / name
        d.mkdir(parents=True)
        pq.write_table(table, str(d / "part-0.parquet"))
        dirs[name] = str(d)
    return dirs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from devservers.local_metastore import local_metastore_properties, register_table
    from raptorx_py.datasource.planning.driver_planner import register_planner, unregister_planner
    from raptorx_py.metrics import MetricsSink, diff, flush
    from raptorx_py.session import tiered_session

    root = Path(tempfile.mkdtemp(prefix="raptorx-planning-"))
    props = local_metastore_properties(root)
    dirs = write_tables(root)
    for name, d in dirs.items():
        register_table(props, f"plan.{name}", f"file://{d}", sealed=True)
    props = {
        **props,
        "hive.metastore-cache-ttl": "1h",
        "hive.file-status-cache-tables": "*",
    }
    spark = tiered_session(
        master="local[2]",
        app_name="raptorx-planning-cost",
        properties=props,
        spark_conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.ui.showConsoleProgress": "false",
        },
    )
    sink = MetricsSink(props["metrics.directory"])

    def views(config: str) -> None:
        for name, d in dirs.items():
            if config == "spark":
                df = spark.read.parquet(d)
            else:
                df = spark.read.format("tiered_hive").load(f"plan.{name}")
            df.createOrReplaceTempView(name)

    def run(config: str) -> tuple[float, dict[str, int], object]:
        if config == "workers":
            unregister_planner(spark)
        else:
            register_planner(spark)
        flush(props["metrics.directory"])
        before = sink.totals()
        started = time.perf_counter()
        views(config)
        result = spark.sql(QUERY).collect()[0]
        seconds = time.perf_counter() - started
        flush(props["metrics.directory"])
        counts = diff(sink.totals(), before)
        return seconds, {k: counts.get(k, 0) for k in COUNTERS}, tuple(result)

    try:
        seconds: dict[str, list[float]] = {c: [] for c in CONFIGURATIONS}
        counts: dict[str, list[dict[str, int]]] = {c: [] for c in CONFIGURATIONS}
        answers = set()
        for i in range(args.warmup + args.repetitions):
            for config in CONFIGURATIONS:
                s, c, answer = run(config)
                answers.add(answer)
                if i >= args.warmup:
                    seconds[config].append(s)
                    counts[config].append(c)
        if len(answers) != 1:
            raise SystemExit(f"the configurations disagree: {sorted(answers)}")
    finally:
        register_planner(spark)
        spark.stop()

    out: dict = {
        "command": " ".join([os.path.basename(sys.executable), "-m", __spec__.name, *sys.argv[1:]])
        if __spec__
        else "",
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "query": " ".join(QUERY.split()),
        "repetitions": args.repetitions,
        "warmup": args.warmup,
        "configs": {},
    }
    for config in CONFIGURATIONS:
        runs = counts[config]
        scans = runs[-1]["planning.scans"]
        per_scan = [
            r["planning.driver_micros"] / r["planning.scans"] for r in runs if r["planning.scans"]
        ]
        out["configs"][config] = {
            "median_s": statistics.median(seconds[config]),
            "seconds": seconds[config],
            "counters_last_run": runs[-1],
            "planner_micros_per_scan_median": statistics.median(per_scan) if per_scan else None,
            "scans": scans,
        }
    spark_s = out["configs"]["spark"]["median_s"]
    for config in CONFIGURATIONS:
        c = out["configs"][config]
        c["x_of_spark"] = c["median_s"] / spark_s
        print(
            f"{config:8s} median {c['median_s'] * 1000:7.1f} ms ({c['x_of_spark']:.2f}x of spark)"
            f"  per-scan planner {c['planner_micros_per_scan_median'] or 0:8.0f} us"
            f"  {c['counters_last_run']}"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
