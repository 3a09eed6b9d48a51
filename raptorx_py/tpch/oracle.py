"""DuckDB as the TPC-H oracle, and a tolerant comparison of query results.

``duckdb_results`` runs the queries of ``raptorx_py.tpch.queries`` in DuckDB over the same
Hive-layout Parquet files Spark reads (partition columns typed VARCHAR, as in Spark with type
inference off). ``compare_results`` says how two result sets differ, or returns None.

Comparison rules (why: the two engines type some results differently — DuckDB divides and
averages decimals in DOUBLE, Spark keeps DECIMAL with 6 fractional digits — and both are
correct TPC-H answers):

- Numbers: two ints must be equal. Otherwise values match when they differ by at most one
  unit in the last place of the coarser DECIMAL operand (``0.01`` — a cent — for money,
  ``0.000001`` for Spark's decimal averages and quotients). When either side is a float, a
  relative difference of ``REL_TOL`` (1e-6) is also accepted. Decimal, float and int are
  compared as numbers, so ``Decimal('2.50') == 2.5``.
- Dates: ``datetime`` at midnight equals the ``date`` of that day; otherwise exact.
- Strings, booleans, None: exact.
- Order: with ``ordered=False`` rows are compared as multisets. With ``ordered=True`` and no
  ``sort_key``, position by position. With ``ordered=True`` and ``sort_key`` (the output
  positions of the ORDER BY columns, ``queries.ORDER_BY_COLUMNS[n]``), the sequence of sort
  keys must match position by position, and within each run of equal sort keys the rows
  may come in any order: exactly the freedom ORDER BY leaves to an engine when keys tie.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from raptorx_py.tpch.queries import PARTITION_COLUMNS, TABLES, query_text

REL_TOL = 1e-6
_ABS_FLOAT_TOL = 1e-9
#: Above this many rows, an unordered comparison that failed on sorted rows is reported
#: without trying the quadratic best-effort matching.
_MAX_MATCHING_ROWS = 20_000


# --------------------------------------------------------------------------- DuckDB


def duckdb_connection(data_dir: str, *, threads: int | None = None):
    """A DuckDB connection with one view per TPC-H table over ``data_dir/<table>``."""
    import duckdb

    con = duckdb.connect(":memory:")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    base = Path(data_dir)
    for table in TABLES:
        table_dir = base / table
        if not table_dir.is_dir():
            raise FileNotFoundError(f"TPC-H table directory {table_dir} does not exist")
        part_col = PARTITION_COLUMNS.get(table)
        if part_col:
            pattern = str(table_dir / "*" / "*.parquet")
            source = (
                f"read_parquet('{_sql_str(pattern)}', hive_partitioning = true, "
                f"hive_types = {{'{part_col}': VARCHAR}})"
            )
        else:
            pattern = str(table_dir / "*.parquet")
            source = f"read_parquet('{_sql_str(pattern)}', hive_partitioning = false)"
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM {source}")
    return con


def duckdb_results(
    data_dir: str,
    query_numbers: Iterable[int],
    scale: float,
    *,
    threads: int | None = None,
    parameters: Mapping[int, Mapping[str, str]] | None = None,
) -> dict[int, list[tuple]]:
    """Run the given TPC-H queries in DuckDB over the Hive-layout files in ``data_dir``, with
    ``parameters`` (query number -> substitution set, ``parameters.parameter_set``) or the
    validation values.

    Returns query number -> rows as plain tuples (Decimal, float, int, str, date values).
    """
    con = duckdb_connection(data_dir, threads=threads)
    try:
        return {
            n: [
                tuple(r)
                for r in con.execute(
                    query_text(n, scale, "duckdb", None if parameters is None else parameters[n])
                ).fetchall()
            ]
            for n in query_numbers
        }
    finally:
        con.close()


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


# --------------------------------------------------------------------------- Spark


def spark_rows(df) -> list[tuple]:
    """Collect a Spark DataFrame into plain tuples (Row is a tuple; nested Rows too)."""
    return [plain_value(row) for row in df.collect()]


def plain_value(value: Any) -> Any:
    if isinstance(value, tuple):  # pyspark Row
        return tuple(plain_value(v) for v in value)
    return value


# --------------------------------------------------------------------------- comparison


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def _decimal_ulp(v: Any) -> Decimal | None:
    if isinstance(v, Decimal) and v.is_finite():
        exponent = v.as_tuple().exponent  # an int: only infinities and NaNs have a letter
        if isinstance(exponent, int) and exponent < 0:
            return Decimal(1).scaleb(exponent)
        return Decimal(1)
    return None


def values_equal(a: Any, b: Any) -> bool:
    """One value against another under the rules in the module docstring."""
    if a is None or b is None:
        return a is None and b is None
    if _is_number(a) and _is_number(b):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if isinstance(a, float) or isinstance(b, float):
            fa, fb = float(a), float(b)
            if math.isnan(fa) or math.isnan(fb):
                return math.isnan(fa) and math.isnan(fb)
            if fa == fb:
                return True
            tol = max(REL_TOL * max(abs(fa), abs(fb)), _ABS_FLOAT_TOL)
            ulps = [u for u in (_decimal_ulp(a), _decimal_ulp(b)) if u is not None]
            if ulps:
                tol = max(tol, float(max(ulps)))
            return abs(fa - fb) <= tol
        da, db = Decimal(a), Decimal(b)
        ulps = [u for u in (_decimal_ulp(a), _decimal_ulp(b)) if u is not None]
        return abs(da - db) <= max(ulps)
    if isinstance(a, _dt.date) and isinstance(b, _dt.date):
        return _norm_date(a) == _norm_date(b)
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        return False
    return a == b


def _norm_date(v: _dt.date) -> Any:
    if isinstance(v, _dt.datetime):
        if v.time() == _dt.time(0) and v.tzinfo is None:
            return v.date()
        return v
    return v


def rows_equal(a: Sequence, b: Sequence) -> bool:
    return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))


def _sort_token(v: Any) -> tuple:
    """A total-order key for rows of mixed value types (None first, numbers as floats)."""
    if v is None:
        return (0, 0)
    if isinstance(v, bool):
        return (1, int(v))
    if _is_number(v):
        f = float(v)
        return (2, 0.0 if math.isnan(f) else f)
    if isinstance(v, _dt.date):
        return (3, _norm_date(v).isoformat())
    return (4, str(v))


def _row_token(row: Sequence) -> tuple:
    return tuple(_sort_token(v) for v in row)


def _fmt(row: Sequence | None) -> str:
    return "(none)" if row is None else repr(tuple(row))


def _multiset_difference(
    expected: Sequence[Sequence], actual: Sequence[Sequence]
) -> tuple[list, list]:
    """Rows of ``expected`` with no match in ``actual`` and vice versa (tolerant matching)."""
    exp = sorted(expected, key=_row_token)
    act = sorted(actual, key=_row_token)
    if len(exp) == len(act) and all(rows_equal(x, y) for x, y in zip(exp, act)):
        return [], []
    if len(exp) + len(act) > _MAX_MATCHING_ROWS:
        # Report the first mismatch of the sorted sequences only.
        for x, y in zip(exp, act):
            if not rows_equal(x, y):
                return [x], [y]
        return exp[len(act) :], act[len(exp) :]
    unmatched_act = list(act)
    missing = []
    for row in exp:
        for i, cand in enumerate(unmatched_act):
            if rows_equal(row, cand):
                del unmatched_act[i]
                break
        else:
            missing.append(row)
    return missing, unmatched_act


def compare_results(
    expected_rows: Sequence[Sequence],
    actual_rows: Sequence[Sequence],
    *,
    ordered: bool,
    sort_key: Sequence[int] | None = None,
) -> str | None:
    """None when ``actual_rows`` matches ``expected_rows``; otherwise what differs.

    See the module docstring for the value tolerances and how ``ordered`` and ``sort_key``
    treat row order. The message gives both row counts and the first differing rows.
    """
    expected = [tuple(r) for r in expected_rows]
    actual = [tuple(r) for r in actual_rows]
    head = f"expected {len(expected)} rows, got {len(actual)}"
    widths = {len(r) for r in expected} | {len(r) for r in actual}
    if len(widths) > 1:
        return f"{head}; rows have different numbers of columns: {sorted(widths)}"

    if not ordered:
        missing, extra = _multiset_difference(expected, actual)
        if not missing and not extra:
            return None
        return (
            f"{head} (unordered); {len(missing)} expected rows unmatched, "
            f"{len(extra)} actual rows unmatched; first expected unmatched: "
            f"{_fmt(missing[0] if missing else None)}; first actual unmatched: "
            f"{_fmt(extra[0] if extra else None)}"
        )

    if not sort_key:
        for i, (x, y) in enumerate(zip(expected, actual)):
            if not rows_equal(x, y):
                return _ordered_message(head, i, x, y, expected, actual)
        if len(expected) != len(actual):
            i = min(len(expected), len(actual))
            return _ordered_message(head, i, _at(expected, i), _at(actual, i), expected, actual)
        return None

    # Ordered with tie freedom: sort keys position by position, rows as multisets per run.
    key = tuple(sort_key)

    def key_of(row):
        return tuple(row[k] for k in key)

    for i, (x, y) in enumerate(zip(expected, actual)):
        if not rows_equal(key_of(x), key_of(y)):
            return _ordered_message(
                head, i, x, y, expected, actual, what=f"sort key (columns {list(key)}) differs"
            )
    if len(expected) != len(actual):
        i = min(len(expected), len(actual))
        return _ordered_message(head, i, _at(expected, i), _at(actual, i), expected, actual)
    start = 0
    while start < len(expected):
        end = start + 1
        while end < len(expected) and rows_equal(key_of(expected[end]), key_of(expected[start])):
            end += 1
        missing, extra = _multiset_difference(expected[start:end], actual[start:end])
        if missing or extra:
            return (
                f"{head}; rows {start}..{end - 1} (equal sort keys) differ: first expected "
                f"unmatched {_fmt(missing[0] if missing else None)}, first actual "
                f"unmatched {_fmt(extra[0] if extra else None)}"
            )
        start = end
    return None


def _at(rows: Sequence, i: int):
    return rows[i] if i < len(rows) else None


def _ordered_message(head: str, i: int, x, y, expected, actual, what: str = "differs") -> str:
    msg = f"{head}; row {i} {what}: expected {_fmt(x)}, got {_fmt(y)}"
    if _multiset_difference(expected, actual) == ([], []):
        msg += " (same rows as a multiset: only the order differs)"
    return msg
