"""Nested columns (struct, array, map) through ``tiered_hive``: the same rows written by
pyarrow and Spark (Parquet) and by Spark and pyorc (ORC), partitioned, read exactly as
``spark.read.parquet`` / ``spark.read.orc`` read the same files, row for row: whole rows,
a WHERE on a flat column and on a nested field, one nested field projected; by Spark's own
readers in the JVM (AUTO) and by the Python reader (``hive.parquet.reader=PYTHON``); with
the block and fragment result caches cold and warm (hit counters, not timings). Filters on
nested columns and aggregates over them are left to Spark; ``count(*)`` is still pushed.
"""

from __future__ import annotations

import pytest

from raptorx_py.hive.column_types import spark_type
from raptorx_py.tables.table_registration import register_external_table
from tests.support import nested_data

pytestmark = pytest.mark.spark

#: Writer -> the format Spark's own reader reads its files as.
WRITERS = {"pyarrow": "parquet", "spark_parquet": "parquet", "spark_orc": "orc", "pyorc": "orc"}

#: (WHERE or None, selected columns or None): whole rows, a flat filter (pushed), nested
#: filters (left to Spark), a nested field projected, both together.
READS = (
    (None, None),
    ("id % 3 = 0 AND id > 1010", None),
    ("s.a > 1", ["id", "s.a"]),
    ("s IS NOT NULL AND size(arr) > 0", None),
    ("ss.inner.v > 3000 OR m['k0'] IS NULL", ["ss.inner", "arr", "p"]),
    ("get(arrs, 0).x IS NOT NULL AND p = 2", ["arrs", "ma", "s.d"]),
)


@pytest.fixture(scope="module")
def tables(spark, env, tmp_path_factory):
    """{writer: (table name, root)}: ``nested_data.rows()`` written by each writer, each
    registered (ORC files of pyorc carry a ``char(5)`` field in ``s``)."""
    base = tmp_path_factory.mktemp("nested")
    rows = nested_data.rows()
    roots = {w: str(base / w) for w in WRITERS}
    nested_data.write_pyarrow(roots["pyarrow"], rows)
    nested_data.write_spark(spark, roots["spark_parquet"], rows, "parquet")
    nested_data.write_spark(spark, roots["spark_orc"], rows, "orc")
    nested_data.write_pyorc(roots["pyorc"], rows)
    db = env.unique_db("nested")
    out = {}
    with env.metastore() as ms:
        for writer, root in roots.items():
            register_external_table(ms, env.settings(), f"{db}.{writer}", root)
            out[writer] = (f"{db}.{writer}", root)
    return out


def _reads(spark, name, root, file_format, **options):
    """(``tiered_hive``'s DataFrame, Spark's own reader's) of one table."""
    ours = spark.read.format("tiered_hive").options(**options).load(name)
    return ours, spark.read.format(file_format).load(root)


def _shaped(df, where, columns):
    df = df if where is None else df.where(where)
    return df if columns is None else df.select(*columns)


def _caches(tmp_path, **extra):
    return {
        "cache.enabled": "true",
        "cache.base-directory": str(tmp_path / "blocks"),
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
        "fragment-result-cache.store-on-first-use": "true",
        **extra,
    }


@pytest.mark.parametrize("writer", list(WRITERS))
def test_nested_columns_read_as_sparks_own_reader_reads_them(
    spark, tables, writer, counted, tmp_path
):
    """Every read, in AUTO, by Spark's reader in the JVM (no Python task) with the block
    and fragment caches on: rows equal to ``spark.read``'s, cold and warm."""
    name, root = tables[writer]
    ours, theirs = _reads(spark, name, root, WRITERS[writer], **_caches(tmp_path))
    for where, columns in READS:
        expected = nested_data.collected(_shaped(theirs, where, columns))
        for run in ("cold", "warm"):
            with counted() as c:
                got = nested_data.collected(_shaped(ours, where, columns))
            assert got == expected, (writer, where, columns, run)
            assert c.get("reader.python_tasks", 0) == 0, (where, run, dict(c))
            assert c["reader.spark_splits"] + c.get("fragment_cache.jvm_hits", 0) > 0, dict(c)


