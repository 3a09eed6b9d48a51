"""The per-query snapshot store behind one snapshot per query: the first scan's snapshot wins
for its query and table, other queries and tables are apart, old entries expire."""

from __future__ import annotations

from pyspark.sql.types import LongType, StructField, StructType

from raptorx_py.datasource.query_snapshots import (
    MAX_AGE,
    TOKEN_KEY,
    ProcessQuerySnapshots,
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
