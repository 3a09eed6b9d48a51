"""What a tiered_hive scan costs per column type, against Spark's own Parquet reader.

``python -m benchmarks.scan_column_cost [--scale 1] [--repetitions 5] [--out result.json]``
reads TPC-H lineitem (generated under ``work-data/`` if missing, as the suite does) over
local files, no cache tier, through ``tiered_hive`` (the native provider when its jar is
built) and through ``spark.read.parquet``, with one aggregate per column type so that each
scan decodes only those columns and almost nothing happens after it:

- ``date``: ``max(l_shipdate)``, one 4-byte column: mostly the fixed cost of a scan;
- ``string``: two one-character columns;
- ``long``: four integer columns;
- ``decimal``: four ``decimal(15,2)`` columns (the money columns of Q1 and Q6).

Each query runs once to warm up, then ``--repetitions`` times per reader, interleaved; it
prints and writes the median seconds per reader and their ratio. The difference between two
rows' ratios is what a column type costs tiered_hive beyond what it costs Spark.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

QUERIES = {
    "date": "SELECT max(l_shipdate) FROM {view}",
    "string": "SELECT max(l_returnflag), max(l_linestatus) FROM {view}",
    "long": "SELECT sum(l_orderkey), sum(l_partkey), sum(l_suppkey), sum(l_linenumber) FROM {view}",
    "decimal": "SELECT sum(l_quantity), sum(l_extendedprice), sum(l_discount), sum(l_tax) "
    "FROM {view}",
}


def prepare(scale: float, work_dir: str) -> tuple[dict[str, str], str]:
    """Properties of a metastore that has ``bench.lineitem`` over the local lineitem files,
    and that directory."""
    from raptorx_py.config import TIERS_OFF, load_settings
    from raptorx_py.metastore import open_metastore
    from raptorx_py.tables.table_registration import register_external_table
    from raptorx_py.tpch.generate import format_scale, generate_tpch

    tables = generate_tpch(
        scale,
        os.path.join(work_dir, "tpch", f"sf{format_scale(scale)}"),
        progress=lambda m: print(m, flush=True),
    )
    metastore = os.path.abspath(os.path.join(work_dir, "scan-cost.db"))
    properties = {
        "hive.metastore.url": f"sqlite:///{metastore}",
        **TIERS_OFF,  # the cost of decoding each column, not of caching it
    }
    settings = load_settings(overrides=properties)
    with open_metastore(settings.metastore_connection, create=True) as ms:
        ms.create_database("bench")
        register_external_table(ms, settings, "bench.lineitem", tables["lineitem"], replace=True)
    return properties, tables["lineitem"]


def measure(spark, lineitem_dir: str, repetitions: int) -> dict[str, dict[str, float]]:
    spark.read.parquet(lineitem_dir).createOrReplaceTempView("spark_lineitem")

    def run(kind: str, reader: str) -> float:
        view = "spark_lineitem"
        if reader == "tiered_hive":
            # A fresh load per run, as a query of a new job would plan it.
            spark.read.format("tiered_hive").load("bench.lineitem").createOrReplaceTempView(
                "tiered_lineitem"
            )
            view = "tiered_lineitem"
        start = time.perf_counter()
        spark.sql(QUERIES[kind].format(view=view)).collect()
        return time.perf_counter() - start

    results = {}
    for kind in QUERIES:
        times: dict[str, list[float]] = {"spark": [], "tiered_hive": []}
        for rep in range(repetitions + 1):
            for reader in times:
                seconds = run(kind, reader)
                if rep:  # the first round warms up
                    times[reader].append(seconds)
        spark_s = statistics.median(times["spark"])
        tiered_s = statistics.median(times["tiered_hive"])
        results[kind] = {
            "spark_seconds": spark_s,
            "tiered_hive_seconds": tiered_s,
            "ratio": tiered_s / spark_s,
        }
        print(
            f"{kind:>8}  spark {spark_s:.3f}s  tiered_hive {tiered_s:.3f}s  "
            f"ratio {tiered_s / spark_s:.2f}",
            flush=True,
        )
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument(
        "--work-dir",
        default="work-data",
        help="where TPC-H data is generated or reused (work-data)",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--out", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    if args.repetitions < 1:
        parser.error("--repetitions must be at least 1")

    from raptorx_py import native
    from raptorx_py.session import tiered_session

    properties, lineitem_dir = prepare(args.scale, args.work_dir)
    spark = tiered_session(
        master=args.master,
        properties=properties,
        spark_conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
        },
    )
    try:
        results = measure(spark, lineitem_dir, args.repetitions)
    finally:
        spark.stop()
    report = {
        "command": " ".join(
            ["python -m benchmarks.scan_column_cost", *(sys.argv[1:] if argv is None else argv)]
        ),
        "scale": args.scale,
        "repetitions": args.repetitions,
        "master": args.master,
        "native_jar": native.jar_path() is not None,
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "queries": QUERIES,
        "results": results,
    }
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
