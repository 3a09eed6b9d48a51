"""Counting the metastore's round trips, whichever backend makes them.

One SQL statement (``sql_session.SqlSession``, ``executemany`` being one batch) or one Thrift
call (``thrift_store.ThriftConnection``, each attempt) is one round trip, counted as
``metastore.round_trips``; a thread inside ``counting_as(name)`` counts its round trips as
``name`` instead (the metastore cache's background refresher counts
``metastore.refresh_round_trips``), so a timer's work never blurs a query's count. Both
backends count here, so neither imports the other to count.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from raptorx_py.metrics import counters

__all__ = ["ROUND_TRIPS", "count_round_trip", "counting_as"]

#: What every round trip counts as, unless its thread is inside ``counting_as``.
ROUND_TRIPS = "metastore.round_trips"
_counting = threading.local()


@contextmanager
def counting_as(name: str) -> Iterator[None]:
    """Count this thread's round trips as ``name`` instead of ``metastore.round_trips``."""
    previous = getattr(_counting, "name", None)
    _counting.name = name
    try:
        yield
    finally:
        if previous is None:
            del _counting.name
        else:
            _counting.name = previous


def count_round_trip() -> None:
    """Count one round trip to the metastore (one statement, one Thrift call) as
    ``metastore.round_trips``, or as the name of this thread's ``counting_as``."""
    counters.add(getattr(_counting, "name", ROUND_TRIPS))
