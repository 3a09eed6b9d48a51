"""A partial aggregation pushed into a scan, as the JVM provider sends it: JSON in the
metadata of the partial schema's first field (``AGGREGATION_KEY``), written by
``native/.../PartialAggregation.scala`` and read here into ``PushedAggregation``.

The JSON (``version`` 1): ``group_by``, a list of ``{"column", "type"}``; ``aggregates``, a
list of ``{"fn", "type", "input"}`` (``fn``: ``sum``, ``count``, ``count_star``, ``min`` or
``max``; ``type``: the partial result's Spark type; ``input``: an expression, absent for
``count_star``); ``filters``, the scan's filters. An expression is ``{"op": "column",
"name"}``, ``{"op": "literal", "value"}``, ``{"op": "cast", "child"}`` or ``{"op": "+" |
"-" | "*", "left", "right"}``, each with its Spark ``type``. A filter is ``{"op", "column",
"value" | "values" | "child"}`` in the words of ``protocol.FILTER_*``, a literal ``{"type",
"value"}`` with ``type`` one of ``protocol.VALUE_*``. What a split computes from it:
``datasource/reading/aggregation.py`` (the JVM: ``SplitAggregation.scala``).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal

from raptorx_py import predicates as preds
from raptorx_py.errors import SchemaError
from raptorx_py.jvm_contract import protocol

#: Metadata key (on the partial schema's first field) of the pushed aggregation's JSON.
AGGREGATION_KEY = protocol.AGGREGATION_KEY


@dataclass(frozen=True)
class Expr:
    """One node: ``column`` (name), ``literal`` (value), ``cast`` (child) or ``+ - *``
    (left, right); ``type`` is Spark's type of the node (a Hive/Spark type string)."""

    op: str
    type: str
    name: str | None = None
    value: str | None = None
    children: tuple[Expr, ...] = ()

    @staticmethod
    def from_json(d: dict) -> Expr:
        op = d["op"]
        if op == "column":
            return Expr(op, d["type"], name=d["name"])
        if op == "literal":
            return Expr(op, d["type"], value=d["value"])
        if op == "cast":
            return Expr(op, d["type"], children=(Expr.from_json(d["child"]),))
        if op in ("+", "-", "*"):
            return Expr(
                op, d["type"], children=(Expr.from_json(d["left"]), Expr.from_json(d["right"]))
            )
        raise SchemaError(f"pushed aggregation: unknown expression '{op}'")

    @property
    def column_name(self) -> str:
        """The column a ``column`` node reads."""
        if self.name is None:
            raise SchemaError(f"pushed aggregation: a '{self.op}' node names no column")
        return self.name

    @property
    def literal_text(self) -> str:
        """The value of a ``literal`` node, as text."""
        if self.value is None:
            raise SchemaError(f"pushed aggregation: a '{self.op}' node has no literal value")
        return self.value

    def columns(self) -> set[str]:
        if self.op == "column":
            return {self.column_name}
        return set().union(*(c.columns() for c in self.children)) if self.children else set()

    def __str__(self) -> str:
        if self.op == "column":
            return self.column_name
        if self.op == "literal":
            return self.literal_text
        if self.op == "cast":
            return f"CAST({self.children[0]} AS {self.type})"
        return f"({self.children[0]} {self.op} {self.children[1]})"


@dataclass(frozen=True)
class Aggregate:
    fn: str  # "sum" | "count" | "count_star" | "min" | "max"
    type: str  # the partial result's type
    input: Expr | None


@dataclass(frozen=True)
class PushedAggregation:
    """Group-by columns, aggregates, and the scan's filters (the provider pushes an
    aggregation only when every filter is one the reader evaluates exactly; they travel
    here because pyspark resolves pushed filters in the scan's output, the partial schema)."""

    group_by: tuple[tuple[str, str], ...]  # (column, type)
    aggregates: tuple[Aggregate, ...]
    filters: tuple = ()

    @staticmethod
    def from_json(text: str) -> PushedAggregation:
        d = json.loads(text)
        if d.get("version") != 1:
            raise SchemaError(f"pushed aggregation of an unknown version: {text[:200]}")
        aggs = []
        for a in d["aggregates"]:
            if a["fn"] not in ("sum", "count", "count_star", "min", "max"):
                raise SchemaError(f"pushed aggregation: unknown function '{a['fn']}'")
            aggs.append(
                Aggregate(a["fn"], a["type"], Expr.from_json(a["input"]) if "input" in a else None)
            )
        return PushedAggregation(
            tuple((k["column"], k["type"]) for k in d["group_by"]),
            tuple(aggs),
            tuple(_predicate(f) for f in d.get("filters", ())),
        )

    def input_columns(self) -> set[str]:
        """The table columns the aggregation reads."""
        names = {k for k, _ in self.group_by}
        for a in self.aggregates:
            if a.input is not None:
                names |= a.input.columns()
        return names


def _value(v: dict):
    kind, text = v["type"], v["value"]
    if kind == "integer":
        return int(text)
    if kind == "decimal":
        return Decimal(text)
    if kind == "date":
        return dt.date.fromisoformat(text)
    if kind == "boolean":
        return text == "true"
    if kind == "string":
        return text
    raise SchemaError(f"pushed filter: unknown literal type '{kind}'")


def _predicate(f: dict) -> preds.Predicate:
    """A filter's JSON (``filterJson`` in the provider) as the predicate ``from_spark_filter``
    makes of the same pyspark filter."""
    op = f["op"]
    if op == "not":
        return preds.Not(_predicate(f["child"]))
    if op in ("=", "<=>", "<", "<=", ">", ">="):
        v = f["value"]
        return preds.Comparison(op, f["column"], None if v is None else _value(v))
    if op == "in":
        return preds.InList(f["column"], tuple(_value(v) for v in f["values"]))
    if op == "is_null":
        return preds.IsNull(f["column"])
    if op == "is_not_null":
        return preds.IsNotNull(f["column"])
    if op in ("starts", "ends", "contains"):
        return preds.StringMatch(op, f["column"], f["value"])
    raise SchemaError(f"pushed filter: unknown operator '{op}'")


def from_schema(schema) -> PushedAggregation | None:
    """The aggregation a scan's (pyspark) schema carries, or None for a plain scan."""
    if not schema.fields:
        return None
    text = (schema.fields[0].metadata or {}).get(AGGREGATION_KEY)
    return PushedAggregation.from_json(text) if text else None
