"""A partial aggregation pushed into the scan: each split returns its groups, not its rows.

The JVM provider (``native/.../PartialAggregation.scala``) accepts what Spark pushes and sends
it as JSON, read into a ``PushedAggregation`` by ``jvm_contract/pushed_aggregation.py``:
group-by columns, and ``sum``/``count``/``count_star``/``min``/``max`` over expressions of
columns, literals, widening casts and ``+ - *``, each node with its Spark type. Spark keeps
the final aggregate: it sums the partial sums and counts and takes the min of the mins.

Contract, per split (``aggregate_split``), after the pushed filters:
- one row per group (null is a group), in no particular order; no row for an empty split;
- each value has exactly the type Spark's rewritten plan expects: a ``count`` is a bigint;
  a ``sum``, ``min`` or ``max`` has its input's type. Spark casts a partial sum to its
  input's type before the final ``SUM``, so a group whose sum does not fit that type is
  returned as several rows whose sums do (the exact sum split greedily; the other
  aggregates of the extra rows are null, their counts 0). The final ``SUM`` then sees
  values that add up exactly to the split's sum and overflows (null, wrap-around or error
  under ``spark.sql.ansi.enabled``) as Spark's own would on the same total;
- arithmetic is Spark's ANSI arithmetic (the only arithmetic Spark translates for a source):
  exact, then rounded half away from zero to the node's decimal scale; a value that does
  not fit the node's type fails the read (``AggregateOverflowError``), as Spark fails.

A decimal product is computed exactly in Arrow's 76-digit decimal and rounded once. Spark
4.3 first truncates a product to 39 significant digits, then rounds to the scale; the digit
that decides the rounding of a result that fits its type is always among those 39, so the
two agree on every value.

Limits: a split's input columns are held in memory at once.

Usable without Spark (pyspark only for its type mapping).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, localcontext

import pyarrow as pa
import pyarrow.compute as pc

from raptorx_py.errors import AggregateOverflowError, SchemaError
from raptorx_py.hive.column_types import arrow_type_for_spark
from raptorx_py.jvm_contract.pushed_aggregation import Expr, PushedAggregation
from raptorx_py.metrics import counters

_INTEGER_RANGES = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31, "bigint": 2**63}


# -- expressions ------------------------------------------------------------------------------
def _decimal_parts(t: pa.DataType) -> tuple[int, int] | None:
    return (t.precision, t.scale) if pa.types.is_decimal(t) else None


def _fit_decimal(x, p: int, s: int, what: Expr):
    """``x`` (an exact decimal) rounded half away from zero to scale ``s``, as decimal(p, s);
    fails when it needs more than ``p`` digits (Spark's ANSI overflow)."""
    xp, xs = x.type.precision, x.type.scale
    if xs <= s and xp - xs <= p - s:  # no digit lost, none too many: exact, cannot overflow
        return (
            x.cast(pa.decimal128(p, s))
            if (xp, xs) != (p, s) or isinstance(x.type, pa.Decimal256Type)
            else x
        )
    if xs > s:
        x = pc.round(x, ndigits=s, round_mode="half_towards_infinity")
    x = x.cast(pa.decimal256(76, s))
    limit = pa.scalar(Decimal(10) ** (p - s), pa.decimal256(76, s))
    over = pc.or_(pc.greater_equal(x, limit), pc.less_equal(x, pc.negate(limit)))
    if pc.any(over).as_py():
        raise AggregateOverflowError(
            f"pushed aggregation: {what} overflows decimal({p},{s}) "
            f"[NUMERIC_VALUE_OUT_OF_RANGE] (Spark's ANSI arithmetic fails the query so)"
        )
    return x.cast(pa.decimal128(p, s)) if p <= 38 else x


def evaluate(e: Expr, table: pa.Table, memo: dict | None = None):
    """The values of ``e`` over ``table`` (an Array, or a Scalar for a literal). ``memo``
    keeps each node's values for the others of one split (Q1 repeats its subexpressions)."""
    if memo is None:
        memo = {}
    if e not in memo:
        memo[e] = _evaluate(e, table, memo)
    return memo[e]


def _exact_type(op: str, a: pa.DataType, b: pa.DataType) -> tuple[int, int]:
    """Precision and scale of the exact result of ``a op b`` (decimals)."""
    if op == "*":
        return a.precision + b.precision + 1, a.scale + b.scale
    s = max(a.scale, b.scale)
    return max(a.precision - a.scale, b.precision - b.scale) + s + 1, s


def _evaluate(e: Expr, table: pa.Table, memo: dict):
    out_type = arrow_type_for_spark(e.type)
    if e.op == "column":
        col = table.column(e.column_name)
        return col if col.type == out_type else col.cast(out_type)
    if e.op == "literal":
        text = e.literal_text
        value = Decimal(text) if pa.types.is_decimal(out_type) else int(text)
        return pa.scalar(value, out_type)
    if e.op == "cast":
        child = evaluate(e.children[0], table, memo)
        try:  # the provider pushes widening casts only, so a safe cast cannot fail
            return child.cast(out_type)
        except (pa.ArrowInvalid, OverflowError) as err:
            raise AggregateOverflowError(f"pushed aggregation: {e} overflows {e.type}") from err
    left, right = (evaluate(c, table, memo) for c in e.children)
    dec = _decimal_parts(out_type)
    if dec is None:  # integers of one type: Spark's ANSI add/subtract/multiply (exact)
        fn = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}[e.op]
        try:
            return fn(left, right)
        except pa.ArrowInvalid as err:
            raise AggregateOverflowError(
                f"pushed aggregation: {e} overflows {e.type} [ARITHMETIC_OVERFLOW] "
                f"(Spark's ANSI arithmetic fails the query so)"
            ) from err
    fn = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}[e.op]
    if _exact_type(e.op, left.type, right.type)[0] <= 38:  # exact in decimal128: cheaper
        return _fit_decimal(fn(left, right), dec[0], dec[1], e)
    wide = [v.cast(pa.decimal256(v.type.precision, v.type.scale)) for v in (left, right)]
    return _fit_decimal(fn(*wide), dec[0], dec[1], e)


