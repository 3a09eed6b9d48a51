"""The insert-only ACID layout: Hive's directory names and which ones a snapshot reads."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from raptorx_py.hive.write_ids import ValidWriteIdList
from raptorx_py.storage.acid_layout import (
    acid_state,
    base_dir_name,
    delta_dir_name,
    parse_acid_dir,
    visible_directories,
    visible_files,
)


def deltas(*ids: int) -> list[str]:
    return [delta_dir_name(w) for w in ids]


def test_names_are_hives():
    assert delta_dir_name(5) == "delta_0000005_0000005"
    assert delta_dir_name(3, 12) == "delta_0000003_0000012"
    assert base_dir_name(17) == "base_0000017"
    assert base_dir_name(12345678) == "base_12345678"


@pytest.mark.parametrize(
    "name,expected",
    [
        ("delta_0000005_0000005", (5, 5, False)),
        ("delta_0000003_0000009_0002", (3, 9, False)),  # statement id
        ("delta_0000003_0000009_v0000042", (3, 9, False)),  # visibility txn id
        ("base_0000012", (12, 12, True)),
        ("base_0000012_v0000099", (12, 12, True)),
        ("/warehouse/t/p=1/base_0000007/", (7, 7, True)),
    ],
)
def test_parse(name, expected):
    d = parse_acid_dir(name)
    assert (d.min_write_id, d.max_write_id, d.is_base) == expected


@pytest.mark.parametrize(
    "name",
    [
        "delete_delta_0000001_0000001",
        "delta_5",
        "base_",
        "p=1",
        "delta_0000009_0000003",
        "_tmp",
        ".staging-1-abc",
        "basement_0000001",
    ],
)
def test_other_names_are_not_acid(name):
    assert parse_acid_dir(name) is None


def test_the_short_form_example():
    """ValidWriteIdLists in their short form ``[hwm:exceptions]``: [12:7,8,12] commits 1..6,
    9, 10, 11; so does [11:7,8]; [12:7,12] adds 8."""
    names = deltas(*range(1, 13))
    expected = deltas(1, 2, 3, 4, 5, 6, 9, 10, 11)
    assert visible_directories(names, ValidWriteIdList.from_short_form("[12:7,8,12]")) == expected
    assert visible_directories(names, ValidWriteIdList.from_short_form("[11:7,8]")) == expected
    assert visible_directories(names, ValidWriteIdList.from_short_form("[12:7,12]")) == deltas(
        1, 2, 3, 4, 5, 6, 8, 9, 10, 11
    )


def test_newest_committed_base_hides_what_is_below_it():
    names = deltas(1, 2) + [base_dir_name(3)] + deltas(4) + [base_dir_name(5)] + deltas(6)
    snap = ValidWriteIdList("db.t", 6)
    state = acid_state(names, snap)
    assert state.visible == (base_dir_name(5), delta_dir_name(6))
    assert not state.originals_visible
    assert {d.name for d in state.obsolete} == {base_dir_name(3), *deltas(1, 2, 4)}


def test_uncommitted_base_is_never_chosen():
    names = deltas(1, 2) + [base_dir_name(3)]
    # open: the overwrite is still running; the reader keeps reading the deltas
    assert visible_directories(names, ValidWriteIdList("db.t", 3, {3})) == deltas(1, 2)
    # aborted: same, forever
    assert visible_directories(names, ValidWriteIdList("db.t", 3, (), {3})) == deltas(1, 2)
    # above the high-water mark (allocated after the snapshot)
    assert visible_directories(names, ValidWriteIdList("db.t", 2)) == deltas(1, 2)


def test_base_above_an_open_write_id_is_not_valid():
    """Hive's isValidBase: a base must not cover a write id open in the snapshot."""
    names = deltas(1) + [base_dir_name(3)]
    snap = ValidWriteIdList("db.t", 3, {2})
    assert visible_directories(names, snap) == deltas(1)


def test_open_aborted_and_future_deltas_are_invisible():
    names = deltas(1, 2, 3, 4, 5)
    snap = ValidWriteIdList("db.t", 4, {2}, {3})
    state = acid_state(names, snap)
    assert state.visible == tuple(deltas(1, 4))
    assert {d.name for d in state.invisible} == set(deltas(2, 3, 5))
    assert state.originals_visible


def test_compacted_delta_range():
    names = [delta_dir_name(1, 5)] + deltas(3, 6)
    assert visible_directories(names, ValidWriteIdList("db.t", 6)) == [
        delta_dir_name(1, 5),
        delta_dir_name(6),
    ]
    # a range covering an aborted id is not read whole; its parts are
    names = [delta_dir_name(1, 3)] + deltas(1, 3)
    assert visible_directories(names, ValidWriteIdList("db.t", 3, (), {2})) == deltas(1, 3)


def test_without_a_snapshot_nothing_is_guessed():
    with pytest.raises(ValueError, match="ValidWriteIdList"):
        acid_state(deltas(1), None)


@dataclass(frozen=True)
class F:
    path: str


def test_visible_files_filters_a_recursive_listing():
    root = "/w/t/p=1"
    files = [
        F(f"{root}/original.parquet"),
        F(f"{root}/{delta_dir_name(1)}/a.parquet"),
        F(f"{root}/{delta_dir_name(2)}/b.parquet"),
        F(f"{root}/{delta_dir_name(2)}/c.parquet"),
        F(f"{root}/other/d.parquet"),
    ]
    got = visible_files(files, root + "/", ValidWriteIdList("db.t", 2, (), {1}))
    assert [f.path.rsplit("/", 1)[-1] for f in got] == [
        "original.parquet",
        "b.parquet",
        "c.parquet",
    ]
    files.append(F(f"{root}/{base_dir_name(2)}/e.parquet"))
    got = visible_files(files, root, ValidWriteIdList("db.t", 2))
    assert [f.path.rsplit("/", 1)[-1] for f in got] == ["e.parquet"]


def test_random_histories_match_a_model():
    """Against a direct model: after the newest committed base, every committed append."""
    rng = random.Random(20261123)
    for _ in range(300):
        n = rng.randint(1, 15)
        ops = {w: rng.choice(["append", "append", "overwrite"]) for w in range(1, n + 1)}
        states = {w: rng.choice(["c", "c", "c", "o", "a"]) for w in ops}
        hwm = rng.randint(0, n)
        snap = ValidWriteIdList(
            "db.t",
            hwm,
            {w for w in ops if w <= hwm and states[w] == "o"},
            {w for w in ops if w <= hwm and states[w] == "a"},
        )
        names = [
            base_dir_name(w) if op == "overwrite" else delta_dir_name(w) for w, op in ops.items()
        ]
        committed = [w for w in ops if snap.is_visible(w)]
        bases = [w for w in committed if ops[w] == "overwrite" and snap.is_valid_base(w)]
        floor = max(bases, default=0)
        expected = ([base_dir_name(floor)] if bases else []) + [
            delta_dir_name(w) for w in committed if w > floor and ops[w] == "append"
        ]
        assert visible_directories(names, snap) == expected, (ops, states, snap)
