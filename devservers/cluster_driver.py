"""A driver for a ``devservers.standalone_cluster.StandaloneCluster`` (the tests' is
``tests/support/cluster_fixtures.py``), run in its own process (one SparkContext per
process): ``python -m devservers.cluster_driver '<json>'`` with ``master``, ``executors``
(how many to wait for), ``properties``, ``options`` (per read), ``table``,
``column`` and ``runs``: per run, ``options`` over the common ones, optionally ``before``
(a file touched as the run begins, before it waits for executors, so a test can start a
worker between two runs), ``replace_host`` (kill every executor on that host and wait for
as many new ones: Spark's ``killAndReplaceExecutor``, as when an executor is lost and its
worker gives the application a new one), ``executors`` (wait until exactly that many are
live first), ``mark`` (a file touched as the read starts, so a test can act mid-query) and
``reuse`` (read the previous run's DataFrame again instead of a new ``load()``).
``max_executors`` (default ``executors``) caps the application's cores, so that executors
of workers joining later can be added. Reads ``sum(column)`` of the table once per run and
prints one JSON line: the live executors (``host/id``) and, per run, the live executors at
its start, the result and the counters the run added (from the metrics sink, executors'
included), and where raptorx_py and its jar came from: the driver's ``package``, ``jar`` and
``spark_jars``, and with ``where_imported`` the path each executor's Python imported it from
(``executor_packages``).

It imports nothing but raptorx_py, so a copy of this file run by another interpreter is an
application of that interpreter's raptorx_py: the installed wheel's, in
``test_soft_affinity_cluster.py``."""

from __future__ import annotations

import json
import os
import sys
import time

DEADLINE_S = 90.0


def main(arg: str) -> None:
    spec = json.loads(arg)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from raptorx_py.metrics import MetricsSink, diff, flush
    from raptorx_py.session import tiered_session

    spark = tiered_session(
        master=spec["master"],
        app_name="raptorx-cluster-test",
        properties=spec["properties"],
        spark_conf={
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.cores": "1",
            "spark.executor.memory": "512m",
            "spark.cores.max": str(spec.get("max_executors", spec["executors"])),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            **spec.get("spark_conf", {}),
        },
    )
    try:
        sc = spark.sparkContext
        affinity = sc._jvm.org.apache.spark.sql.execution.python.raptorx.Affinity

        def live() -> list[str]:
            return (
                str(affinity.liveExecutors().mkString(",")).split(",")
                if affinity.liveExecutors().nonEmpty()
                else []
            )

        def wait_for(n: int) -> None:
            deadline = time.monotonic() + DEADLINE_S
            while len(live()) != n:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} executors not live in {DEADLINE_S}s: {live()}")
                time.sleep(0.2)  # polling a condition, bounded by the deadline

        wait_for(spec["executors"])
        if "tpch" in spec:
            return run_tpch(spark, spec)
        metrics_dir = spec["properties"]["metrics.directory"]
        sink = MetricsSink(metrics_dir)
        flush(metrics_dir)
        at_start_by_source = sink.totals_by_source()  # the sink may hold earlier applications'
        runs = []
        for run in spec["runs"]:
            if "before" in run:
                open(run["before"], "w").close()
            if "replace_host" in run:
                replace_executors(sc, live, run["replace_host"])
            if "executors" in run:
                wait_for(run["executors"])
            flush(metrics_dir)
            before, at_start = sink.totals(), live()
            if not run.get("reuse"):  # else the previous run's DataFrame, read again
                df = (
                    spark.read.format("tiered_hive")
                    .options(**{**spec["options"], **run.get("options", {})})
                    .load(spec["table"])
                )
            if "mark" in run:
                open(run["mark"], "w").close()
            total = df.agg({spec["column"]: "sum"}).collect()[0][0]
            flush(metrics_dir)
            runs.append(
                {"result": total, "executors": at_start, "counters": diff(sink.totals(), before)}
            )
        shown = {}
        if "csv_dir" in spec:
            shown = executor_metrics_shown(
                spark, sink, at_start_by_source, spec["csv_dir"], "fragment_cache.jvm_hits"
            )
        out = {"executors": live(), "runs": runs, "published": published(spark), "csv": shown}
        out.update(where_from(spark, len(live()) * 4 if spec.get("where_imported") else 0))
        print(json.dumps(out))
    finally:
        spark.stop()


def where_from(spark, tasks: int) -> dict:
    """Where this driver's raptorx_py and its jar are, the ``spark.jars`` executors receive,
    and (``tasks`` > 0) where the executors' Python workers import raptorx_py from, over
    that many one-element tasks."""
    import raptorx_py
    from raptorx_py import native

    out = {
        "package": raptorx_py.__file__,
        "jar": str(native.jar_path()),
        "spark_jars": spark.conf.get("spark.jars", ""),
    }
    if tasks:
        rdd = spark.sparkContext.parallelize(range(tasks), tasks)
        # A lambda, pickled by value: the executors need not import this module.
        out["executor_packages"] = sorted(
            set(rdd.map(lambda _: __import__("raptorx_py").__file__).collect())
        )
    return out


def published(spark) -> dict[str, int]:
    """The Spark processes whose Python processes published totals for Spark's metrics
    system (``metrics.py``), by directory name, with their files' count."""
    from raptorx_py.jvm_contract.protocol import METRICS_DIR_CONF

    root = spark.conf.get(METRICS_DIR_CONF, None)
    if not root:
        return {}
    app = os.path.join(root, spark.sparkContext.applicationId)
    if not os.path.isdir(app):
        return {}
    return {name: len(os.listdir(os.path.join(app, name))) for name in sorted(os.listdir(app))}


