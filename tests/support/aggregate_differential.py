"""Random tables and random aggregate queries for the differential test of aggregation
pushdown (``test_aggregate_differential.py``).

A table (``write_table``) is Hive-partitioned Parquet (``k`` string, with a null partition;
``n`` int), 1-3 files per partition (some of no rows), small row groups, and columns of
every type the source reads: integers of every width, decimals of precision 18, 19 and 38
with scale, date, string (with non-ASCII and supplementary characters), boolean, timestamp,
timestamp_ntz, binary, double (with -0.0, NaN and infinities), each with nulls, its type's
edge values and, in some files, no value at all. A query (``random_query``) groups by 0-2
columns and asks 1-4 of ``SUM COUNT COUNT(*) MIN MAX AVG try_sum try_avg`` over columns and
the arithmetic Spark translates, with or without a filter.

What the generator leaves out, and why: a query whose answer from Spark itself depends on the
order rows are added in. Spark adds a bigint or decimal ``SUM`` row by row; under ANSI an
intermediate sum past the type's range fails the query even when the total is in range, and
a decimal partial past it is null. So the columns whose sums can reach their type's edge
hold values of one sign (``big_pos``, ``big_neg``, ``d38p``), where an intermediate sum is
out of range exactly when the total is; the mixed-sign ones (``big_mix``, ``d38m``) stay far
from it. Double sums are over multiples of 1/8 small enough to be exact in any order.

Everything is drawn from one ``random.Random(seed)``: a failure names its seed and query.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import re
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

I64_MAX = 2**63 - 1
D18_MAX = Decimal("9999999999999999.99")
D19_MAX = Decimal("999999999999999.9999")
D38_MAX = Decimal("9" * 28 + "." + "9" * 10)
UTC = dt.UTC


@dataclass(frozen=True)
class Column:
    name: str
    arrow: pa.DataType
    edges: tuple  # values drawn often: the type's extremes and their neighbours
    draw: object  # rng -> an ordinary value


def _d(text: str) -> Decimal:
    return Decimal(text)


def _ts(*a) -> dt.datetime:
    return dt.datetime(*a, tzinfo=UTC)


COLUMNS: tuple[Column, ...] = (
    # low-cardinality group keys
    Column("g", pa.int32(), (0, 1, 2, 3), lambda r: r.randint(0, 3)),
    Column("gs", pa.string(), ("", "a", "é", "\uff5e", "\U0001f600"), lambda r: r.choice("abc")),
    Column(
        "gd",
        pa.date32(),
        (dt.date(1, 1, 1), dt.date(1582, 10, 4), dt.date(9999, 12, 31)),
        lambda r: dt.date(2000, 1, 1) + dt.timedelta(days=r.randint(0, 2)),
    ),
    Column(
        "gdec",
        pa.decimal128(19, 4),
        (D19_MAX, -D19_MAX, _d("0.0000")),
        lambda r: _d(r.choice(["1.5000", "-1.5000", "2.0001"])),
    ),
    Column("gx", pa.float64(), (0.0, -0.0, math.nan), lambda r: r.choice([1.0, 2.0])),
    Column("gbin", pa.binary(), (b"", b"\x00", b"\xff"), lambda r: r.choice([b"a", b"ab"])),
    Column(
        "gntz",
        pa.timestamp("us"),
        (dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
        lambda r: r.choice([dt.datetime(2000, 1, 1), dt.datetime(2000, 1, 1, 0, 0, 0, 1)]),
    ),
    Column(
        "gts",
        pa.timestamp("us", tz="UTC"),
        (_ts(1883, 11, 18, 12), _ts(1970, 1, 1), _ts(2024, 3, 10, 10)),
        lambda r: r.choice([_ts(2000, 1, 1), _ts(2000, 1, 1, 0, 0, 0, 1)]),
    ),
    # values
    Column("t8", pa.int8(), (-128, 127, 0, -1), lambda r: r.randint(-128, 127)),
    Column("s16", pa.int16(), (-(2**15), 2**15 - 1, 0), lambda r: r.randint(-(2**15), 2**15 - 1)),
    Column("i32", pa.int32(), (-(2**31), 2**31 - 1, -1), lambda r: r.randint(-(2**31), 2**31 - 1)),
    Column("big_pos", pa.int64(), (I64_MAX, I64_MAX - 1, 0), lambda r: r.randint(0, I64_MAX)),
    Column("big_neg", pa.int64(), (-(2**63), -(2**63) + 1, 0), lambda r: -r.randint(0, 2**63)),
    Column("big_mix", pa.int64(), (2**40, -(2**40), 0), lambda r: r.randint(-(2**40), 2**40)),
    Column(
        "d18",
        pa.decimal128(18, 2),
        (D18_MAX, -D18_MAX, _d("0.01"), _d("-0.01")),
        lambda r: Decimal(r.randint(-(10**17), 10**17)).scaleb(-2),
    ),
    Column(
        "d19",
        pa.decimal128(19, 4),
        (D19_MAX, -D19_MAX, _d("0.0001")),
        lambda r: Decimal(r.randint(-(10**18), 10**18)).scaleb(-4),
    ),
    Column(
        "d38p",
        pa.decimal128(38, 10),
        (D38_MAX, D38_MAX - 1, _d("0E-10")),
        lambda r: Decimal(r.randint(0, 10**38 - 1)).scaleb(-10),
    ),
    Column(
        "d38m",
        pa.decimal128(38, 6),
        (Decimal(10**25), -Decimal(10**25), _d("0.000001")),
        lambda r: Decimal(r.randint(-(10**31), 10**31)).scaleb(-6),
    ),
    Column(
        "day",
        pa.date32(),
        (dt.date(1, 1, 1), dt.date(1970, 1, 1), dt.date(9999, 12, 31)),
        lambda r: dt.date(1900, 1, 1) + dt.timedelta(days=r.randint(0, 60_000)),
    ),
    Column(
        "s",
        pa.string(),
        ("", "a", "a\x00", "é", "\uff5e", "\U0001f600", "z" * 40),
        lambda r: "".join(r.choice("abé😀") for _ in range(r.randint(0, 4))),
    ),
    Column("b", pa.bool_(), (True, False), lambda r: r.random() < 0.5),
    Column(
        "ts",
        pa.timestamp("us", tz="UTC"),
        (_ts(1, 1, 1), _ts(1883, 11, 18, 12), _ts(9999, 12, 31, 23, 59, 59, 999999)),
        lambda r: _ts(2000, 1, 1) + dt.timedelta(seconds=r.randint(-(10**9), 10**9)),
    ),
    Column(
        "ntz",
        pa.timestamp("us"),
        (dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)),
        lambda r: dt.datetime(2000, 1, 1) + dt.timedelta(seconds=r.randint(-(10**9), 10**9)),
    ),
    Column(
        "x",
        pa.float64(),
        (-0.0, 0.0, math.nan, math.inf, -math.inf),
        lambda r: r.randint(-(2**20), 2**20) / 8,
    ),
)


def _values(rng: random.Random, col: Column, n: int, all_null: bool) -> list:
    if all_null:
        return [None] * n
    out = []
    for _ in range(n):
        p = rng.random()
        out.append(None if p < 0.15 else rng.choice(col.edges) if p < 0.4 else col.draw(rng))
    return out


def write_table(root: str, seed: int, max_rows: int) -> int:
    """Write a random table under ``root``; returns the number of files written."""
    rng = random.Random(seed)
    files = 0
    for k in ("a", "b", "__HIVE_DEFAULT_PARTITION__"):
        for n in (1, 2):
            d = os.path.join(root, f"k={k}", f"n={n}")
            os.makedirs(d)
            for f in range(rng.randint(1, 3)):
                rows = rng.choice([0, 1, 3, rng.randint(0, max_rows), max_rows])
                null_cols = {c.name for c in COLUMNS if rng.random() < 0.1}
                arrays = {
                    c.name: pa.array(_values(rng, c, rows, c.name in null_cols), c.arrow)
                    for c in COLUMNS
                }
                pq.write_table(
                    pa.table(arrays),
                    os.path.join(d, f"part-{f}.parquet"),
                    row_group_size=max(1, max_rows // 3),
                )
                files += 1
    return files


# -- queries --------------------------------------------------------------------------------
KEYS = ("k", "n", "g", "gs", "gd", "gdec", "b", "gx", "gts", "gntz", "gbin")
# Arguments of SUM/AVG whose sums Spark answers the same in any order (module docstring).
SUM_COLUMNS = (
    "t8",
    "s16",
    "i32",
    "big_pos",
    "big_neg",
    "big_mix",
    "d18",
    "d19",
    "d38p",
    "d38m",
    "gdec",
    "n",
    "x",
)
# Arithmetic (translated for the source under ANSI only): a row past its type's range fails
# the query under ANSI wherever it is evaluated. ``d38m * gdec`` has up to 41 significant
# digits, which Spark truncates to 39 before rounding (see
# docs/design/planning-and-jvm-provider.md, "Partial aggregation in the source").
SUM_EXPRESSIONS = (
    "i32 + t8",
    "s16 * 3",
    "big_pos + 1",
    "big_neg - big_pos",
    "cast(i32 AS bigint) * 1000",
    "d18 * t8",
    "d19 - d18",
    "d38p + 1",
    "d18 * 2.5",
    "d38m * gdec",
)
ORDERED_COLUMNS = (
    "t8",
    "s16",
    "i32",
    "big_pos",
    "big_mix",
    "d18",
    "d19",
    "d38p",
    "d38m",
    "day",
    "s",
    "b",
    "ts",
    "ntz",
    "x",
    "k",
    "n",
    "gd",
    "gts",
)
ORDERED_EXPRESSIONS = ("d18 * d19", "d19 * d19", "d38m * d38m", "d38m * gdec", "i32 - t8")
FILTERS = (
    "k = 'a'",
    "k IS NULL",
    "n >= 2",
    "g > 1",
    "g IS NULL",
    "gs = 'é'",
    "s LIKE 'a%'",
    "day >= date '2000-01-01'",
    "gd <> date '2000-01-02'",
    "b",
    "b IS NOT NULL",
    "d18 > 0",
    "i32 < 0",
    "big_mix <> 5",
    "d38p < 1",
    "x > 0",
    "ts > timestamp '2000-01-01 00:00:00'",
    "gdec IN (1.5, 2.0001)",
)
ZONES = ("UTC", "America/Los_Angeles", "Asia/Kolkata")


def _argument(rng: random.Random, columns: tuple[str, ...], expressions: tuple[str, ...]):
    # mostly plain columns: with ANSI off an expression keeps the whole query from pushdown
    return rng.choice(expressions if rng.random() < 0.25 else columns)


def _aggregate(rng: random.Random) -> str:
    fn = rng.choice(["sum", "sum", "count", "count(*)", "min", "max", "avg", "avg", "try"])
    if fn == "count(*)":
        return "count(*)"
    if fn == "count":
        return f"count({_argument(rng, SUM_COLUMNS + ORDERED_COLUMNS, SUM_EXPRESSIONS)})"
    if fn in ("min", "max"):
        return f"{fn}({_argument(rng, ORDERED_COLUMNS, ORDERED_EXPRESSIONS)})"
    if fn == "try":
        fn = rng.choice(["try_sum", "try_avg"])
    return f"{fn}({_argument(rng, SUM_COLUMNS, SUM_EXPRESSIONS)})"


@dataclass(frozen=True)
class Query:
    sql: str  # with ``{t}`` for the view
    zone: str  # spark.sql.session.timeZone
    precision_loss: bool  # spark.sql.decimalOperations.allowPrecisionLoss


def random_query(rng: random.Random) -> Query:
    keys = rng.sample(KEYS, rng.choice([0, 0, 1, 1, 2]))
    aggs = list(dict.fromkeys(_aggregate(rng) for _ in range(rng.randint(1, 4))))
    filters = rng.sample(FILTERS, rng.choice([0, 0, 1, 2]))
    sql = f"SELECT {', '.join(keys + aggs)} FROM {{t}}"
    if filters:
        sql += " WHERE " + " AND ".join(filters)
    if keys:
        sql += " GROUP BY " + ", ".join(keys)
    return Query(sql, rng.choice(ZONES), rng.random() < 0.75)


# -- comparison -----------------------------------------------------------------------------
# Spark's own answer for a double sum or average depends on the order of the additions (the
# test's double sums are exact, but an average of bigints near 2^63 is not).
DOUBLE_REL_TOL = 1e-12


# Spark's error conditions of arithmetic: the pushed reader's AggregateOverflowError names the
# one Spark's own evaluation raises, inside the error pyspark wraps it in.
ARITHMETIC_CONDITIONS = ("ARITHMETIC_OVERFLOW", "NUMERIC_VALUE_OUT_OF_RANGE")


def outcome(df) -> tuple[str, object]:
    """("rows", sorted rows) or ("error", Spark's error condition). Collected as Arrow:
    pyspark's row conversion of a timestamp goes through the local time zone and fails on
    the year 1, which would hide the answer of every query that returns one."""
    try:
        table = df.toArrow()
        rows = list(zip(*(column.to_pylist() for column in table.columns)))
    except Exception as err:  # noqa: BLE001 - the failure is the outcome compared
        text = str(err)
        for condition in ARITHMETIC_CONDITIONS:
            if f"[{condition}" in text:
                return ("error", condition)
        m = re.search(r"\[([A-Z_]+)[].]", text)
        return ("error", m.group(1) if m else type(err).__name__)
    return ("rows", sorted(rows, key=_row_key))


def _row_key(row: tuple) -> tuple:
    return tuple((v is None, type(v).__name__, repr(v)) for v in row)


def _value_equal(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if a == b:
            return True
        return abs(a - b) <= DOUBLE_REL_TOL * max(abs(a), abs(b))
    if isinstance(a, Decimal):
        return str(a) == str(b)  # same value and same scale
    return a == b


def difference(expected: tuple[str, object], got: tuple[str, object]) -> str | None:
    """None when ``got`` is ``expected`` (rows as multisets, doubles within the tolerance)."""
    if expected[0] == got[0] == "error" and {expected[1], got[1]} <= set(ARITHMETIC_CONDITIONS):
        # both fail on arithmetic: where a query has several values that fail (a decimal
        # product out of range, a bigint sum past 2^63), which one is met first depends on
        # the order of rows and expressions, in Spark's own evaluation too
        return None
    if expected[0] != got[0] or expected[0] == "error":
        return None if expected == got else f"expected {expected!r}, got {got!r}"
    want, have = list(expected[1]), list(got[1])  # type: ignore[call-overload]
    if len(want) != len(have):
        return f"expected {len(want)} rows, got {len(have)}: {want[:3]} / {have[:3]}"
    unmatched = list(have)
    for row in want:
        hit = next(
            (
                i
                for i, other in enumerate(unmatched)
                if len(row) == len(other) and all(map(_value_equal, row, other))
            ),
            None,
        )
        if hit is None:
            return f"expected row {row!r} not in {unmatched[:5]!r}"
        unmatched.pop(hit)
    return None
