"""Packing splits into Spark tasks: bounded by bytes, in whole waves of the task slots, the
largest task as small as whole files allow, order kept."""

import itertools
import random

import pytest

from raptorx_py.datasource.planning.planner import Split, pack_splits


def splits(*sizes):
    return [Split(f"file:///t/f{i}", size, None, None) for i, size in enumerate(sizes)]


def shape(tasks):
    return [[int(s.url.rsplit("f", 1)[1]) for s in t] for t in tasks]


@pytest.mark.parametrize(
    "sizes, max_bytes, min_count, expected",
    [
        ((10,) * 8, 1000, 1, [list(range(8))]),  # all fit in one task
        ((10,) * 8, 1000, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]),  # the minimum count wins
        ((10,) * 8, 30, 1, [[0, 1, 2], [3, 4, 5], [6, 7]]),  # the byte bound wins
        ((100, 1, 1, 100), 50, 1, [[0], [1, 2], [3]]),  # big files stand alone
        ((10, 10), 1000, 8, [[0], [1]]),  # fewer files than the minimum
        ((0, 0, 0), 1000, 2, [[0, 1, 2]]),  # empty files cost nothing
        # TPC-H Q6 at SF 1: 12 monthly files on 2 slots are one wave of 2 tasks (a target of half
        # the bytes, filled greedily, made 6 + 5 + 1 files: a second wave for one file).
        (
            (2988, 2732, 3027, 2936, 3012, 2919, 3004, 3001, 2938, 2991, 2922, 2995),
            64000,
            2,
            [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]],
        ),
        ((30, 30, 30, 30, 5), 60, 2, [[0], [1], [2], [3, 4]]),  # 3 tasks needed: 2 waves of 2
        ((), 1000, 8, []),
    ],
)
def test_pack_splits(sizes, max_bytes, min_count, expected):
    tasks = pack_splits(splits(*sizes), max_bytes, min_count)
    assert shape(tasks) == expected
    assert [s for t in tasks for s in t] == splits(*sizes)  # nothing lost, order kept


def largest(tasks):
    return max((sum(s.size for s in t) for t in tasks), default=0)


@pytest.mark.parametrize("seed", range(200))
def test_pack_splits_is_the_best_cut_into_whole_waves(seed):
    rng = random.Random(seed)
    sizes = [rng.choice((0, 1, 5, 10, 40, 100)) for _ in range(rng.randint(1, 8))]
    max_bytes, min_count = rng.choice((50, 100, 1000)), rng.randint(1, 4)
    given = splits(*sizes)
    tasks = pack_splits(given, max_bytes, min_count)

    assert [s for t in tasks for s in t] == given  # nothing lost, order kept
    assert all(t for t in tasks)
    assert all(len(t) == 1 or sum(s.size for s in t) <= max_bytes for t in tasks)

    # Every way to cut the files into contiguous tasks of at most max_bytes (a bigger file
    # alone): the fewest tasks, rounded up to whole waves, bound the count, and no cut into
    # that many has a smaller largest task.
    def cuts():
        n = len(given)
        for k in range(n):
            for inner in itertools.combinations(range(1, n), k):
                b = (0, *inner, n)
                cut = [given[x:y] for x, y in zip(b, b[1:])]
                if all(len(t) == 1 or sum(s.size for s in t) <= max_bytes for t in cut):
                    yield cut

    all_cuts = list(cuts())
    slots = max(1, min(min_count, len(given)))
    waves = -(-min(len(c) for c in all_cuts) // slots) * slots
    assert len(tasks) <= waves
    assert largest(tasks) == min(largest(c) for c in all_cuts if len(c) <= waves)