@pytest.mark.parametrize("writer", ["pyarrow", "spark_orc"])
def test_fragments_of_nested_columns_round_trip_cold_and_warm(
    spark, tables, writer, counted, tmp_path
):
    """A split with a pushed filter left after statistics (``p=1``: ``id > 1010`` is not
    always true there) is stored as a fragment, nested values and all, and served from it
    on the repeat; ``p=2`` (every id passes) stores none and the block cache serves it."""
    name, root = tables[writer]
    ours, theirs = _reads(spark, name, root, WRITERS[writer], **_caches(tmp_path))
    where, columns = "id > 1010", ["id", "s", "arrs", "ma", "ss"]
    expected = nested_data.collected(_shaped(theirs, where, columns))
    with counted() as cold:
        assert nested_data.collected(_shaped(ours, where, columns)) == expected
    assert cold["fragment_cache.jvm_stores"] == 1, dict(cold)
    with counted() as warm:
        assert nested_data.collected(_shaped(ours, where, columns)) == expected
    assert warm["fragment_cache.jvm_hits"] == 1, dict(warm)
    assert warm["reader.spark_splits"] == 1 and warm["block_cache.hits"] > 0, dict(warm)
    assert warm.get("block_cache.misses", 0) == 0, dict(warm)


@pytest.mark.parametrize("writer", ["pyarrow", "spark_parquet"])
def test_the_python_reader_reads_nested_parquet_columns(spark, tables, writer, counted, tmp_path):
    name, root = tables[writer]
    ours, theirs = _reads(
        spark, name, root, "parquet", **_caches(tmp_path, **{"hive.parquet.reader": "PYTHON"})
    )
    for where, columns in READS[:3]:
        expected = nested_data.collected(_shaped(theirs, where, columns))
        with counted() as cold:
            assert nested_data.collected(_shaped(ours, where, columns)) == expected, where
        # A split whose filters statistics made always true may be an earlier read's hit.
        assert cold["reader.python_splits"] > 0, dict(cold)
        assert cold["reader.python_splits"] + cold.get("fragment_cache.hits", 0) == len(
            nested_data.PARTITIONS
        ), dict(cold)
        with counted() as warm:
            assert nested_data.collected(_shaped(ours, where, columns)) == expected, where
        assert warm["fragment_cache.hits"] == len(nested_data.PARTITIONS), dict(warm)


@pytest.mark.parametrize("writer", ["pyarrow", "spark_orc"])
def test_aggregates_over_nested_columns_are_left_to_spark(spark, tables, writer, counted):
    name, root = tables[writer]
    ours, theirs = _reads(spark, name, root, WRITERS[writer])
    ours.createOrReplaceTempView("nested_ours")
    theirs.createOrReplaceTempView("nested_theirs")
    for sql, pushed in (
        ("SELECT p, count(*) FROM {t} GROUP BY p", True),
        ("SELECT count(*), sum(id) FROM {t} WHERE id > 1010", True),
        ("SELECT count(arr), count(s) FROM {t}", False),
        ("SELECT max(s.a), min(ss.inner.v), count(*) FROM {t}", False),
        ("SELECT s.b, count(*) FROM {t} GROUP BY s.b", False),
    ):
        expected = nested_data.collected(spark.sql(sql.format(t="nested_theirs")))
        with counted() as c:
            assert nested_data.collected(spark.sql(sql.format(t="nested_ours"))) == expected
        assert (c.get("aggregation.jvm_splits", 0) > 0) == pushed, (sql, dict(c))


