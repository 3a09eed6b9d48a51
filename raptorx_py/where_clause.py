"""A WHERE clause as text (``raptorx cache warm --where "..."``), read into our predicate
form (``predicates``) without Spark.

The grammar is the part of SQL that a source can use to choose what to read: conditions
joined by ``AND``, each one of

    <column> =|<>|!=|<|<=|>|>=|<=> <literal>      (or the literal first: 45 < l_quantity)
    <column> [NOT] IN (<literal>, ...)
    <column> IS [NOT] NULL
    <column> [NOT] BETWEEN <literal> AND <literal>
    NOT <condition>

with literals ``123``, ``1.5``, ``'text'`` (``''`` for a quote), ``DATE '2024-01-01'``,
``TIMESTAMP '2024-01-01 10:00:00'``, ``TRUE``, ``FALSE``. A literal is read as its
column's type (``hive.column_types.decode_value``). Keywords and column names are matched in any
case. Anything else (``OR``, functions, arithmetic) is refused with an error naming it:
a condition that cannot be used here would only make the command read more, but a clause
silently read in part would mislead.
"""

from __future__ import annotations

import re
from typing import Any

from raptorx_py.errors import SchemaError
from raptorx_py.hive.column_types import decode_value
from raptorx_py.predicates import Comparison, InList, IsNotNull, IsNull, Not, Predicate

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<op><=>|<=|>=|<>|!=|=|<|>)|(?P<punct>[(),])|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<quoted>`[^`]+`))"
)
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "<=>": "<=>"}
_KEYWORDS = {
    "and",
    "or",
    "not",
    "in",
    "is",
    "null",
    "between",
    "true",
    "false",
    "date",
    "timestamp",
}
_SUPPORTED = (
    "conditions joined by AND: <column> <op> <literal>, <column> [NOT] IN (...), "
    "<column> IS [NOT] NULL, <column> [NOT] BETWEEN <literal> AND <literal>, NOT <condition>"
)


def parse_where(text: str, column_types: dict[str, str]) -> list[Predicate]:
    """The conditions of ``text``, ANDed, as predicates on ``column_types`` (name -> Hive
    type). Raises ``SchemaError`` naming what it cannot read or the unknown column."""
    return _Parser(text, column_types).parse()


class _Parser:
    def __init__(self, text: str, column_types: dict[str, str]) -> None:
        self.text = text
        self.types = {name.lower(): (name, t) for name, t in column_types.items()}
        self.tokens = self._tokenize(text)
        self.at = 0

    def _tokenize(self, text: str) -> list[tuple[str, str]]:
        tokens, pos = [], 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise self._error(f"cannot read '{text[pos:].strip()[:20]}'")
            kind = m.lastgroup or ""
            tokens.append((kind, m.group(kind)))
            pos = m.end()
        return tokens

    def _error(self, what: str) -> SchemaError:
        return SchemaError(f'--where "{self.text}": {what}; supported: {_SUPPORTED}')

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _next(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise self._error("it ends too early")
        self.at += 1
        return token

    def _keyword(self, word: str) -> bool:
        token = self._peek()
        if token is not None and token[0] == "word" and token[1].lower() == word:
            self.at += 1
            return True
        return False

    def _expect(self, kind: str, value: str | None = None) -> str:
        got_kind, got = self._next()
        if got_kind != kind or (value is not None and got.lower() != value):
            raise self._error(f"expected {value or kind}, found '{got}'")
        return got

    def parse(self) -> list[Predicate]:
        if not self.tokens:
            raise self._error("it is empty")
        out = self._condition()
        while self._peek() is not None:
            if self._keyword("or"):
                raise self._error("OR is not supported")
            self._expect("word", "and")
            out += self._condition()
        return out

    def _condition(self) -> list[Predicate]:
        """One condition: one predicate, or two for BETWEEN."""
        if self._keyword("not"):
            inner = self._condition()
            if len(inner) != 1:
                raise self._error("NOT BETWEEN is not supported")
            return [Not(inner[0])]
        kind, value = self._peek() or ("", "")
        literal_word = value.lower() in ("true", "false", "date", "timestamp")
        if kind in ("word", "quoted") and not literal_word:
            if self.at + 1 < len(self.tokens) and self.tokens[self.at + 1] == ("punct", "("):
                raise self._error(f"functions are not supported ({value}(...))")
            column, hive_type = self._column()
            return self._after_column(column, hive_type)
        # A literal first: 45 < l_quantity.
        literal = self._literal_text()
        op_kind, op = self._next()
        if op_kind != "op":
            raise self._error(f"expected a comparison after {literal[1]}, found '{op}'")
        column, hive_type = self._column()
        value = self._value(literal, hive_type)
        if op in ("<>", "!="):
            return [Not(Comparison("=", column, value))]
        return [Comparison(_FLIPPED[op], column, value)]

    def _column(self) -> tuple[str, str]:
        kind, word = self._next()
        name = word[1:-1] if kind == "quoted" else word
        if kind not in ("word", "quoted") or (kind == "word" and name.lower() in _KEYWORDS):
            raise self._error(f"expected a column, found '{word}'")
        found = self.types.get(name.lower())
        if found is None:
            raise SchemaError(
                f"--where names column '{name}', which the table does not have. "
                f"Columns: {', '.join(n for n, _ in self.types.values())}"
            )
        return found

    def _after_column(self, column: str, hive_type: str) -> list[Predicate]:
        if self._keyword("is"):
            negated = self._keyword("not")
            self._expect("word", "null")
            return [IsNotNull(column) if negated else IsNull(column)]
        negated = self._keyword("not")
        if self._keyword("in"):
            self._expect("punct", "(")
            values = [self._value(self._literal_text(), hive_type)]
            while self._peek() == ("punct", ","):
                self.at += 1
                values.append(self._value(self._literal_text(), hive_type))
            self._expect("punct", ")")
            found: Predicate = InList(column, tuple(values))
            return [Not(found) if negated else found]
        if self._keyword("between"):
            low = self._value(self._literal_text(), hive_type)
            self._expect("word", "and")
            high = self._value(self._literal_text(), hive_type)
            # Two conditions ANDed; under NOT, neither bound alone says anything: refused.
            if negated:
                raise self._error("NOT BETWEEN is not supported")
            return [Comparison(">=", column, low), Comparison("<=", column, high)]
        if negated:
            raise self._error(f"expected IN or BETWEEN after {column} NOT")
        kind, op = self._next()
        if kind != "op":
            raise self._error(f"expected a comparison after {column}, found '{op}'")
        literal = self._literal_text()
        if op in ("<>", "!="):
            return [Not(Comparison("=", column, self._value(literal, hive_type)))]
        return [Comparison(op, column, self._value(literal, hive_type))]

    def _literal_text(self) -> tuple[str, str]:
        """``(kind, text)`` of the next literal: kind "string", "number" or "bool"."""
        kind, value = self._next()
        if kind == "word" and value.lower() in ("date", "timestamp"):
            quoted = self._expect("string")
            return "string", quoted[1:-1].replace("''", "'")
        if kind == "string":
            return "string", value[1:-1].replace("''", "'")
        if kind == "number":
            return "number", value
        if kind == "word" and value.lower() in ("true", "false"):
            return "bool", value.lower()
        raise self._error(f"expected a literal, found '{value}'")

    def _value(self, literal: tuple[str, str], hive_type: str) -> Any:
        return decode_value(literal[1], hive_type)
