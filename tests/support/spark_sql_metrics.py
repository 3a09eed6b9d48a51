"""Spark's SQL metrics of a query, read back as a Spark user sees them in the UI's SQL tab
and the REST API (``/api/v1/applications/<id>/sql?details=true``): from the driver's
``SQLAppStatusStore``, through py4j (the test session runs without a UI)."""

from __future__ import annotations


def _scala_seq(seq) -> list:
    return [seq.apply(i) for i in range(seq.size())]


def _settle(spark) -> None:
    """Wait until Spark's listeners have seen every event so far (the status store is filled
    by a listener, asynchronously)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()


def last_execution_id(spark) -> int:
    _settle(spark)
    store = spark._jsparkSession.sharedState().statusStore()
    return max(e.executionId() for e in _scala_seq(store.executionsList()))


def node_metrics(spark, execution_id: int | None = None) -> list[tuple[str, dict[str, str]]]:
    """Each plan node of the execution (the last one by default) with its metrics as the UI
    shows them (``{"number of output rows": "5", ...}``), in the plan graph's order."""
    if execution_id is None:
        execution_id = last_execution_id(spark)
    else:
        _settle(spark)
    store = spark._jsparkSession.sharedState().statusStore()
    values: dict[int, str] = {}
    it = store.executionMetrics(execution_id).iterator()
    while it.hasNext():
        pair = it.next()
        values[int(pair._1())] = str(pair._2())
    out = []
    for node in _scala_seq(store.planGraph(execution_id).allNodes()):
        metrics = {
            m.name(): values[int(m.accumulatorId())]
            for m in _scala_seq(node.metrics())
            if int(m.accumulatorId()) in values
        }
        out.append((node.name(), metrics))
    return out


def scan_metrics(spark, table: str | None = None) -> list[dict[str, str]]:
    """The metrics of each ``tiered_hive`` scan node of the last execution (of ``table``
    only, when given)."""
    prefix = "BatchScan tiered_hive" + (f" {table}" if table else "")
    return [m for name, m in node_metrics(spark) if name.startswith(prefix)]


def stage_input(spark, execution_id: int | None = None) -> tuple[int, int]:
    """Input bytes and records of the stages of the execution (the last one by default)."""
    if execution_id is None:
        execution_id = last_execution_id(spark)
    store = spark._jsparkSession.sharedState().statusStore()
    execution = store.execution(execution_id).get()
    stage_ids = {int(s) for s in _iterate(execution.stages())}
    app_store = spark.sparkContext._jsc.sc().statusStore()
    # stageList's parameters change between Spark releases (statuses, then details, summaries
    # ...): every one left at its "all, no details" value.
    method = next(m for m in app_store.getClass().getMethods() if m.getName() == "stageList")
    sc = spark.sparkContext

    def neutral(type_name: str):
        if type_name == "boolean":
            return False
        if type_name == "[D":
            return sc._gateway.new_array(sc._jvm.double, 0)
        return sc._jvm.java.util.ArrayList()

    args = [neutral(t.getName()) for t in method.getParameterTypes()]
    nbytes = records = 0
    for stage in _scala_seq(app_store.stageList(*args)):
        if int(stage.stageId()) in stage_ids:
            nbytes += int(stage.inputBytes())
            records += int(stage.inputRecords())
    return nbytes, records


def _iterate(collection) -> list:
    it = collection.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out
