"""An application of the INSTALLED wheel (``tests/support/wheel_fixtures.py``): copied out of the
checkout and run by the wheel's virtualenv from a directory outside the checkout, so it can
only import the raptorx_py the wheel installed. ``python wheel_app.py '<json>'`` with
``checkout`` (which must be on no import path), ``properties`` of a metastore where
``table`` is registered (partition key ``ds``, an int64 column ``x``), ``where`` (a filter
on ``x``) and optionally ``spark_conf`` (more settings of the session): a local[2] session
from ``tiered_session()``, the filtered read's executed plan (its pushed filters), then the
same query by catalog name (``raptorx.<db>.<table>``) twice with the fragment result cache
on, the scan node's metrics and the counters of each run. It prints one JSON line of what it
saw, for the test to assert.

Only the installed package and its dependencies: never ``tests``, ``devservers`` or
``benchmarks``, which the wheel does not carry. The standalone cluster's application of the
installed wheel is ``devservers/cluster_driver.py``, which imports only raptorx_py too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def where_raptorx_is() -> str:
    import raptorx_py

    return raptorx_py.__file__


def check_isolated(checkout: Path) -> dict:
    """Where raptorx_py and the jar come from; raises when the checkout is importable."""
    from raptorx_py import native

    on_path = [p for p in sys.path if p and Path(p).resolve().is_relative_to(checkout)]
    if on_path or Path.cwd().resolve().is_relative_to(checkout):
        raise RuntimeError(f"the checkout {checkout} is on sys.path {on_path} or is the cwd")
    jar = native.jar_path()
    return {"package": where_raptorx_is(), "jar": str(jar) if jar else None}


def scan_metrics(spark) -> list[dict]:
    """The name and metrics of each scan node of the last SQL execution, as the UI shows
    them (the driver's SQL status store, through py4j)."""
    jsc = spark.sparkContext._jsc.sc()
    jsc.listenerBus().waitUntilEmpty()
    store = spark._jsparkSession.sharedState().statusStore()

    def seq(s):
        return [s.apply(i) for i in range(s.size())]

    execution = max(e.executionId() for e in seq(store.executionsList()))
    values = {}
    it = store.executionMetrics(execution).iterator()
    while it.hasNext():
        pair = it.next()
        values[int(pair._1())] = str(pair._2())
    return [
        {
            "name": node.name(),
            "metrics": {
                m.name(): values[int(m.accumulatorId())]
                for m in seq(node.metrics())
                if int(m.accumulatorId()) in values
            },
        }
        for node in seq(store.planGraph(execution).allNodes())
        if node.name().startswith("BatchScan ")
    ]


def run_local(spec: dict) -> dict:
    from raptorx_py.metrics import MetricsSink, diff, flush
    from raptorx_py.session import tiered_session

    props = spec["properties"]
    spark = tiered_session(
        master="local[2]",
        app_name="raptorx-wheel-local",
        properties=props,
        spark_conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            # the test's JVM options (tests/support/jvm_options.py), given in the spec
            **spec.get("spark_conf", {}),
        },
    )
    try:
        df = spark.read.format("tiered_hive").load(spec["table"]).where(spec["where"])
        plan = df._jdf.queryExecution().executedPlan().toString()
        metrics_dir = props["metrics.directory"]
        sink = MetricsSink(metrics_dir)
        sql = f"SELECT sum(x) AS s FROM raptorx.{spec['table']} WHERE {spec['where']}"
        runs = []
        for _ in range(2):
            flush(metrics_dir)
            before = sink.totals()
            total = spark.sql(sql).collect()[0]["s"]
            scans = scan_metrics(spark)
            flush(metrics_dir)
            runs.append({"result": total, "scans": scans, "counters": diff(sink.totals(), before)})
        return {"plan": plan, "runs": runs, "spark_jars": spark.conf.get("spark.jars", "")}
    finally:
        spark.stop()


def main(arg: str) -> None:
    spec = json.loads(arg)
    out = check_isolated(Path(spec["checkout"]).resolve())
    out.update(run_local(spec))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
