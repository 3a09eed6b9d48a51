"""Where one timed query's wall time went, from Spark's own records: the query execution's
phases and the stages of its jobs, relative to the moment the timing started.

``tpch_suite`` records both for every run (``phases_ms``, ``stages`` in results.json), so a
ratio can be explained phase by phase: a gap before the first stage is the driver's
(analysis, optimization with the scans' planning, physical planning), a gap inside the
stages is the executors'. Read from the SparkSession's JVM (classic sessions only); nothing
here changes what is timed.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

#: The job group a run's jobs carry (``stages_of``), unique per run.
GROUP_PREFIX = "raptorx-bench-"


def new_group(spark: Any) -> str:
    """Tag the jobs this thread starts from now on with a fresh group; the group's name."""
    group = GROUP_PREFIX + uuid.uuid4().hex[:12]
    spark.sparkContext.setJobGroup(group, group)
    return group


def wall_millis() -> int:
    """The wall clock in milliseconds, as Spark stamps stage submission and completion."""
    return time.time_ns() // 1_000_000


def phases_ms(df: Any, started_ms: int) -> dict[str, dict[str, int]]:
    """The query execution's phases (parsing, analysis, optimization, planning): when each
    started (ms after ``started_ms``) and how long it took. The scans' planning of a DSv2
    source happens inside ``optimization``."""
    phases = df._jdf.queryExecution().tracker().phases()
    out: dict[str, dict[str, int]] = {}
    it = phases.iterator()
    while it.hasNext():
        entry = it.next()
        summary = entry._2()
        out[entry._1()] = {
            "start_ms": summary.startTimeMs() - started_ms,
            "ms": summary.durationMs(),
        }
    return out


def stages_of(spark: Any, group: str, started_ms: int) -> list[dict[str, Any]]:
    """Every stage of the group's jobs, in job order: its status, tasks, submission and
    completion (ms after ``started_ms``; None when skipped), executor run and CPU time, and
    input records."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    store = sc._jsc.sc().statusStore()
    gateway = sc._gateway
    no_statuses = gateway.jvm.java.util.ArrayList()
    no_quantiles = gateway.new_array(gateway.jvm.double, 0)
    stages: list[dict[str, Any]] = []
    for job in sorted(tracker.getJobIdsForGroup(group)):
        info = tracker.getJobInfo(job)
        if info is None:
            continue
        for stage_id in info.stageIds:
            attempts = store.stageData(stage_id, False, no_statuses, False, no_quantiles)
            for i in range(attempts.length()):
                d = attempts.apply(i)
                stages.append(
                    {
                        "job": job,
                        "stage": stage_id,
                        "status": str(d.status()),
                        "tasks": d.numTasks(),
                        "start_ms": _relative(d.submissionTime(), started_ms),
                        "end_ms": _relative(d.completionTime(), started_ms),
                        "run_ms": d.executorRunTime(),
                        "cpu_ms": d.executorCpuTime() // 1_000_000,
                        "gc_ms": d.jvmGcTime(),
                        "input_records": d.inputRecords(),
                    }
                )
    return stages


def _relative(date_option: Any, started_ms: int) -> int | None:
    return date_option.get().getTime() - started_ms if date_option.isDefined() else None
