"""Rendezvous hashing of file paths over hosts, then their executors
(``scheduling.affinity``), and its bound on imbalance, without Spark."""

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


def test_adding_a_host_takes_only_about_one_in_hosts():
    ex = executors(4)  # two hosts, two executors each
    before = assignment(PATHS, ex)
    new = Executor("10.0.0.3", "9")
    after = assignment(PATHS, ex + [new])
    moved = [p for p in PATHS if before[p] != after[p]]
    assert all(after[p] == new for p in moved)  # nothing moves between old executors
    # Hosts are weighed first: the third host takes about a third of the files.
    assert abs(len(moved) - len(PATHS) / 3) < len(PATHS) * 0.03


def test_hosts_first_then_their_executors():
    ex = executors(5)  # 10.0.0.2: ids 0, 2, 4; 10.0.0.1: ids 1, 3
    for p in PATHS[:500]:
        order = ranked(p, ex, 5)
        hosts = [e.host for e in order]
        # Each host's executors together, the path's best host first.
        assert hosts == sorted(hosts, key=lambda h: -affinity.host_weight(h, p))
        for h in set(hosts):
            ids = [e.id for e in order if e.host == h]
            assert ids == sorted(ids, key=lambda i: -affinity.weight(i, p))
    counts = Counter(e.host for e in assignment(PATHS, ex).values())
    # Shares by host, not by executor: about half each although one has 3 executors.
    assert abs(counts["10.0.0.2"] - len(PATHS) / 2) < len(PATHS) * 0.04, counts


def test_an_executor_replaced_on_its_host_keeps_the_host_s_files():
    ex = executors(4)
    before = assignment(PATHS, ex)
    gone = ex[1]  # 10.0.0.1, id 1
    new = Executor(gone.host, "7")
    after = assignment(PATHS, [e for e in ex if e != gone] + [new])
    assert all(before[p].host == after[p].host for p in PATHS)  # no file changes host
    moved = {p for p in PATHS if before[p] != after[p]}
    # Within the host: the replaced executor's files (to either executor of its host),
    # and the sibling's files the new executor now outweighs it on.
    assert {p for p in PATHS if before[p] == gone} <= moved
    assert all(after[p] == new or before[p] == gone for p in moved)
    # The one executor of a host replaced: every file stays, on the new executor.
    single = [Executor("a", "0"), Executor("b", "1")]
    replaced = [Executor("a", "0"), Executor("b", "5")]
    one, two = assignment(PATHS, single), assignment(PATHS, replaced)
    assert {p for p in PATHS if one[p] != two[p]} == {p for p in PATHS if one[p].id == "1"}
    assert all(two[p].id == "5" for p in PATHS if one[p].id == "1")


def test_a_bound_on_imbalance_sends_files_of_a_busy_executor_to_their_second_choice():
    ex = [Executor("a", "0"), Executor("b", "1")]
    owner = assignment(PATHS, ex)
    # Skewed on purpose: 60 files prefer the first executor, 21 the second.
    paths = [p for p in PATHS if owner[p] == ex[0]][:60] + [p for p in PATHS if owner[p] == ex[1]][
        :21
    ]
    loads = {p: 1 for p in paths}
    unbounded, moved = affinity.balanced_assignment(loads, ex, 0)
    assert moved == 0 and unbounded == assignment(paths, ex)
    before = Counter(unbounded.values())
    for bound in (1, 2, 5):
        placed, moved = affinity.balanced_assignment(loads, ex, bound)
        counts = Counter(placed.values())
        # Within the bound, and only as many files moved as that takes, all off the busy
        # executor, each to its second choice.
        spread = abs(before[ex[0]] - before[ex[1]])
        assert max(counts.values()) - min(counts.values()) <= bound, (bound, counts)
        changed = [p for p in paths if placed[p] != unbounded[p]]
        assert len(changed) == moved == (spread - bound + 1) // 2 > 0, (bound, spread)
        assert all(placed[p] == ranked(p, ex, 2)[1] for p in changed)
        assert len({unbounded[p] for p in changed}) <= 1
    # Weighted by splits: a 3-split file counts three.
    placed, _ = affinity.balanced_assignment({paths[0]: 3, paths[1]: 1}, ex, 1)
    assert set(placed) == {paths[0], paths[1]}
    assert affinity.balanced_assignment(loads, [], 1) == ({}, 0)


def test_an_executor_location_names_its_host():
    assert affinity.host_of_location(Executor("127.0.0.2", "13").location) == "127.0.0.2"
    with pytest.raises(ValueError, match="not an executor location"):
        affinity.host_of_location("127.0.0.2")


def test_second_choice_is_another_executor_and_executors_on_one_host_are_apart():
    ex = [Executor("h", "0"), Executor("h", "1")]
    first, second = ranked("p", ex, 2)
    assert first != second and {first, second} == set(ex)
    # With a sibling on the preferred host, the second choice is that sibling (same caches).
    three = ex + [Executor("g", "2")]
    for p in PATHS[:200]:
        a, b = ranked(p, three, 2)
        if a.host == "h":
            assert b.host == "h"
    assert first.location == f"executor_h_{first.id}"
    assert ranked("p", ex, 5) == (first, second)
    assert preferred("p", []) is None and ranked("p", ex, 0) == ()


def test_executor_list_option_round_trips_and_names_a_bad_item():
    ex = (Executor("127.0.0.1", "0"), Executor("127.0.0.1", "1"))
    assert affinity.parse_executors(affinity.format_executors(reversed(ex))) == ex
    assert affinity.parse_executors("") == () and affinity.parse_executors(None) == ()
    with pytest.raises(ValueError, match="bad executor 'nohost'"):
        affinity.parse_executors("nohost")
