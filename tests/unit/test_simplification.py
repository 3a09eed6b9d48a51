"""Statistics-based predicate simplification (predicates.always_true / residual) and the
planner's deterministic file pieces, without Spark."""

from __future__ import annotations

import datetime as dt
import itertools
import random
from decimal import Decimal

import pytest

from raptorx_py.datasource.planning.planner import Split, cut_each_file, piece_bytes
from raptorx_py.hive.model import ColumnStats
from raptorx_py.predicates import (
    Comparison,
    InList,
    IsNotNull,
    IsNull,
    Not,
    StringMatch,
    always_true,
    evaluate,
    may_match,
    residual,
)

S = {"x": ColumnStats(0, 10, 20), "s": ColumnStats(0, "abc", "abz"), "n": ColumnStats(3, 1, 5)}
ROWS = 100


@pytest.mark.parametrize(
    "p,expected",
    [
        (Comparison(">=", "x", 10), True),
        (Comparison(">", "x", 9), True),
        (Comparison(">", "x", 10), False),
        (Comparison("<", "x", 21), True),
        (Comparison("<=", "x", 20), True),
        (Comparison("<", "x", 20), False),
        (Comparison("=", "x", 10), False),
        (InList("x", (10, 20)), False),
        (IsNotNull("x"), True),
        (IsNull("x"), False),
        (Not(IsNull("x")), True),
        (Not(Comparison("<", "x", 10)), True),  # x < 10 false on every row, no nulls
        (Not(Comparison("<", "x", 11)), False),
        # NOT NOT c is c (null where c is null)
        (Not(Not(Comparison(">=", "x", 10))), True),
        (Not(Not(Comparison(">", "x", 10))), False),
        (Not(Not(Comparison(">=", "n", 0))), False),
        (StringMatch("starts", "s", "ab"), True),
        (StringMatch("starts", "s", "abc"), False),
        (StringMatch("ends", "s", "c"), False),
        # a column with nulls: a comparison is null there, never always true
        (Comparison(">=", "n", 0), False),
        (Not(Comparison("<", "n", 0)), False),
        (IsNotNull("n"), False),
        (Comparison(">=", "missing", 0), False),
        (Comparison(">=", "x", "a string"), False),  # does not compare: kept
    ],
)
def test_always_true(p, expected):
    assert always_true(p, S, ROWS) is expected


def test_a_single_valued_column():
    one = {"x": ColumnStats(0, 7, 7)}
    assert always_true(Comparison("=", "x", 7), one, 5)
    assert always_true(InList("x", (1, 7)), one, 5)
    assert always_true(Comparison("<=>", "x", 7), one, 5)


def test_all_nulls():
    nulls = {"x": ColumnStats(5, None, None)}
    assert always_true(IsNull("x"), nulls, 5)
    assert always_true(Comparison("<=>", "x", None), nulls, 5)
    assert not always_true(IsNull("x"), nulls, None)  # row count unknown


def test_floating_point_bounds_are_never_trusted():
    assert not always_true(Comparison(">", "f", 0.0), {"f": ColumnStats(0, 1.0, 2.0)}, 3)


def test_residual_is_canonical():
    a, b, c = Comparison(">=", "x", 10), Comparison("<", "x", 50), Comparison("<", "x", 15)
    assert residual([b, a, c], S, ROWS) == residual([c, a, b], S, ROWS) == (c,)
    # a moving bound below every row gives the same residual as any other such bound
    assert residual([Comparison(">=", "x", 5), c], S, ROWS) == residual([a, c], S, ROWS)


def _random_predicate(rng: random.Random, values: list):
    v = rng.choice(values + [rng.randint(-5, 30)])
    kind = rng.randrange(7)
    if kind == 0:
        return Comparison(rng.choice(["=", "<", "<=", ">", ">=", "<=>"]), "x", v)
    if kind == 1:
        return InList("x", tuple(rng.sample(range(-2, 25), 3)) + (v,))
    if kind == 2:
        return IsNull("x")
    if kind == 3:
        return IsNotNull("x")
    if kind == 4:
        return Not(Comparison(rng.choice(["=", "<", ">="]), "x", v))
    if kind == 5:
        return Not(IsNull("x"))
    return Comparison("<=>", "x", None)


@pytest.mark.parametrize("kind", ["int", "decimal", "date"])
def test_a_dropped_predicate_holds_on_every_row(kind):
    """Seeded random rows, their exact statistics, random predicates: whenever the
    statistics say a predicate is always true, it is TRUE (not false, not null) on every
    row."""
    rng = random.Random(20261124)
    convert = {
        "int": lambda i: i,
        "decimal": lambda i: Decimal(i) / 4,
        "date": lambda i: dt.date(2021, 1, 1) + dt.timedelta(days=i),
    }[kind]
    dropped = 0
    for _ in range(3000):
        n = rng.randint(0, 6)
        ints = [
            rng.choice([None] + list(range(0, 20))) if rng.random() < 0.3 else rng.randint(8, 12)
            for _ in range(n)
        ]
        rows = [None if i is None else convert(i) for i in ints]
        present = [r for r in rows if r is not None]
        stats = {
            "x": ColumnStats(
                len(rows) - len(present),
                min(present) if present else None,
                max(present) if present else None,
            )
        }
        p = _random_predicate(rng, [i for i in ints if i is not None])
        p = _converted(p, convert)
        if always_true(p, stats, len(rows)):
            dropped += 1
            assert all(evaluate(p, {"x": r}) is True for r in rows), (p, rows)
    assert dropped > 100  # the property was exercised


