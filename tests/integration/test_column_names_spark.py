"""Column names resolved as Spark resolves them (``datasource/column_names.py``): the
``columns`` option and a user-given schema in another case than the table's columns, with
``spark.sql.caseSensitive`` false (Spark's default) and true, with and without the native jar,
compared with Spark's own Parquet reader; a duplicate or unknown name is one clear error."""

from __future__ import annotations

import contextlib
import os
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.datasource.source import configured_source_class
from raptorx_py.tables.table_registration import register_external_table

pytestmark = pytest.mark.spark

NOJAR = "tiered_hive_nojar_names"
NOJAR_CASE_SENSITIVE = "tiered_hive_nojar_names_cs"
SCHEMA = "I int, DEC decimal(10,2), K string"


@pytest.fixture(scope="module")
def table(spark, env, tmp_path_factory):
    """db.t: columns i int, dec decimal(10,2), partition key k; two sealed partitions."""
    root = str(tmp_path_factory.mktemp("names") / "t")
    for k, ids in (("a", range(0, 10)), ("b", range(10, 20))):
        os.makedirs(os.path.join(root, f"k={k}"))
        pq.write_table(
            pa.table(
                {
                    "i": pa.array(list(ids), pa.int32()),
                    "dec": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
                }
            ),
            os.path.join(root, f"k={k}", "part-0.parquet"),
        )
    name = f"{env.unique_db('names')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root, sealed=True)
    # Without the jar: the Python source as register() makes it when the provider is missing.
    spark.dataSource.register(configured_source_class(env.settings(), name=NOJAR, pushdown=False))
    spark.dataSource.register(
        configured_source_class(
            env.settings(), name=NOJAR_CASE_SENSITIVE, pushdown=False, case_sensitive=True
        )
    )
    return name, root


@contextlib.contextmanager
def case_sensitive(spark):
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.caseSensitive", "false")


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


def _parquet(spark, root, schema=SCHEMA):
    # Spark's reader, with the partition column typed as the table's (a string).
    key = "spark.sql.sources.partitionColumnTypeInference.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        return spark.read.schema(schema).option("basePath", root).parquet(root)
    finally:
        spark.conf.set(key, before)


@pytest.mark.parametrize("fmt", ["tiered_hive", NOJAR])
def test_user_schema_in_other_case_reads_like_sparks_parquet_reader(spark, table, fmt, counted):
    name, root = table
    expected = _parquet(spark, root)
    df = spark.read.format(fmt).schema(SCHEMA).load(name)
    # The user's spelling, as Spark's Parquet reader names the columns.
    assert df.columns == expected.columns == ["I", "DEC", "K"]
    assert _rows(df) == _rows(expected) and len(_rows(df)) == 20
    with counted() as c:
        where = "I >= 12 and K = 'b'"
        filtered = _rows(df.where(where))
    assert filtered == _rows(expected.where(where)) and len(filtered) == 8
    if fmt == "tiered_hive":  # with the jar, the filters on I and K prune in the source
        assert c["planner.partitions_pruned"] == 1


@pytest.mark.parametrize("fmt", ["tiered_hive", NOJAR])
def test_columns_option_in_other_case_carries_the_tables_names(spark, table, fmt):
    name, root = table
    df = spark.read.format(fmt).option("columns", "DEC,I").load(name)
    # A projection, as df.select("DEC", "I") names them: the table's spelling.
    assert df.columns == ["dec", "i"]
    expected = _parquet(spark, root).select("DEC", "I")
    assert expected.columns == ["DEC", "I"]
    assert _rows(df) == _rows(expected) and len(_rows(df)) == 20
    assert _rows(df.where("I < 3")) == _rows(expected.where("I < 3"))


@pytest.mark.parametrize("fmt", ["tiered_hive", NOJAR])
def test_duplicate_column_is_one_error_at_load(spark, table, fmt):
    name, _ = table
    # At load(): no action is taken on the DataFrame.
    with pytest.raises(Exception, match=r"column 'i' of .*\.t is asked for twice \('i' twice\)"):
        spark.read.format(fmt).option("columns", "i,i").load(name)
    with pytest.raises(Exception, match=r"twice \('i' and 'I'\).*Columns: i, dec, k"):
        spark.read.format(fmt).option("columns", "i,I").load(name)


