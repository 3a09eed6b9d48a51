"""Column-name resolution (``datasource/column_names.py``) without Spark: case rules,
ambiguity, duplicates, and pushed filters renamed to the table's spelling."""

from __future__ import annotations

import pytest
from pyspark.sql import datasource as ds

from raptorx_py.datasource.planning.column_names import (
    filter_with_table_names,
    output_names,
    parse_case_sensitive,
    requested_names,
    resolve_column,
    resolve_columns,
)
from raptorx_py.errors import SchemaError
from raptorx_py.hive.model import Column, Table

TABLE = Table(
    database="db",
    name="t",
    table_type="EXTERNAL_TABLE",
    location="/x",
    columns=(Column("id", "bigint"), Column("Mixed", "string")),
    partition_keys=(Column("k", "string"),),
)
# Parquet files may hold two columns differing only in case.
TWIN = Table(
    database="db",
    name="twin",
    table_type="EXTERNAL_TABLE",
    location="/x",
    columns=(Column("a", "int"), Column("A", "int"), Column("Ab", "int"), Column("aB", "int")),
)


def test_case_insensitive_by_default_and_exact_when_sensitive():
    assert resolve_column(TABLE, "ID").name == "id"
    assert resolve_column(TABLE, "mixed").name == "Mixed"
    assert resolve_column(TABLE, "Mixed", case_sensitive=True).name == "Mixed"
    with pytest.raises(SchemaError, match=r"'mixed' does not exist in db.t \(spark.sql.caseSen"):
        resolve_column(TABLE, "mixed", case_sensitive=True)
    with pytest.raises(SchemaError, match=r"'nope' does not exist in db.t. Columns: id, Mixed, k"):
        resolve_column(TABLE, "nope")


def test_the_exact_spelling_wins_else_two_matches_are_ambiguous():
    # The schema derived from such a table names each column exactly: both read.
    assert [c.name for c in resolve_columns(TWIN, ["a", "A"], False, "x")] == ["a", "A"]
    assert [c.name for c in resolve_columns(TWIN, ["A", "a"], True, "x")] == ["A", "a"]
    with pytest.raises(SchemaError, match=r"'ab' is ambiguous in db.twin: it matches 'Ab', 'aB'"):
        resolve_column(TWIN, "ab")
    with pytest.raises(SchemaError, match=r"'ab' does not exist"):
        resolve_column(TWIN, "ab", case_sensitive=True)


def test_a_column_asked_for_twice_is_named_with_both_spellings():
    with pytest.raises(
        SchemaError, match=r"'id' of db.t is asked for twice \('id' and 'ID'\) by x"
    ):
        resolve_columns(TABLE, ["id", "k", "ID"], False, "x")
    with pytest.raises(SchemaError, match=r"\('k' twice\)"):
        resolve_columns(TABLE, ["k", "k"], True, "x")


def test_option_values_and_output_names():
    assert requested_names(" id , k") == ["id", "k"]
    with pytest.raises(SchemaError, match="empty column name"):
        requested_names("id,,k")
    assert parse_case_sensitive(None) is False and parse_case_sensitive(None, True) is True
    assert parse_case_sensitive("TRUE") is True and parse_case_sensitive("false") is False
    with pytest.raises(SchemaError, match="raptorx.case_sensitive must be true or false"):
        parse_case_sensitive("yes")
    cols = resolve_columns(TABLE, ["ID", "k"], False, "x")
    assert output_names(cols, ["ID", "k"]) == ["ID", "k"]
    assert output_names(cols, ["id", "k"]) is None


def test_pushed_filters_renamed_to_the_tables_spelling():
    names = {"ID": "id"}
    assert filter_with_table_names(ds.EqualTo(("ID",), 3), names) == ds.EqualTo(("id",), 3)
    assert filter_with_table_names(ds.Not(ds.IsNull(("ID",))), names) == ds.Not(ds.IsNull(("id",)))
    same = ds.GreaterThan(("k",), "a")
    assert filter_with_table_names(same, names) is same
    assert filter_with_table_names(same, {}) is same


def test_register_reads_the_sessions_setting_for_the_source_without_the_jar():
    """Without the jar, ``register`` carries ``spark.sql.caseSensitive`` into the source."""
    from raptorx_py.session import case_sensitive_analysis

    class Conf(dict):
        def get(self, key, default=None):
            return super().get(key, default)

    class Session:
        def __init__(self, **conf):
            self.conf = Conf(conf)

    assert case_sensitive_analysis(Session()) is False  # Spark's default
    assert case_sensitive_analysis(Session(**{"spark.sql.caseSensitive": "TRUE"})) is True
    assert case_sensitive_analysis(Session(**{"spark.sql.caseSensitive": "false"})) is False