def _converted(p, convert):
    if isinstance(p, Not):
        return Not(_converted(p.child, convert))
    if isinstance(p, Comparison) and p.value is not None:
        return Comparison(p.op, p.column, convert(p.value))
    if isinstance(p, InList):
        return InList(p.column, tuple(convert(v) for v in p.values))
    return p


# Every type whose predicates the source evaluates, with bounds as Parquet
# writers record them: exact, or looser than the values (a string's bounds truncated: the low
# a prefix of the smallest value, the high a prefix of the largest with its last character
# incremented, as parquet-mr and Arrow truncate long strings).
_STRINGS = sorted({"".join(t) for n in range(4) for t in itertools.product("aeé", repeat=n)})
_UNIVERSE = {
    "int": list(range(-3, 25)),
    "decimal": [Decimal(i) / 4 for i in range(-3, 25)],
    "date": [dt.date(2021, 1, 1) + dt.timedelta(days=i) for i in range(-3, 25)],
    "timestamp_ntz": [
        dt.datetime(2021, 1, 1) + dt.timedelta(seconds=i // 3, microseconds=i % 3)
        for i in range(-9, 75)
    ],
    "boolean": [False, True],
    "string": _STRINGS,
}


def _bounds(rng: random.Random, kind: str, present: list, loose: bool):
    lo, hi = min(present), max(present)
    if not loose:
        return lo, hi
    if kind == "string":
        lo = lo[: rng.randint(0, len(lo))]
        if hi:
            k = rng.randint(1, len(hi))
            hi = hi if k == len(hi) else hi[: k - 1] + chr(ord(hi[k - 1]) + 1)
        return lo, hi
    universe = _UNIVERSE[kind]
    return (
        rng.choice([v for v in universe if v <= lo]),
        rng.choice([v for v in universe if v >= hi]),
    )


def _typed_predicate(rng: random.Random, kind: str, values: list):
    universe = _UNIVERSE[kind]
    v = rng.choice(values + [rng.choice(universe)])
    choice = rng.randrange(9 if kind == "string" else 7)
    if choice == 0:
        return Comparison(rng.choice(["=", "<", "<=", ">", ">=", "<=>"]), "x", v)
    if choice == 1:
        return InList("x", tuple(rng.sample(universe, min(3, len(universe)))) + (v,))
    if choice == 2:
        return rng.choice([IsNull("x"), IsNotNull("x"), Not(IsNull("x"))])
    if choice == 3:
        return Not(Comparison(rng.choice(["=", "<", ">="]), "x", v))
    if choice == 4:
        return Comparison("<=>", "x", None)
    if choice in (5, 6):  # a value the rows hold: the bounds' edge cases
        return Comparison(rng.choice(["<=", ">=", "=", "<", ">"]), "x", rng.choice(values or [v]))
    prefix = v[: rng.randint(0, len(v))] if rng.random() < 0.8 else rng.choice(_STRINGS)
    return rng.choice([StringMatch("starts", "x", prefix), Not(StringMatch("starts", "x", prefix))])


@pytest.mark.parametrize("loose", [False, True], ids=["exact", "loose"])
@pytest.mark.parametrize("kind", ["int", "decimal", "date", "timestamp_ntz", "boolean", "string"])
def test_a_dropped_predicate_holds_on_every_row_of_every_type(kind, loose):
    """Seeded random rows of each type, statistics that bound them (exact, or loose as a
    writer truncates them), random predicates: whenever the statistics say a predicate is
    always true, it is TRUE on every row; whenever they say no row may match, none does."""
    rng = random.Random(f"20261125-{kind}-{loose}")
    universe = _UNIVERSE[kind]
    dropped = pruned = 0
    for _ in range(3000):
        centre = rng.randrange(len(universe))
        near = universe[max(0, centre - 2) : centre + 3]
        rows = [
            None if rng.random() < 0.15 else rng.choice(near if rng.random() < 0.8 else universe)
            for _ in range(rng.randint(0, 6))
        ]
        present = [r for r in rows if r is not None]
        lo, hi = _bounds(rng, kind, present, loose) if present else (None, None)
        stats = {"x": ColumnStats(len(rows) - len(present), lo, hi)}
        p = _typed_predicate(rng, kind, present)
        if always_true(p, stats, len(rows)):
            dropped += 1
            assert all(evaluate(p, {"x": r}) is True for r in rows), (p, rows, stats)
        if rows and not may_match(p, stats, len(rows)):
            pruned += 1
            assert not any(evaluate(p, {"x": r}) is True for r in rows), (p, rows, stats)
    assert dropped > 50 and pruned > 50, (dropped, pruned)  # the property was exercised


def test_fixed_pieces_do_not_depend_on_the_rest_of_the_scan():
    big = Split("file:///t/a.parquet", 40 * 2**20, "mtime:1.0", None)
    other = Split("file:///t/b.parquet", 40 * 2**20, "mtime:1.0", None)
    alone = cut_each_file([big], 64 * 2**20, 2)
    with_others = cut_each_file([big, other], 64 * 2**20, 2)
    assert len(alone) == 2 and with_others[:2] == alone
    # the scan-relative piece size moves with the scan: what the fragment cache must avoid
    assert piece_bytes([big], 64 * 2**20, 2) != piece_bytes([big, other], 64 * 2**20, 2)
