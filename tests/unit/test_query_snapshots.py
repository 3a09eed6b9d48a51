"""The per-query snapshot store behind one snapshot per query: the first scan's snapshot wins
for its query and table, other queries and tables are apart, old entries expire; the values a
query's first scan of a table read (its table, its listings) are kept for that query only."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from raptorx_py.datasource.planning.query_snapshots import (
    MAX_AGE,
    TOKEN_KEY,
    ProcessQuerySnapshots,
    ProcessQueryValues,
    query_token,
    snapshot_for_query,
)
from tests.support.fake_clock import FakeClock


def test_first_scan_of_a_table_in_a_query_wins(tmp_path):
    path = str(tmp_path / "qs.sqlite")
    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    assert snapshot_for_query("q1", "db.t", {"v": 1}, path=path, clock=clock) == {"v": 1}
    assert snapshot_for_query("q1", "db.t", {"v": 2}, path=path, clock=clock) == {"v": 1}
    assert snapshot_for_query("q1", "db.u", {"v": 3}, path=path, clock=clock) == {"v": 3}
    assert snapshot_for_query("q2", "db.t", {"v": 4}, path=path, clock=clock) == {"v": 4}
    now[0] += MAX_AGE + 1
    snapshot_for_query("q3", "db.t", {"v": 5}, path=path, clock=clock)  # expires the rest
    assert snapshot_for_query("q1", "db.t", {"v": 6}, path=path, clock=clock) == {"v": 6}


def test_the_token_rides_on_the_first_field():
    field = StructField("id", LongType(), True, {TOKEN_KEY: "abc"})
    assert query_token(StructType([field, StructField("x", LongType())])) == "abc"
    assert query_token(StructType([StructField("id", LongType())])) is None
    assert query_token(StructType([])) is None


def test_the_in_process_store_keeps_the_same_rule():
    """The driver's planner's store (every scan of a query planned in one process): the same
    first-scan-wins rule and expiry, without the SQLite file."""
    clock = FakeClock()
    store = ProcessQuerySnapshots(clock=clock)
    assert store.snapshot_for_query("q1", "db.t", {"v": 1}) == {"v": 1}
    assert store.snapshot_for_query("q1", "db.t", {"v": 2}) == {"v": 1}
    assert store.snapshot_for_query("q1", "db.u", {"v": 3}) == {"v": 3}
    assert store.snapshot_for_query("q2", "db.t", {"v": 4}) == {"v": 4}
    clock.advance(MAX_AGE + 1)
    store.snapshot_for_query("q3", "db.t", {"v": 5})  # expires the rest
    assert store.snapshot_for_query("q1", "db.t", {"v": 6}) == {"v": 6}


def test_a_querys_values_are_its_own_and_go_by_age_and_count():
    clock = FakeClock()
    values = ProcessQueryValues(max_entries=3, max_age=60.0, clock=clock)
    made = []

    def make(v):
        return lambda: made.append(v) or v

    assert values.get_or_make("q1", ("listing", "a"), make(("f1",))) == (("f1",), False)
    assert values.get_or_make("q1", ("listing", "a"), make(("f2",))) == (("f1",), True)
    assert values.get_or_make("q2", ("listing", "a"), make(("f3",))) == (("f3",), False)
    assert values.get_or_make("q1", ("listing", "b"), make(())) == ((), False)
    assert values.get_or_make("q1", ("listing", "b"), make(("x",))) == ((), True)  # empty kept
    assert made == [("f1",), ("f3",), ()]
    values.put("q3", "t", 1)  # a fourth entry: the oldest goes
    assert values.get("q1", ("listing", "a")) is None
    assert values.get("q2", ("listing", "a")) == ("f3",)
    clock.advance(61)
    values.put("q4", "t", 2)  # past max_age: every older entry goes
    assert values.get("q2", ("listing", "a")) is None and values.get("q3", "t") is None
    assert values.get("q4", "t") == 2


def test_a_value_made_ahead_is_the_first_takers_own_and_then_kept():
    """``put_ahead``: the first scan to take a value made ahead is the one it was made for
    (not ``kept``, and what making it counted joins that scan's counts); later scans of the
    query find it kept; a value is not made ahead twice, nor over one kept already."""
    from concurrent.futures import Future

    from raptorx_py.metrics import counters

    values = ProcessQueryValues()
    ahead: Future = Future()
    assert values.put_ahead("q", "t", ahead)
    assert not values.put_ahead("q", "t", Future())  # made ahead once
    values.put("q", "kept", 1)
    assert not values.put_ahead("q", "kept", Future())  # nor over a kept value
    ahead.set_result((("files",), {"storage.listings": 1}))
    with counters.scope() as scope:
        assert values.get_or_make("q", "t", lambda: pytest.fail("made again")) == (
            ("files",),
            False,
        )
    assert scope["storage.listings"] == 1  # the taker's counts
    with counters.scope() as scope:
        assert values.lookup("q", "t") == (("files",), True)
    assert scope["storage.listings"] == 0  # counted once


def test_a_value_that_failed_ahead_is_forgotten_and_made_by_the_scan():
    from concurrent.futures import Future

    values = ProcessQueryValues()
    ahead: Future = Future()
    values.put_ahead("q", "t", ahead)
    ahead.set_exception(OSError("store unreachable"))
    assert values.lookup("q", "t") == (None, False)
    assert values.get_or_make("q", "t", lambda: "mine") == ("mine", False)
    assert values.lookup("q", "t") == ("mine", True)
