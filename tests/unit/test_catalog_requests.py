"""The Spark catalog's requests (``datasource/catalog_requests.py``), answered from every
metastore backend (SQLite, PostgreSQL, a Hive Metastore over Thrift), and the TPC-H queries
written against catalog names (``tpch.queries.with_qualified_tables``)."""

from __future__ import annotations

import json
import re

import pytest

from raptorx_py.datasource.planning import catalog_requests
from raptorx_py.errors import SchemaError
from raptorx_py.hive.model import EXTERNAL_TABLE, Column, Table
from raptorx_py.jvm_contract.protocol import CATALOG_ANSWER_KEY
from raptorx_py.metastore.cached_store import close_cached_metastores
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.tpch import queries
from tests.support.counter_deltas import CounterDeltas


@pytest.fixture
def settings(catalog_settings):
    with open_catalog(catalog_settings.metastore_connection, create=True) as ms:
        for db in ("sales", "tpch"):
            ms.create_database(db)
        for name in ("orders", "lineitem"):
            ms.create_table(
                Table("tpch", name, EXTERNAL_TABLE, f"file:///w/{name}", (Column("a", "int"),))
            )
    yield catalog_settings
    close_cached_metastores()


def ask(settings, **request) -> dict:
    return catalog_requests.answer(settings, catalog_requests.parse_request(json.dumps(request)))


def test_namespaces_and_tables(settings):
    with CounterDeltas() as c:
        namespaces = ask(settings, op="namespaces")["namespaces"]
        tables = ask(settings, op="tables", namespace="TPCH")
        empty = ask(settings, op="tables", namespace="sales")
    assert {"sales", "tpch"} <= set(namespaces) and namespaces == sorted(namespaces)
    assert tables == {"tables": ["lineitem", "orders"]}
    assert empty == {"tables": []}
    assert c["catalog.requests"] == 3
    assert ask(settings, op="table", namespace="tpch", table="Orders") == {"exists": True}
    found = ask(settings, op="namespace", namespace="tpch")
    assert found["exists"] is True and isinstance(found["location"], str)


def test_missing_namespace_and_table_name_what_exists(settings):
    missing_db = ask(settings, op="tables", namespace="nope")
    assert missing_db["missing"] == "namespace"
    assert "Existing namespaces:" in missing_db["listing"]
    assert "sales" in missing_db["listing"] and "tpch" in missing_db["listing"]
    assert ask(settings, op="namespace", namespace="nope")["missing"] == "namespace"
    assert ask(settings, op="table", namespace="nope", table="t")["missing"] == "namespace"
    missing_table = ask(settings, op="table", namespace="tpch", table="lineitems")
    assert missing_table == {
        "missing": "table",
        "listing": "Existing tables: lineitem, orders",
    }


def test_bad_requests_are_named():
    with pytest.raises(SchemaError, match=r"not JSON"):
        catalog_requests.parse_request("{")
    with pytest.raises(SchemaError, match=r"unknown catalog request 'drop'.*known: namespaces"):
        catalog_requests.parse_request('{"op": "drop"}')
    with pytest.raises(SchemaError, match=r"'table' lacks namespace, table"):
        catalog_requests.parse_request('{"op": "table"}')


def test_the_answer_travels_on_the_schema():
    schema = catalog_requests.answer_schema({"tables": ["a"]})
    assert json.loads(schema.fields[0].metadata[CATALOG_ANSWER_KEY]) == {"tables": ["a"]}


TABLE_NAMES = "|".join(queries.TABLES)


def test_tpch_queries_by_catalog_names_name_every_table_qualified():
    """Every table a query reads is qualified, and nothing else is: the names left are the
    column alias ``nation`` of Q8 and Q9 (``n_name as nation``, ``when nation = ...``)."""
    total, left = 0, {}
    for n in queries.QUERY_NUMBERS:
        text = queries.with_qualified_tables(queries.query_text(n, 0.01), "raptorx.tpch")
        body = re.sub(r"--[^\n]*", "", text)
        unqualified = re.findall(rf"(?<![.\w])({TABLE_NAMES})\b", body)
        if unqualified:
            left[n] = unqualified
        total += body.count("raptorx.tpch.")
    assert left == {8: ["nation"] * 2, 9: ["nation"] * 4}
    assert total == 86  # the table references of the 22 queries
    q9 = queries.with_qualified_tables(queries.query_text(9, 0.01), "raptorx.tpch")
    assert "n_name as nation" in q9 and "raptorx.tpch.nation" in q9


def test_flush_metadata_cache_forgets_a_table_a_schema_or_all(settings):
    from raptorx_py.metastore.cached_store import cached_metastore_for

    cache = cached_metastore_for(settings.metastore_cache)

    def reload_counts() -> tuple[int, int]:
        with CounterDeltas() as c:
            cache.get_table("tpch", "orders")
            cache.get_table("tpch", "lineitem")
        return c["metastore_cache.table_misses"], c["metastore_cache.table_hits"]

    reload_counts()
    assert reload_counts() == (0, 2)  # both cached
    assert ask(settings, op="flush_metadata_cache", namespace="TPCH", table="orders") == {
        "flushed": "tpch.orders"
    }
    assert reload_counts() == (1, 1)
    assert ask(settings, op="flush_metadata_cache", namespace="tpch") == {"flushed": "tpch"}
    assert reload_counts() == (2, 0)
    assert ask(settings, op="flush_metadata_cache") == {"flushed": "all"}
    assert reload_counts() == (2, 0)
    missing = ask(settings, op="flush_metadata_cache", namespace="tpch", table="nope")
    assert missing["missing"] == "table" and "lineitem, orders" in missing["listing"]
    with pytest.raises(SchemaError, match=r"a table_name needs its schema_name"):
        ask(settings, op="flush_metadata_cache", table="orders")
