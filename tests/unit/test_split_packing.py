"""Packing splits into Spark tasks: bounded by bytes, at least the minimum count, order kept."""

import pytest

from raptorx_py.datasource.planner import Split, pack_splits


def splits(*sizes):
    return [Split(f"file:///t/f{i}", size, None, None) for i, size in enumerate(sizes)]


def shape(tasks):
    return [[int(s.url.rsplit("f", 1)[1]) for s in t] for t in tasks]


@pytest.mark.parametrize("sizes, max_bytes, min_count, expected", [
    ((10,) * 8, 1000, 1, [list(range(8))]),                  # all fit in one task
    ((10,) * 8, 1000, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]),   # the minimum count wins
    ((10,) * 8, 30, 1, [[0, 1, 2], [3, 4, 5], [6, 7]]),       # the byte bound wins
    ((100, 1, 1, 100), 50, 1, [[0], [1, 2], [3]]),            # big files stand alone
    ((10, 10), 1000, 8, [[0], [1]]),                          # fewer files than the minimum
    ((0, 0, 0), 1000, 2, [[0, 1, 2]]),                        # empty files cost nothing
    ((), 1000, 8, []),
])
def test_pack_splits(sizes, max_bytes, min_count, expected):
    tasks = pack_splits(splits(*sizes), max_bytes, min_count)
    assert shape(tasks) == expected
    assert [s for t in tasks for s in t] == splits(*sizes)  # nothing lost, order kept