# -- aggregation ----------------------------------------------------------------------------
def _bound(type_name: str) -> tuple[Decimal, Decimal] | None:
    """The inclusive range of a sum's type (None: no bound to keep)."""
    t = arrow_type_for_spark(type_name)
    if pa.types.is_decimal(t):
        top = Decimal(10) ** (t.precision - t.scale) - Decimal(1).scaleb(-t.scale)
        return -top, top
    n = _INTEGER_RANGES.get(type_name)
    return (Decimal(-n), Decimal(n - 1)) if n else None


def _wide_sum_type(t: pa.DataType) -> pa.DataType:
    """A type in which a split's exact sum of values of ``t`` cannot overflow (fewer than
    10^10 rows, each of at most 28 digits in decimal128, else decimal256; Arrow sums a
    decimal128 in decimal128(38) and an int32 or narrower in int64)."""
    if pa.types.is_decimal(t):
        return t if t.precision <= 28 and pa.types.is_decimal128(t) else pa.decimal256(76, t.scale)
    if t in (pa.int8(), pa.int16(), pa.int32()):
        return t
    return pa.decimal128(38, 0)


def aggregate_split(
    agg: PushedAggregation, table: pa.Table | None, num_rows: int, out_schema: pa.Schema
) -> pa.RecordBatch | None:
    """The partial rows of one split's filtered rows (``table``: the input columns; None or
    no columns for ``count(*)`` alone, with ``num_rows``). For an empty split:
    ``empty_result``."""
    counters.add("aggregation.splits")
    counters.add("aggregation.rows_in", num_rows)
    if num_rows == 0:
        return empty_result(agg, out_schema)
    work: dict[str, pa.Array] = {}
    for i, (name, _) in enumerate(agg.group_by):
        work[f"k{i}"] = _read_columns(table).column(name)
    # pyarrow's aggregation specs: (column(s), function[, options]).
    specs: list[tuple[str | list[str], str] | tuple[str, str, pc.FunctionOptions]] = []
    memo: dict[Expr, pa.Array | pa.Scalar] = {}
    for i, a in enumerate(agg.aggregates):
        if a.fn == "count_star":
            specs.append(([], "count_all"))
            continue
        if a.input is None:
            raise SchemaError(f"pushed aggregation: {a.fn} has no input expression")
        values = evaluate(a.input, _read_columns(table), memo)
        if isinstance(values, pa.Scalar):
            values = pa.array([values.as_py()] * num_rows, values.type)
        if a.fn == "sum":
            work[f"v{i}"] = values.cast(_wide_sum_type(values.type))
            specs.append((f"v{i}", "sum", pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)))
        elif a.fn == "count":
            work[f"v{i}"] = values
            specs.append((f"v{i}", "count", pc.CountOptions(mode="only_valid")))
        else:
            work[f"v{i}"] = values
            specs.append((f"v{i}", a.fn, pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)))
    keys = [f"k{i}" for i in range(len(agg.group_by))]
    if work:
        grouped = pa.table(work).group_by(keys, use_threads=False).aggregate(specs)
    else:  # count(*) alone, no column read
        grouped = pa.table({"count_all": pa.array([num_rows], pa.int64())})
    out = {}
    for i in range(len(agg.group_by)):
        out[f"k{i}"] = grouped.column(f"k{i}")
    extra: list[dict] = []
    for i, a in enumerate(agg.aggregates):
        col = grouped.column("count_all" if a.fn == "count_star" else f"v{i}_{a.fn}")
        if a.fn == "sum":
            col, rows = _sums_in_range(agg, i, a, col, grouped, work, keys)
            extra += rows
        out[f"a{i}"] = col
    arrays = [out[f"k{i}"] for i in range(len(agg.group_by))] + [
        out[f"a{i}"] for i in range(len(agg.aggregates))
    ]
    arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    arrays = [a.cast(f.type) for a, f in zip(arrays, out_schema)]
    batch = pa.RecordBatch.from_arrays(arrays, schema=out_schema)
    if extra:
        batch = _with_extra_rows(batch, extra, agg, out_schema)
    counters.add("aggregation.groups_out", batch.num_rows)
    return batch


