"""``raptorx cache warm --where``: a WHERE clause as text, read into predicates."""

import datetime as dt
import re
from decimal import Decimal

import pytest

from raptorx_py.errors import SchemaError
from raptorx_py.predicates import Comparison, InList, IsNotNull, IsNull, Not
from raptorx_py.where_clause import parse_where

TYPES = {"l_quantity": "decimal(12,2)", "day": "date", "Name": "string", "n": "bigint"}


def test_conditions_joined_by_and_read_as_their_columns_types():
    got = parse_where(
        "l_quantity > 45 AND day >= DATE '2024-01-01' and name = 'it''s' "
        "and n in (1, 2) and NAME is not null and n not in (3) and n <> 4",
        TYPES,
    )
    assert got == [
        Comparison(">", "l_quantity", Decimal("45")),
        Comparison(">=", "day", dt.date(2024, 1, 1)),
        Comparison("=", "Name", "it's"),  # the table's spelling of the column
        InList("n", (1, 2)),
        IsNotNull("Name"),
        Not(InList("n", (3,))),
        Not(Comparison("=", "n", 4)),
    ]


def test_between_a_literal_first_is_null_and_not():
    assert parse_where("n between 1 and 5", TYPES) == [
        Comparison(">=", "n", 1),
        Comparison("<=", "n", 5),
    ]
    assert parse_where("5 < n", TYPES) == [Comparison(">", "n", 5)]
    assert parse_where("day is null", TYPES) == [IsNull("day")]
    assert parse_where("not n = 3", TYPES) == [Not(Comparison("=", "n", 3))]
    assert parse_where("`n` <=> 3", TYPES) == [Comparison("<=>", "n", 3)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("n = 1 or n = 2", "OR is not supported"),
        ("nope = 1", "column 'nope', which the table does not have. Columns: l_quantity"),
        ("n = ", "it ends too early"),
        ("n = 1.5", "value '1.5' is not a valid bigint"),
        ("day = date '2024-13-01'", "not a valid date"),
        ("n not between 1 and 2", "NOT BETWEEN is not supported"),
        ("abs(n) = 1", "functions are not supported (abs(...))"),
        ("n + 1 = 2", "cannot read '+ 1 = 2'"),
        ("n = 1 ;", "cannot read ';'"),
        ("", "it is empty"),
    ],
)
def test_what_it_cannot_read_is_named(text, message):
    with pytest.raises(SchemaError, match=re.escape(message)):
        parse_where(text, TYPES)
