"""What the fragment result cache keeps that Spark's ``CACHE TABLE`` does not: results that
survive an application restart, and never an answer older than the files.
``python -m benchmarks.fragment_restart``.

    python -m benchmarks.fragment_restart --scale 1 --out bench-out/fragment-restart \\
        [--work-dir DIR]

A copy of TPC-H ``lineitem`` (local files, registered sealed) is queried with TPC-H Q6's
shape by two applications, one after the other, each its own process (its own SparkContext;
each first runs a query that reads nothing, to start its Python workers):
1. the first fills both caches: ``CACHE TABLE`` over Spark's Parquet reader, and the
   fragment result cache over ``tiered_hive`` (one run each), then times a warm run of each;
2. the second (a restart) times the first run of each again: the fragment cache is on disk
   and serves it; Spark's in-memory cache is gone and is filled again (timed with the run);
   then one partition's file is rewritten in place (another writer's commit), and both run
   again: the fragment cache misses for that file only and returns the new rows, while
   ``CACHE TABLE`` still returns the rows it cached before.
Each answer is checked against DuckDB on the files as they are at that moment. Written:
``<out>/results.json`` and ``<out>/results.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

from devservers.local_metastore import local_metastore_properties, register_table

ROOT = Path(__file__).resolve().parents[1]
QUERY = (
    "SELECT sum(l_extendedprice * l_discount) AS revenue FROM {view} "
    "WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01' "
    "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
)
CHANGED_MONTH = "1994-06"


def duckdb_answer(lineitem_dir: str):
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute(
        f"CREATE VIEW li AS SELECT * FROM read_parquet('{lineitem_dir}/*/*.parquet', "
        "hive_partitioning = true)"
    )
    return con.execute(QUERY.format(view="li")).fetchone()[0]


def rewrite_month(lineitem_dir: str) -> None:
    """Another writer's commit: the month's file rewritten in place with every discount
    raised by 0.01 (a new size or mtime, so a new version of the file)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = next(Path(lineitem_dir, f"l_shipmonth={CHANGED_MONTH}").glob("*.parquet"))
    t = pq.read_table(path)
    i = t.schema.get_field_index("l_discount")
    raised = pc.add(t.column(i), pa.scalar(0.01).cast(t.schema.field(i).type))
    t = t.set_column(i, t.schema.field(i), raised.cast(t.schema.field(i).type))
    tmp = path.with_suffix(".tmp")
    pq.write_table(t, tmp)
    os.replace(tmp, path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def app(spec: dict) -> dict:
    """One application: the runs ``spec["phase"]`` asks for, as JSON."""
    from raptorx_py import tiered_session
    from raptorx_py.metrics import MetricsSink, diff, flush

    props = spec["properties"]
    spark = tiered_session(properties=props, app_name=f"fragment-restart-{spec['phase']}")
    sink = MetricsSink(props["metrics.directory"])
    out: dict = {}

    def timed(name: str, view: str, prepare=None) -> None:
        flush(props["metrics.directory"])
        before = sink.totals()
        began = time.monotonic()
        if prepare is not None:
            prepare()
        value = spark.sql(QUERY.format(view=view)).collect()[0][0]
        seconds = time.monotonic() - began
        flush(props["metrics.directory"])
        c = diff(sink.totals(), before)
        out[name] = {
            "seconds": seconds,
            "answer": str(value),
            "computed": c.get("reader.fragments_computed", 0),
            "served": c.get("fragment_cache.hits", 0),
        }

    def cache_table() -> None:
        spark.read.parquet(spec["lineitem"]).createOrReplaceTempView("li_cached")
        spark.sql("CACHE TABLE li_cached")

    try:
        spark.read.format("tiered_hive").option("fragment-result-cache.enabled", "true").option(
            "fragment-result-cache.base-directory", spec["fragments"]
        ).load("fr.lineitem").createOrReplaceTempView("li_fragments")
        # An application's first tiered_hive query starts its Python workers; a query whose
        # every partition its statistics prune does that without touching either cache.
        spark.sql("SELECT count(*) FROM li_fragments WHERE l_quantity < 0").collect()
        if spec["phase"] == "first":
            timed("cache_table_fill", "li_cached", cache_table)
            timed("cache_table_warm", "li_cached")
            timed("fragments_fill", "li_fragments")
            timed("fragments_warm", "li_fragments")
        else:
            timed("cache_table_after_restart", "li_cached", cache_table)
            timed("fragments_after_restart", "li_fragments")
            rewrite_month(spec["lineitem"])
            # CACHE TABLE is left as a user leaves it: nothing tells Spark the files changed.
            timed("cache_table_after_commit", "li_cached")
            timed("fragments_after_commit", "li_fragments")
    finally:
        spark.stop()
    return out


def run_app(spec: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.fragment_restart", "--app", json.dumps(spec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"application {spec['phase']} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fragment_restart")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--out", default="bench-out/fragment-restart")
    p.add_argument("--work-dir", default=None)
    p.add_argument("--app", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.app:
        print(json.dumps(app(json.loads(args.app))))
        return 0

    from raptorx_py.tpch.generate import format_scale, generate_tpch

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or ROOT / "work-data").resolve()
    data = work / "tpch" / f"sf{format_scale(args.scale)}"
    generate_tpch(args.scale, str(data))
    root = work / "fragment-restart"
    shutil.rmtree(root, ignore_errors=True)
    lineitem = root / "lineitem"
    shutil.copytree(data / "lineitem", lineitem)  # a copy: this benchmark rewrites a file
    props = local_metastore_properties(root)
    register_table(props, "fr.lineitem", f"file://{lineitem}", sealed=True)
    spec = {"properties": props, "lineitem": str(lineitem), "fragments": str(root / "fragments")}
    before = duckdb_answer(str(lineitem))
    first = run_app({**spec, "phase": "first"})
    second = run_app({**spec, "phase": "second"})
    after = duckdb_answer(str(lineitem))
    runs = {**first, **second}
    expected = {name: str(after if "after_commit" in name else before) for name in runs}
    results = {
        "command": "python -m benchmarks.fragment_restart " + shlex.join(argv or sys.argv[1:]),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
        "scale": args.scale,
        "runs": runs,
        "duckdb_before": str(before),
        "duckdb_after": str(after),
    }
    lines = [
        "# Fragment result cache against CACHE TABLE: a restart and another writer's commit",
        "",
        f"- Command: `{results['command']}`",
        f"- Machine: {results['machine']}; TPC-H SF {args.scale:g} lineitem, local files",
        f"- DuckDB: {before} before the commit, {after} after it",
        "",
        "| run | seconds | answer | equals DuckDB now | splits computed | served |",
        "|---|---:|---|---|---:|---:|",
    ]
    for name, r in runs.items():
        same = Decimal(r["answer"]) == Decimal(expected[name])
        ok = "yes" if same else "**no (stale)**"
        lines.append(
            f"| {name} | {r['seconds']:.3f} | {r['answer']} | {ok} | {r['computed']} | "
            f"{r['served']} |"
        )
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
