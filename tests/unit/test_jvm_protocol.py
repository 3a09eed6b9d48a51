"""One contract between Python and the JVM: ``raptorx_py/jvm_contract/protocol.py`` and
``native/src/main/scala/raptorx/contract/Protocol.scala`` spell the same constants with the
same values, and the modules that use them take them from there."""

from __future__ import annotations

import json
import re
from pathlib import Path

from raptorx_py.datasource.planning import options, query_snapshots, table_schema
from raptorx_py.jvm_contract import placement
from raptorx_py.jvm_contract import protocol as jvm_protocol
from raptorx_py.jvm_contract import pushed_aggregation as aggregation
from raptorx_py.scheduling import affinity

ROOT = Path(__file__).resolve().parents[2]
SCALA = ROOT / "native" / "src" / "main" / "scala" / "raptorx" / "contract" / "Protocol.scala"
NATIVE_SOURCES = ROOT / "native" / "src" / "main" / "scala"

_VAL = re.compile(r'^\s*val\s+([A-Z]\w*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*$', re.MULTILINE)


def snake(name: str) -> str:
    """``QueryTokenKey`` -> ``QUERY_TOKEN_KEY``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def scala_constants(path: Path = SCALA) -> dict[str, str]:
    text = path.read_text()
    found = {snake(name): json.loads(f'"{value}"') for name, value in _VAL.findall(text)}
    # Every val of the object is a plain literal the regex reads (else the test would miss it).
    assert len(found) == len(re.findall(r"^\s*val\s", text, re.MULTILINE))
    return found


def test_both_sides_spell_the_same_constants() -> None:
    scala, python = scala_constants(), jvm_protocol.constants()
    assert len(scala) >= 30
    assert sorted(set(scala) - set(python)) == []  # in Scala only
    assert sorted(set(python) - set(scala)) == []  # in Python only
    assert {k: v for k, v in scala.items() if python[k] != v} == {}


def test_disagreement_is_caught(tmp_path: Path) -> None:
    """A changed value on the Scala side fails the comparison (the reading is not vacuous)."""
    changed = tmp_path / "Protocol.scala"
    changed.write_text(SCALA.read_text().replace('"raptorx.query_token"', '"raptorx.token"'))
    scala = scala_constants(changed)
    assert scala["QUERY_TOKEN_KEY"] == "raptorx.token" != jvm_protocol.QUERY_TOKEN_KEY


def test_python_users_take_the_contract() -> None:
    assert query_snapshots.TOKEN_KEY == jvm_protocol.QUERY_TOKEN_KEY
    assert aggregation.AGGREGATION_KEY == jvm_protocol.AGGREGATION_KEY
    assert affinity.EXECUTORS_OPTION == jvm_protocol.EXECUTORS_OPTION
    assert placement.MARKER == jvm_protocol.AFFINITY_MARK
    assert (placement.UNKNOWN, placement.PREFERRED, placement.FALLBACK) == ("-", "P", "F")
    assert table_schema.TABLE_BYTES_KEY == jvm_protocol.TABLE_BYTES_KEY
    assert table_schema.EXACT_FILTER_COLUMNS_KEY == jvm_protocol.EXACT_FILTER_COLUMNS_KEY
    assert jvm_protocol.PARTITION_BY_OPTION in options.READ_OPTIONS


def test_no_scala_file_but_the_contract_spells_a_protocol_string() -> None:
    """The other Scala files name the contract's values through ``Protocol`` (a literal of
    one of them elsewhere would be a second spelling)."""
    values = {v for v in scala_constants().values() if v.startswith("raptorx") or "_" in v}
    assert len(values) >= 10
    offenders = []
    for path in sorted(NATIVE_SOURCES.rglob("*.scala")):
        if path.name == SCALA.name:
            continue
        code = "\n".join(
            line for line in path.read_text().splitlines() if not line.lstrip().startswith("*")
        )
        offenders += [(path.name, v) for v in values if f'"{v}"' in code]
    assert offenders == []


def test_aggregation_parses_every_filter_operator_the_provider_writes() -> None:
    """Each operator and value kind of the filter JSON (as ``filterJson`` writes it, with the
    contract's names) is one ``aggregation.PushedAggregation`` parses."""
    p = jvm_protocol
    value = {"type": p.VALUE_INTEGER, "value": "3"}
    filters = [
        {"op": op, "column": "a", "value": value}
        for op in (
            p.FILTER_EQUAL,
            p.FILTER_EQUAL_NULL_SAFE,
            p.FILTER_GREATER,
            p.FILTER_GREATER_OR_EQUAL,
            p.FILTER_LESS,
            p.FILTER_LESS_OR_EQUAL,
        )
    ]
    filters += [
        {"op": p.FILTER_IN, "column": "a", "values": [value]},
        {"op": p.FILTER_IS_NULL, "column": "a"},
        {"op": p.FILTER_IS_NOT_NULL, "column": "a"},
        {"op": p.FILTER_NOT, "child": {"op": p.FILTER_IS_NULL, "column": "a"}},
    ]
    filters += [
        {"op": op, "column": "s", "value": "x"}
        for op in (p.FILTER_STARTS_WITH, p.FILTER_ENDS_WITH, p.FILTER_CONTAINS)
    ]
    filters += [
        {"op": p.FILTER_EQUAL, "column": "v", "value": {"type": kind, "value": text}}
        for kind, text in (
            (p.VALUE_DECIMAL, "1.50"),
            (p.VALUE_DATE, "1995-03-01"),
            (p.VALUE_BOOLEAN, "true"),
            (p.VALUE_STRING, "x"),
        )
    ]
    operators = {v for k, v in p.constants().items() if k.startswith("FILTER_")}
    assert {f["op"] for f in filters} == operators
    text = json.dumps(
        {
            "version": 1,
            "group_by": [],
            "aggregates": [{"fn": "count_star", "type": "bigint"}],
            "filters": filters,
        }
    )
    parsed = aggregation.PushedAggregation.from_json(text)
    assert len(parsed.filters) == len(filters)