@pytest.mark.parametrize("fmt", ["tiered_hive", NOJAR])
def test_unknown_column_names_it_and_the_tables_columns(spark, table, fmt):
    name, _ = table
    with pytest.raises(Exception, match=r"column 'nope' does not exist in .*Columns: i, dec, k"):
        spark.read.format(fmt).option("columns", "I,nope").load(name)
    with pytest.raises(Exception, match=r"twice \('I' and 'i'\) by the read's schema"):
        spark.read.format(fmt).schema("I int, i int").load(name).collect()


@pytest.mark.parametrize("fmt", ["tiered_hive", NOJAR])
def test_a_schema_column_the_table_lacks_is_null_in_every_action(spark, table, fmt):
    """count() once returned the rows while collect() raised SchemaError. Spark's
    Parquet reader returns nulls for such a column; so does every action here."""
    name, root = table
    schema = "i int, nosuch bigint, k string"
    expected = _parquet(spark, root, schema)
    df = spark.read.format(fmt).schema(schema).load(name)
    assert df.columns == ["i", "nosuch", "k"]
    assert df.count() == expected.count() == 20
    rows = _rows(df)
    assert rows == _rows(expected) and len(rows) == 20
    assert all(r[1] is None for r in rows) and {r[2] for r in rows} == {"a", "b"}
    assert df.where("nosuch is null").count() == 20
    assert df.where("nosuch = 1").collect() == expected.where("nosuch = 1").collect() == []
    assert _rows(df.where("nosuch is null and i < 3")) == _rows(
        expected.where("nosuch is null and i < 3")
    )
    assert _rows(df.select("nosuch")) == [(None,)] * 20
    # A column the table has, in another type, is still an error.
    with pytest.raises(Exception, match=r"column 'i' of .* is int, but the schema asks for"):
        spark.read.format(fmt).schema("i bigint, nosuch bigint").load(name).collect()


def test_case_sensitive_session_with_the_jar(spark, table):
    name, root = table
    with case_sensitive(spark):
        with pytest.raises(
            Exception, match=r"column 'I' does not exist .*spark.sql.caseSensitive is true"
        ):
            spark.read.format("tiered_hive").option("columns", "I").load(name)
        # I, DEC and K name no column now: read as nulls, as Spark's Parquet reader reads
        # a column its files lack.
        assert (
            _rows(spark.read.format("tiered_hive").schema(SCHEMA).load(name))
            == [(None, None, None)] * 20
        )
        # The exact spelling still reads, and i and I are two names now.
        df = spark.read.format("tiered_hive").schema("i int, dec decimal(10,2)").load(name)
        assert _rows(df) == _rows(
            _parquet(spark, root, "i int, dec decimal(10,2)").select("i", "dec")
        )
        with pytest.raises(Exception, match=r"column 'I' does not exist"):
            spark.read.format("tiered_hive").option("columns", "i,I").load(name)
    # The setting is read at load(): back to case-insensitive, I reads again.
    assert spark.read.format("tiered_hive").option("columns", "I").load(name).count() == 20


def test_case_sensitive_session_without_the_jar(spark, table):
    name, _ = table
    with case_sensitive(spark):
        with pytest.raises(
            Exception, match=r"column 'I' does not exist .*spark.sql.caseSensitive is true"
        ):
            spark.read.format(NOJAR_CASE_SENSITIVE).option("columns", "I").load(name)
        df = spark.read.format(NOJAR_CASE_SENSITIVE).option("columns", "i").load(name)
        assert df.columns == ["i"] and df.count() == 20


def test_a_schema_column_the_table_lacks_is_null_over_cached_fragments(spark, table, counted):
    """The fragments a read of the table's columns cached are served to a read that adds a
    column the table lacks, by the Python reader (which adds the nulls), never by the JVM's
    fragment reader (which knows only the cached columns)."""
    name, root = table
    # The Python reader fills the fragment cache (Spark's reader, AUTO's first choice, does not).
    on = {"fragment-result-cache.enabled": "true", "hive.parquet.reader": "PYTHON"}
    plain = spark.read.format("tiered_hive").options(**on).schema("i int, k string").load(name)
    assert len(_rows(plain)) == 20  # fills the fragment cache
    with_missing = (
        spark.read.format("tiered_hive")
        .options(**on)
        .schema("i int, nosuch bigint, k string")
        .load(name)
    )
    with counted() as c:
        rows = _rows(with_missing)
    assert rows == _rows(_parquet(spark, root, "i int, nosuch bigint, k string"))
    assert len(rows) == 20 and all(r[1] is None for r in rows)
    assert c["fragment_cache.hits"] > 0 and c["fragment_cache.jvm_hits"] == 0, c.delta
