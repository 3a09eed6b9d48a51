"""Pushed-down predicates: one small, picklable form of what Spark pushes, evaluated three
ways with SQL's three-valued logic:

- on partition values (exactly, in Python) to prune partitions;
- on min/max/null statistics (metastore partition stats, Parquet row-group stats) to skip
  partitions and row groups that cannot hold a matching row (``may_match``);
- as an Arrow expression over record batches, so rows are dropped before they reach the JVM.

A predicate is *exact* when its Arrow (or partition-value) evaluation agrees with Spark's for
every row, including nulls; only exact predicates are reported to Spark as handled. The rest
are returned to Spark and are neither used for pruning nor evaluated here.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from raptorx_py.errors import SchemaError
from raptorx_py.hive.column_types import is_exactly_comparable
from raptorx_py.hive.model import ColumnStats


@dataclass(frozen=True)
class Comparison:
    op: str  # one of "=", "<=>", "<", "<=", ">", ">="
    column: str
    value: Any


@dataclass(frozen=True)
class InList:
    column: str
    values: tuple


@dataclass(frozen=True)
class IsNull:
    column: str


@dataclass(frozen=True)
class IsNotNull:
    column: str


@dataclass(frozen=True)
class StringMatch:
    kind: str  # "starts", "ends", "contains"
    column: str
    value: str


@dataclass(frozen=True)
class Not:
    child: Predicate


Predicate = Comparison | InList | IsNull | IsNotNull | StringMatch | Not

_OPS = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def columns_of(p: Predicate) -> set[str]:
    return columns_of(p.child) if isinstance(p, Not) else {p.column}


# -- from Spark ---------------------------------------------------------------------------
def from_spark_filter(f, column_types: dict[str, str]) -> Predicate | None:
    """Our form of a ``pyspark.sql.datasource`` filter, or None if it cannot be handled.

    Raises SchemaError when the filter names a column the table does not have.
    """
    from pyspark.sql import datasource as ds

    if isinstance(f, ds.Not):
        child = from_spark_filter(f.child, column_types)
        return Not(child) if child is not None else None
    attr = f.attribute
    if len(attr) != 1:
        return None  # nested field
    column = attr[0]
    if column not in column_types:
        raise SchemaError(
            f"filter on column '{column}', which does not exist. Columns: {', '.join(column_types)}"
        )
    simple: dict[type, str] = {
        ds.EqualTo: "=",
        ds.EqualNullSafe: "<=>",
        ds.GreaterThan: ">",
        ds.GreaterThanOrEqual: ">=",
        ds.LessThan: "<",
        ds.LessThanOrEqual: "<=",
    }
    op = simple.get(type(f))  # these exact classes, as Spark builds them
    if op is not None:
        if f.value is None and op != "<=>":
            return None
        return Comparison(op, column, f.value)
    if isinstance(f, ds.In):
        if any(v is None for v in f.value):
            return None
        return InList(column, tuple(f.value))
    if isinstance(f, ds.IsNull):
        return IsNull(column)
    if isinstance(f, ds.IsNotNull):
        return IsNotNull(column)
    kinds: dict[type[ds.StringStartsWith | ds.StringEndsWith | ds.StringContains], str] = {
        ds.StringStartsWith: "starts",
        ds.StringEndsWith: "ends",
        ds.StringContains: "contains",
    }
    for cls, kind in kinds.items():
        if isinstance(f, cls):
            return StringMatch(kind, column, f.value)
    return None


def is_exact(p: Predicate, column_types: dict[str, str], partition_keys: set[str]) -> bool:
    """Whether evaluating ``p`` here gives exactly Spark's answer for every row.

    Partition keys follow the same rule as columns: a double key's values are Python floats
    here, whose NaN is unequal to itself where Spark's is equal.
    """
    return all(is_exactly_comparable(column_types[c]) for c in columns_of(p))


# -- on values (partition pruning) ----------------------------------------------------------
def evaluate(p: Predicate, row: dict[str, Any]) -> bool | None:
    """SQL three-valued evaluation of ``p`` on one row of Python values (None is null)."""
    if isinstance(p, Not):
        r = evaluate(p.child, row)
        return None if r is None else not r
    v = row.get(p.column)
    if isinstance(p, IsNull):
        return v is None
    if isinstance(p, IsNotNull):
        return v is not None
    if isinstance(p, Comparison) and p.op == "<=>":
        return v == p.value if v is not None and p.value is not None else v is p.value
    if v is None:
        return None
    if isinstance(p, Comparison):
        return _OPS[p.op](v, p.value)
    if isinstance(p, InList):
        return v in p.values
    if isinstance(p, StringMatch):
        return {"starts": v.startswith, "ends": v.endswith, "contains": v.__contains__}[p.kind](
            p.value
        )
    raise TypeError(f"unknown predicate {p!r}")


# -- on statistics ------------------------------------------------------------------------
def may_match(p: Predicate, stats: dict[str, ColumnStats], row_count: int | None) -> bool:
    """False only if no row described by ``stats`` can satisfy ``p``."""
    try:
        return _may_match(p, stats, row_count)
    except TypeError:  # a value Spark pushed that does not compare with the stats' type
        return True


def _negated_null_test(child: Predicate) -> Predicate | None:
    """``NOT child`` as a null test when ``child`` is one (``NOT IS NULL`` is ``IS NOT
    NULL`` and the other way round); None for any other ``child``."""
    if isinstance(child, IsNull):
        return IsNotNull(child.column)
    if isinstance(child, IsNotNull):
        return IsNull(child.column)
    return None


def _may_match(p: Predicate, stats: dict[str, ColumnStats], row_count: int | None) -> bool:
    if isinstance(p, Not):
        child = p.child
        null_test = _negated_null_test(child)
        if null_test is not None:
            return _may_match(null_test, stats, row_count)
        if isinstance(child, Comparison) and child.op == "=":
            s = stats.get(child.column)
            # every non-null value equals v: "not (x = v)" holds for none of them.
            return not (s and s.low is not None and s.low == s.high == child.value)
        return True
    s = stats.get(p.column)
    if s is None:
        return True
    all_null = (
        s.num_nulls is not None
        and row_count is not None
        and s.num_nulls >= row_count
        and row_count > 0
    )
    if isinstance(p, IsNull):
        return s.num_nulls is None or s.num_nulls > 0
    if isinstance(p, IsNotNull):
        return not all_null
    if isinstance(p, Comparison) and p.op == "<=>" and p.value is None:
        return s.num_nulls is None or s.num_nulls > 0
    if all_null:
        return False
    lo, hi = s.low, s.high
    if lo is None or hi is None:
        return True
    if isinstance(p, Comparison):
        v = p.value
        return {
            "=": lo <= v <= hi,
            "<=>": lo <= v <= hi,
            "<": lo < v,
            "<=": lo <= v,
            ">": hi > v,
            ">=": hi >= v,
        }[p.op]
    if isinstance(p, InList):
        return any(lo <= v <= hi for v in p.values)
    if isinstance(p, StringMatch) and p.kind == "starts" and isinstance(lo, str):
        return not (hi < p.value) and not (lo[: len(p.value)] > p.value)
    return True


def always_true(p: Predicate, stats: dict[str, ColumnStats], row_count: int | None) -> bool:
    """True only if every row described by ``stats`` satisfies ``p`` (is TRUE for it, not
    null): the predicate can then be dropped from the work on those rows. Unknown statistics,
    floating point bounds or values that do not compare: False (keep the predicate)."""
    try:
        return _always_true(p, stats, row_count)
    except TypeError:
        return False


def _all_null(s: ColumnStats, row_count: int | None) -> bool:
    return s.num_nulls is not None and row_count is not None and s.num_nulls >= row_count


def _always_true(p: Predicate, stats: dict[str, ColumnStats], row_count: int | None) -> bool:
    if isinstance(p, Not):
        child = p.child
        null_test = _negated_null_test(child)
        if null_test is not None:
            return _always_true(null_test, stats, row_count)
        if isinstance(child, Not):  # NOT NOT c is TRUE exactly where c is (and null where c is)
            return _always_true(child.child, stats, row_count)
        s = stats.get(child.column)
        # NOT c is TRUE where c is FALSE: c must be false (not null) on every row.
        return (
            s is not None
            and s.num_nulls == 0
            and not isinstance(s.low, float)
            and not _may_match(child, stats, row_count)
        )
    s = stats.get(p.column)
    if s is None:
        return False
    if isinstance(p, IsNull) or (isinstance(p, Comparison) and p.op == "<=>" and p.value is None):
        return _all_null(s, row_count)
    if isinstance(p, IsNotNull):
        return s.num_nulls == 0
    lo, hi = s.low, s.high
    if s.num_nulls != 0 or lo is None or hi is None or isinstance(lo, float):
        return False
    if isinstance(p, Comparison):
        v = p.value
        return {
            "=": lo == hi == v,
            "<=>": lo == hi == v,
            "<": hi < v,
            "<=": hi <= v,
            ">": lo > v,
            ">=": lo >= v,
        }[p.op]
    if isinstance(p, InList):
        return lo == hi and lo in p.values
    if isinstance(p, StringMatch) and p.kind == "starts" and isinstance(lo, str):
        # Every string between two that start with the prefix starts with it too.
        return lo.startswith(p.value) and hi.startswith(p.value)
    return False


def residual(
    predicates, stats: dict[str, ColumnStats], row_count: int | None
) -> tuple[Predicate, ...]:
    """``predicates`` less those the statistics make always true, in a canonical order (by
    their text), so two queries that differ only in what was dropped ask for the same work."""
    return tuple(sorted((p for p in predicates if not always_true(p, stats, row_count)), key=repr))


# -- as Arrow -------------------------------------------------------------------------------
def to_arrow(p: Predicate) -> pc.Expression:
    """An Arrow expression with Spark's null semantics (null where Spark gives null)."""
    if isinstance(p, Not):
        return ~to_arrow(p.child)
    f = pc.field(p.column)
    if isinstance(p, IsNull):
        return f.is_null()
    if isinstance(p, IsNotNull):
        return f.is_valid()
    if isinstance(p, Comparison):
        if p.op == "<=>":
            if p.value is None:
                return f.is_null()
            # null <=> v is false, never null
            return f.is_valid() & (f == pa.scalar(p.value))
        value = pa.scalar(p.value)
        return {
            "=": f == value,
            "<": f < value,
            "<=": f <= value,
            ">": f > value,
            ">=": f >= value,
        }[p.op]
    if isinstance(p, InList):
        # Arrow's is_in gives false for a null input where SQL gives null; "~(f == f)" is
        # null exactly for null inputs, so the OR restores SQL's answer.
        return f.isin(list(p.values)) | ~(f == f)
    if isinstance(p, StringMatch):
        fn = {"starts": pc.starts_with, "ends": pc.ends_with, "contains": pc.match_substring}[
            p.kind
        ]
        return fn(f, pattern=p.value)
    raise TypeError(f"unknown predicate {p!r}")


def conjunction(predicates: list[Predicate]) -> pc.Expression | None:
    expr = None
    for p in predicates:
        e = to_arrow(p)
        expr = e if expr is None else expr & e
    return expr
