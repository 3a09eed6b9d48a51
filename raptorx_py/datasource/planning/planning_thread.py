"""Whether this thread plans in the driver's planner (``driver_planner``) or in a planning
Python worker: the one flag the planning side's modules ask, below the planner itself."""

from __future__ import annotations

from contextlib import AbstractContextManager

from raptorx_py.metrics import counters
from raptorx_py.thread_flag import ThreadFlag

_serving = ThreadFlag()


def serving_planner() -> AbstractContextManager[None]:
    """This thread serves the driver planner (``planning_in_driver``) in the block."""
    return _serving.on()


def planning_in_driver() -> bool:
    """Whether this thread is serving the driver planner (not a Spark Python worker)."""
    return _serving.is_on()


def count_planning_call() -> None:
    """Count one planning entry (a source created, a scan planned) by where it runs: the
    driver's planner (``planning.driver_calls``) or a Python worker (``planning.worker_calls``)."""
    if planning_in_driver():
        counters.add("planning.driver_calls")
    else:
        counters.add("planning.worker_calls")
