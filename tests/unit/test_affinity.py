"""Rendezvous hashing of file paths over executors (``scheduling.affinity``), without Spark."""

import random
from collections import Counter

import pytest

from raptorx_py.scheduling import affinity
from raptorx_py.scheduling.affinity import Executor, assignment, preferred, ranked

PATHS = [f"s3://bucket/warehouse/tpch.db/lineitem/part-{i:05d}.parquet" for i in range(4000)]


def executors(n, host="10.0.0.1"):
    return [Executor(host if i % 2 else "10.0.0.2", str(i)) for i in range(n)]


def test_same_path_same_executor_whatever_the_order_of_the_list():
    ex = executors(5)
    shuffled = list(ex)
    random.Random(7).shuffle(shuffled)
    a, b = assignment(PATHS, ex), assignment(PATHS, shuffled)
    assert a == b
    # Stable across processes: a fixed expectation, not Python's salted hash().
    assert affinity.weight("1", "x") == affinity.weight("1", "x") != affinity.weight("2", "x")


def test_balanced_over_executors():
    ex = executors(4)
    rng = random.Random(42)
    paths = [f"s3://b/t/{rng.getrandbits(64):x}.parquet" for _ in range(8000)]
    counts = Counter(assignment(paths, ex).values())
    assert set(counts) == set(ex)
    for e in ex:  # 2000 expected each; well within 10%
        assert 1800 <= counts[e] <= 2200, counts


def test_removing_an_executor_moves_only_its_own_share():
    ex = executors(5)
    before = assignment(PATHS, ex)
    lost = ex[2]
    after = assignment(PATHS, [e for e in ex if e != lost])
    moved = {p for p in PATHS if before[p] != after[p]}
    assert moved == {p for p in PATHS if before[p] == lost}
    # ...each to its second choice before the loss.
    assert all(after[p] == ranked(p, ex, 2)[1] for p in moved)
    assert 0 < len(moved) < len(PATHS) / 3


def test_adding_an_executor_takes_only_about_one_nth():
    ex = executors(4)
    before = assignment(PATHS, ex)
    new = Executor("10.0.0.3", "9")
    after = assignment(PATHS, ex + [new])
    moved = [p for p in PATHS if before[p] != after[p]]
    assert all(after[p] == new for p in moved)  # nothing moves between old executors
    assert abs(len(moved) - len(PATHS) / 5) < len(PATHS) * 0.03


def test_second_choice_is_another_executor_and_executors_on_one_host_are_apart():
    ex = [Executor("h", "0"), Executor("h", "1")]
    first, second = ranked("p", ex, 2)
    assert first != second and {first, second} == set(ex)
    assert first.location == f"executor_h_{first.id}"
    assert ranked("p", ex, 5) == (first, second)
    assert preferred("p", []) is None and ranked("p", ex, 0) == ()


def test_executor_list_option_round_trips_and_names_a_bad_item():
    ex = (Executor("127.0.0.1", "0"), Executor("127.0.0.1", "1"))
    assert affinity.parse_executors(affinity.format_executors(reversed(ex))) == ex
    assert affinity.parse_executors("") == () and affinity.parse_executors(None) == ()
    with pytest.raises(ValueError, match="bad executor 'nohost'"):
        affinity.parse_executors("nohost")
