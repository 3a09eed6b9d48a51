"""The benchmark process's own Python heap, kept out of a timed run.

``spark.sql(q).collect()`` builds its rows in the benchmark's Python process, and the
driver's planner (``tiered_hive``) runs there too. Python's cyclic collector walks every
tracked object of the process in a full (generation 2) collection, and one is due whenever
the objects that survived younger collections grow by a quarter: a query returning many
rows (Q16: 18,314) sets one off in some of its runs and not in others. The walk then costs
what the harness holds (pyspark, DuckDB, the results so far), not what the query made:
Q16's runs split into two groups in every configuration at SF 1, Spark's own reader
included (benchmarks/results/2026-11-28-harness-gc/).

:func:`frozen_heap` collects once before the run, outside the clock, and freezes what
survives (``gc.freeze``): collections during the run, full ones included, walk only the
objects made since, so the query's own garbage is still collected and paid for, as in a
process that holds only the query. ``timeit`` goes further and turns the collector off.
The time the collector took during the run is reported, so a run that still pays for one
is visible.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def frozen_heap() -> Iterator[dict[str, Any]]:
    """Collect and freeze the heap; yield a dict that holds, after the block, ``gc_ms`` (the
    collector's time during the block) and ``full_collections`` (generation 2 ones)."""
    gc.collect()
    gc.freeze()
    spent = {"gc_ms": 0.0, "full_collections": 0}
    started: list[float] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            spent["gc_ms"] += (time.perf_counter() - started.pop()) * 1000
            if info.get("generation") == 2:
                spent["full_collections"] += 1

    gc.callbacks.append(timed)
    try:
        yield spent
    finally:
        gc.callbacks.remove(timed)
        gc.unfreeze()
        spent["gc_ms"] = round(spent["gc_ms"], 1)