def _read_columns(table: pa.Table | None) -> pa.Table:
    """The split's input columns, which an aggregation reading any column needs."""
    if table is None:
        raise ValueError("pushed aggregation: the aggregates read columns, but none were read")
    return table


def empty_result(agg: PushedAggregation, out_schema: pa.Schema) -> pa.RecordBatch | None:
    """The partial result of no rows: none for a grouped aggregation; for a global one, one
    row (counts 0, the rest null), because Spark merges partial counts with a SUM, which is
    null over no rows where COUNT is 0."""
    if agg.group_by:
        return None
    arrays = [
        pa.array([0 if a.fn in ("count", "count_star") else None], f.type)
        for a, f in zip(agg.aggregates, out_schema)
    ]
    counters.add("aggregation.groups_out")
    return pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _sums_in_range(agg, i, a, col, grouped, work, keys):
    """The sums of aggregate ``i`` per group, each within its type; a group whose sum is not
    is split greedily over its rows: the group's row keeps the last part, and the other parts
    become extra rows (returned as dicts: key values and this sum)."""
    bound = _bound(a.type)
    if bound is None or len(col) == 0:
        return col, []
    lo, hi = bound
    scale = col.type.scale if pa.types.is_decimal(col.type) else 0
    lo_s, hi_s = pa.scalar(lo, pa.decimal256(76, scale)), pa.scalar(hi, pa.decimal256(76, scale))
    c256 = col.cast(pa.decimal256(76, scale))
    out_of_range = pc.or_(pc.less(c256, lo_s), pc.greater(c256, hi_s))
    if not pc.any(out_of_range).as_py():
        return col, []
    bad_rows = [r for r, v in enumerate(out_of_range.to_pylist()) if v]
    key_rows = list(zip(*(grouped.column(k).to_pylist() for k in keys))) if keys else [()]
    bad = {key_rows[r]: r for r in bad_rows}
    values = work[f"v{i}"].to_pylist()
    # Each row's group key; a global aggregation's one group is ().
    row_keys = list(zip(*(work[k].to_pylist() for k in keys))) if keys else [()] * len(values)
    running: dict[tuple, Decimal] = {}
    extra = []
    with localcontext() as ctx:
        ctx.prec = 200  # exact: Python's default context rounds to 28 digits
        for r, v in enumerate(values):
            key = row_keys[r]
            if v is None or key not in bad:
                continue
            total = running.get(key)
            if total is None:
                running[key] = v
            elif lo <= total + v <= hi:
                running[key] = total + v
            else:
                extra.append({"key": key, "index": i, "value": total})
                running[key] = v
    sums = col.to_pylist()
    for key, r in bad.items():
        sums[r] = running[key]
    counters.add("aggregation.sums_split", len(extra))
    return pa.array(sums, col.type), extra


def _with_extra_rows(
    batch: pa.RecordBatch, extra: list[dict], agg: PushedAggregation, out_schema: pa.Schema
) -> pa.RecordBatch:
    nk = len(agg.group_by)
    rows = []
    for e in extra:
        row = list(e["key"])
        for j, a in enumerate(agg.aggregates):
            if j == e["index"]:
                t = out_schema.field(nk + j).type
                row.append(int(e["value"]) if pa.types.is_integer(t) else e["value"])
            else:
                row.append(0 if a.fn in ("count", "count_star") else None)
        rows.append(row)
    cols = list(zip(*rows))
    more = pa.RecordBatch.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(cols, out_schema)], schema=out_schema
    )
    assert more.num_columns == nk + len(agg.aggregates)
    return pa.Table.from_batches([batch, more]).combine_chunks().to_batches()[0]


def aggregate_batches(
    agg: PushedAggregation, batches: Iterable[pa.RecordBatch], out_schema: pa.Schema
) -> pa.RecordBatch | None:
    """``aggregate_split`` over the batches one split's reader produced."""
    batches = list(batches)
    num_rows = sum(b.num_rows for b in batches)
    table = None
    if batches and batches[0].num_columns:
        table = pa.Table.from_batches(batches)
    return aggregate_split(agg, table, num_rows, out_schema)