def executor_metrics_shown(spark, sink, at_start, csv_dir: str, name: str) -> dict:
    """Wait until each executor's CSV sink (``spark.metrics.conf.executor.sink.csv.*``, a
    row a second) shows the metrics plugin's ``name`` equal to what that executor counted
    in the metrics sink since ``at_start`` (``totals_by_source`` when this application
    began); ``{"shown": {executor: value}, "counted": {...}}`` either way."""
    prefix = spark.sparkContext.applicationId + "."
    suffix = f".plugin.raptorx.CacheMetricsPlugin.{name}.csv"

    def shown() -> dict[str, int]:
        out = {}
        for f in sorted(os.listdir(csv_dir)):
            if f.startswith(prefix) and f.endswith(suffix):
                with open(os.path.join(csv_dir, f), encoding="utf-8") as rows:
                    lines = rows.read().strip().splitlines()
                if len(lines) > 1:
                    out[f[len(prefix) : -len(suffix)]] = int(float(lines[-1].split(",")[1]))
        return out

    by_source = sink.totals_by_source()
    counted = {
        s.split(" ", 1)[1]: v.get(name, 0) - at_start.get(s, {}).get(name, 0)
        for s, v in by_source.items()
        if s.startswith("executor ")
    }
    deadline = time.monotonic() + DEADLINE_S
    while shown() != counted and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the sinks' next report, bounded by the deadline
    return {"shown": shown(), "counted": counted}


def replace_executors(sc, live, host: str) -> None:
    """Kill every executor on ``host`` through Spark (``killAndReplaceExecutor``: the
    application keeps its target, so the worker starts a new executor) and wait, by a
    deadline, until as many executors are live as before, none of them a killed one."""
    before = live()
    killed = {e for e in before if e.rsplit("/", 1)[0] == host}
    if not killed:
        raise ValueError(f"no live executor on host {host}: {before}")
    for e in sorted(killed):
        sc._jsc.sc().killAndReplaceExecutor(e.rsplit("/", 1)[1])
    deadline = time.monotonic() + DEADLINE_S
    while True:
        now = live()
        if len(now) == len(before) and not killed & set(now):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"executors {sorted(killed)} not replaced in {DEADLINE_S}s: {now}")
        time.sleep(0.2)  # polling a condition, bounded by the deadline


def store_stats(url: str) -> dict:
    """The S3 endpoint's counters (``devservers.s3_endpoint``'s ``/stats``), read by URL:
    the endpoint runs in the benchmark's process, not this one."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as r:
        return json.load(r)


def store_delta(after: dict, before: dict) -> dict:
    """Requests and response bytes the endpoint counted between two readings, in total."""

    def total(stats: dict, key: str) -> int:
        return int(sum((stats.get(key) or {}).values()))

    return {k: total(after, k) - total(before, k) for k in ("requests", "bytes")}


def run_tpch(spark, spec) -> None:
    """``spec["tpch"]``: ``database``, ``scale``, ``queries``, ``out`` (a pickle file), and
    optionally ``passes`` (names; default one pass ``"run"``): every pass runs every query
    once, and ``store_stats`` (the S3 endpoint's stats URL: each pass then records the
    requests and bytes the store served it, ``store``). Pickled to ``out``: per pass, every
    query's rows (``oracle.spark_rows``) and seconds (monotonic clock), and the counters the
    pass added, in total (``counters``) and per Spark process (``by_source``:
    ``metrics.process_source``); the first pass's rows and counters are also at the top
    level (``rows``, ``counters``)."""
    import pickle

    from raptorx_py.metrics import MetricsSink, diff, flush
    from raptorx_py.tpch import oracle, queries

    t = spec["tpch"]
    metrics_dir = spec["properties"]["metrics.directory"]
    sink = MetricsSink(metrics_dir)
    store = t.get("store_stats")  # the S3 endpoint's stats URL, when the data is there

    def reader(table):
        return (
            spark.read.format("tiered_hive")
            .options(**spec["options"])
            .load(f"{t['database']}.{table}")
        )

    queries.register_views(spark, reader)
    passes = {}
    for name in t.get("passes", ["run"]):
        flush(metrics_dir)
        before, before_by_source = sink.totals(), sink.totals_by_source()
        store_before = store_stats(store) if store else None
        rows, seconds = {}, {}
        for n in t["queries"]:
            started = time.monotonic()
            rows[n] = oracle.spark_rows(spark.sql(queries.query_text(n, t["scale"], "spark")))
            seconds[n] = time.monotonic() - started
        flush(metrics_dir)
        after_by_source = sink.totals_by_source()
        passes[name] = {
            "rows": rows,
            "seconds": seconds,
            "store": store_delta(store_stats(store), store_before) if store else None,
            "counters": diff(sink.totals(), before),
            "by_source": {
                s: diff(after_by_source[s], before_by_source.get(s, {})) for s in after_by_source
            },
        }
    first = next(iter(passes.values()))
    with open(t["out"], "wb") as f:
        pickle.dump({"rows": first["rows"], "counters": first["counters"], "passes": passes}, f)
    print(json.dumps({"queries": len(t["queries"]), "passes": list(passes)}))


if __name__ == "__main__":
    main(sys.argv[1])