def test_filters_on_nested_columns_prune_nothing_and_are_left_to_spark(spark, tables, counted):
    name, root = tables["pyarrow"]
    ours, theirs = _reads(spark, name, root, "parquet")
    for where in ("s IS NULL", "s.a > 40", "size(m) > 2", "arr IS NOT NULL"):
        expected = nested_data.collected(theirs.where(where))
        with counted() as c:
            got = nested_data.collected(ours.where(where))
        assert got == expected, where
        assert c.get("planner.partitions_pruned_by_stats", 0) == 0, (where, dict(c))
        plan = ours.where(where)._jdf.queryExecution().executedPlan().toString()
        assert "PushedFilters: []" in plan or "PostScanFilters" in plan, plan


NESTED_BATCH_SETTINGS = (
    "spark.sql.parquet.enableNestedColumnVectorizedReader",
    "spark.sql.orc.enableNestedColumnVectorizedReader",
)


def test_with_sparks_nested_batches_off_parquet_goes_to_python_and_orc_says_why(
    spark, tables, counted
):
    """Spark's vectorized readers return nested columns in batches only with their nested
    setting on (the default). Off, a Parquet scan is read by the Python reader, the rows the
    same; an ORC scan fails naming the setting (the Python reader reads Parquet only)."""
    for key in NESTED_BATCH_SETTINGS:
        spark.conf.set(key, "false")
    try:
        name, root = tables["pyarrow"]
        ours, theirs = _reads(spark, name, root, "parquet")
        with counted() as c:
            assert nested_data.collected(ours) == nested_data.collected(theirs)
        assert c.get("reader.python_splits", 0) > 0, dict(c)
        assert c.get("reader.spark_splits", 0) == 0, dict(c)
        name, _ = tables["spark_orc"]
        with pytest.raises(Exception) as failed:
            spark.read.format("tiered_hive").load(name).collect()
        said = str(failed.value)
        assert "which only Spark's ORC reader in the JVM reads here" in said, said
        assert "spark.sql.orc.enableNestedColumnVectorizedReader false" in said, said
    finally:
        for key in NESTED_BATCH_SETTINGS:
            spark.conf.unset(key)


def test_hive_type_strings_parse_as_sparks_ddl_parser_parses_them(spark):
    """``column_types.spark_type`` (no JVM) against Spark's own parser."""
    from pyspark.sql.types import _parse_datatype_string

    for text in [
        *nested_data.HIVE_TYPES.values(),
        "struct<`a b`:int,`x``y`:array<map<string,decimal(38,10)>>>",
        "map<date,struct<t:timestamp_ntz,b:binary,f:float,d:double,z:boolean>>",
        "array<array<array<tinyint>>>",
    ]:
        assert spark_type(text) == _parse_datatype_string(text), text


def test_registration_types_nested_columns_as_sparks_reader_does(spark, tables):
    """The schema ``tiered_hive`` hands Spark (``column_types.spark_struct`` of the
    registered types) is the one Spark's own reader gives the files."""
    for writer, (name, root) in tables.items():
        theirs = spark.read.format(WRITERS[writer]).load(root).schema
        ours = spark.read.format("tiered_hive").load(name).schema
        assert [(f.name, f.dataType) for f in ours.fields] == [
            (f.name, f.dataType) for f in theirs.fields
        ], writer


@pytest.mark.parametrize("storage_format", ["PARQUET", "ORC"])
def test_a_write_of_nested_columns_reads_back_the_same_rows(spark, env, storage_format):
    """A managed table created by a write of nested columns (pyarrow's writers) reads back
    through ``tiered_hive`` the rows written."""
    df = nested_data.spark_frame(spark, nested_data.rows())
    name = f"{env.unique_db('nestedw')}.t"
    df.write.format("tiered_hive").option("hive.storage-format", storage_format).mode(
        "append"
    ).save(name)
    back = spark.read.format("tiered_hive").load(name)
    assert nested_data.collected(back) == nested_data.collected(df)
