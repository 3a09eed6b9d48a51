"""TPC-H: the Hive layout written by raptorx_py.tpch.generate, DuckDB's result sizes for
all 22 queries, and the queries through Spark's own Parquet reader against DuckDB on the same
SF 0.01 files (``DEFAULT_QUERIES``; all 22 under ``make stress``).

Run: .venv/bin/python -m pytest tests/integration/test_tpch_oracle.py -q \
    -p tests.support.tpch_fixtures
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from raptorx_py.tpch import generate, oracle, queries
from raptorx_py.tpch.load import LOAD_MARKER
from tests.support.tpch_fixtures import tpch_query_params
from tests.support.tpch_loading import load_cached_tpch

# Row counts tpchgen-cli (like dbgen) produces at SF 0.01.
SF001_ROWS = {
    "region": 5,
    "nation": 25,
    "supplier": 100,
    "customer": 1500,
    "part": 2000,
    "partsupp": 8000,
    "orders": 15000,
    "lineitem": 60175,
}

# Result sizes at SF 0.01. No query returns zero rows at this scale; Q17 returns its single
# aggregate row with a NULL (no BRAND#23 / MED BOX line is below 20% of its part's average).
SF001_RESULT_ROWS = {
    1: 4,
    2: 4,
    3: 10,
    4: 5,
    5: 5,
    6: 1,
    7: 4,
    8: 2,
    9: 173,
    10: 20,
    11: 1,
    12: 2,
    13: 33,
    14: 1,
    15: 1,
    16: 296,
    17: 1,
    18: 2,
    19: 1,
    20: 1,
    21: 1,
    22: 7,
}

MONTH_DIR = re.compile(r"^(l_shipmonth|o_ordermonth)=(\d{4}-\d{2})$")


# --------------------------------------------------------------------------- layout


def test_layout_is_hive_partitioned(tpch_sf001_dir):
    root = Path(tpch_sf001_dir)
    marker = json.loads((root / generate.MARKER_NAME).read_text())
    assert marker["scale"] == "0.01"
    assert not (root / "_tpchgen_raw").exists()
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith("_")) == sorted(
        queries.TABLES
    )

    for table in queries.TABLES:
        table_dir = root / table
        part_col = queries.PARTITION_COLUMNS.get(table)
        rows = 0
        if part_col is None:
            files = sorted(table_dir.iterdir())
            assert files and all(
                f.is_file() and re.fullmatch(r"part-\d+\.parquet", f.name) for f in files
            ), files
            for f in files:
                rows += pq.ParquetFile(f).metadata.num_rows
        else:
            date_col = generate.PARTITION_SOURCES[table]
            months = []
            for sub in sorted(table_dir.iterdir()):
                m = MONTH_DIR.match(sub.name)
                assert sub.is_dir() and m and m.group(1) == part_col, sub
                months.append(m.group(2))
                for f in sorted(sub.iterdir()):
                    assert re.fullmatch(r"part-\d+\.parquet", f.name), f
                    t = pq.read_table(f)
                    assert part_col not in t.column_names
                    # Every row sits in the directory of its own month.
                    assert pc.unique(pc.strftime(t[date_col], format="%Y-%m")).to_pylist() == [
                        m.group(2)
                    ]
                    rows += t.num_rows
            # At SF 0.01 orders run 1992-01..1998-08 and their lines ship until 1998-11.
            assert months[0] == "1992-01"
            assert months[-1] == ("1998-11" if table == "lineitem" else "1998-08")
            assert len(months) == len(set(months))
        assert rows == SF001_ROWS[table] == marker["tables"][table]["rows"], table


def test_layout_keeps_tpchgen_types(tpch_sf001_dir):
    schema = pq.read_schema(next(Path(tpch_sf001_dir, "lineitem").glob("*/part-0.parquet")))
    assert schema.field("l_orderkey").type == pa.int64()
    assert schema.field("l_extendedprice").type == pa.decimal128(15, 2)
    assert schema.field("l_shipdate").type == pa.date32()
    assert schema.field("l_comment").type == pa.string()
    assert not any(f.nullable for f in schema)
    meta = pq.ParquetFile(next(Path(tpch_sf001_dir, "lineitem").glob("*/part-0.parquet"))).metadata
    assert meta.row_group(0).num_rows <= generate.ROWS_PER_GROUP


def test_generation_is_deterministic_and_cached(tpch_sf001_dir, tmp_path):
    out = tmp_path / "gen"
    generate.generate_tpch(0.01, str(out))
    ours = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.parquet")}
    cached = {
        p.relative_to(tpch_sf001_dir): p.read_bytes()
        for p in Path(tpch_sf001_dir).rglob("*.parquet")
    }
    assert ours.keys() == cached.keys()
    assert [k for k in ours if ours[k] != cached[k]] == []

    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    messages = []
    generate.generate_tpch(0.01, str(out), progress=messages.append)
    assert messages == [f"TPC-H SF 0.01 already generated in {out.resolve()}"]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == stamps


def test_incomplete_generation_is_redone(tmp_path):
    out = tmp_path / "gen"
    generate.generate_tpch(0.01, str(out))
    victim = next((out / "orders").glob("*/part-0.parquet"))
    victim.unlink()
    generate.generate_tpch(0.01, str(out))
    assert victim.is_file()


# --------------------------------------------------------------------------- load


def _settings(tmp_path, **extra):
    from raptorx_py.config import load_settings

    return load_settings(overrides={"hive.metastore.url": f"sqlite:///{tmp_path}/ms.db", **extra})


def _registered_rows(settings, database="tpch"):
    from raptorx_py.metastore import open_metastore

    rows = {}
    with open_metastore(settings.metastore_connection) as ms:
        assert sorted(ms.list_tables(database)) == sorted(queries.TABLES)
        for t in queries.TABLES:
            table = ms.get_table(database, t)
            if table.is_partitioned:
                assert [k.name for k in table.partition_keys] == [queries.PARTITION_COLUMNS[t]]
                assert [k.type for k in table.partition_keys] == ["string"]
                rows[t] = sum(p.row_count for p in ms.list_partitions(table))
            else:
                rows[t] = int(table.parameters["numRows"])
    return rows


def test_load_to_file_warehouse(request, tpch_sf001_dir, tmp_path):
    settings = _settings(tmp_path)
    warehouse = tmp_path / "wh"
    urls = load_cached_tpch(request, 0.01, str(warehouse), settings)
    assert urls["lineitem"] == f"file://{warehouse}/tpch.db/lineitem"
    copied = sorted(p.relative_to(warehouse / "tpch.db") for p in warehouse.rglob("*.parquet"))
    assert copied == sorted(
        p.relative_to(tpch_sf001_dir) for p in Path(tpch_sf001_dir).rglob("*.parquet")
    )
    assert _registered_rows(settings) == SF001_ROWS

    # A second load finds the same generation there and copies nothing.
    stamps = {p: p.stat().st_mtime_ns for p in warehouse.rglob("*") if p.is_file()}
    load_cached_tpch(request, 0.01, f"file://{warehouse}/", settings)
    assert {p: p.stat().st_mtime_ns for p in warehouse.rglob("*") if p.is_file()} == stamps

    # A stale file in a table directory is removed by a load that has to copy.
    (warehouse / "tpch.db" / LOAD_MARKER).unlink()
    stale = warehouse / "tpch.db" / "nation" / "part-9.parquet"
    stale.write_bytes(b"not parquet")
    load_cached_tpch(request, 0.01, str(warehouse), settings)
    assert not stale.exists()
    assert _registered_rows(settings) == SF001_ROWS


@pytest.mark.s3
def test_load_to_s3_warehouse(request, tpch_sf001_dir, tmp_path, s3_endpoint, s3_bucket):
    settings = _settings(tmp_path, **s3_endpoint.s3_properties())
    urls = load_cached_tpch(request, 0.01, f"s3://{s3_bucket}/wh", settings, database="tpch_s3")
    assert urls["orders"] == f"s3://{s3_bucket}/wh/tpch_s3.db/orders"
    n_files = sum(1 for _ in Path(tpch_sf001_dir).rglob("*.parquet"))
    assert s3_endpoint.stats()["requests"]["PUT"] >= n_files
    assert _registered_rows(settings, "tpch_s3") == SF001_ROWS

    s3_endpoint.reset_stats()
    load_cached_tpch(request, 0.01, f"s3://{s3_bucket}/wh", settings, database="tpch_s3")
    assert s3_endpoint.stats()["requests"]["PUT"] == 0


# --------------------------------------------------------------------------- query texts


def test_query_texts_have_parameters_substituted():
    for n in queries.QUERY_NUMBERS:
        for engine in queries.ENGINES:
            text = queries.query_text(n, 0.01, engine)
            assert "{" not in text and "}" not in text, n
    assert "* 0.01\n" in queries.query_text(11, 0.01)
    assert "* 0.0001\n" in queries.query_text(11, 1)
    assert "* 0.00001\n" in queries.query_text(11, 10)
    assert "interval '90' day" in queries.query_text(1, 1)
    with pytest.raises(ValueError, match="1..22"):
        queries.query_text(23, 1)
    with pytest.raises(ValueError, match="unknown engine"):
        queries.query_text(1, 1, "presto")


# --------------------------------------------------------------------------- comparison


def test_compare_results_tolerances():
    cmp = oracle.compare_results
    assert cmp([(Decimal("1.50"), 2)], [(1.5, 2)], ordered=True) is None
    assert cmp([(Decimal("0.039826"),)], [(0.0398264712,)], ordered=True) is None  # decimal(,6)
    assert cmp([(Decimal("10.00"),)], [(Decimal("10.01"),)], ordered=True) is None  # a cent
    assert cmp([(Decimal("10.00"),)], [(Decimal("10.02"),)], ordered=True) is not None
    assert cmp([(1,)], [(2,)], ordered=False) is not None
    assert cmp([(123456.0,)], [(123456.1,)], ordered=True) is None  # 1e-6 relative
    assert cmp([(123456.0,)], [(123457.0,)], ordered=True) is not None
    assert cmp([(dt.date(1995, 3, 1),)], [(dt.datetime(1995, 3, 1),)], ordered=True) is None
    assert cmp([("a",)], [("a ",)], ordered=True) is not None
    assert cmp([(None,)], [(None,)], ordered=True) is None
    assert cmp([(None,)], [(0,)], ordered=True) is not None


def test_compare_results_order_and_ties():
    cmp = oracle.compare_results
    exp = [("x", 3), ("y", 2), ("z", 2), ("w", 1)]
    tied = [("x", 3), ("z", 2), ("y", 2), ("w", 1)]
    assert cmp(exp, tied, ordered=True, sort_key=[1]) is None
    assert "row 1 differs" in cmp(exp, tied, ordered=True)
    assert cmp(exp, list(reversed(exp)), ordered=False) is None
    msg = cmp(exp, list(reversed(exp)), ordered=True, sort_key=[1])
    assert "sort key" in msg and "only the order differs" in msg
    msg = cmp(exp, exp[:3], ordered=True, sort_key=[1])
    assert msg.startswith("expected 4 rows, got 3")
    msg = cmp(exp, [("x", 3), ("y", 2), ("q", 2), ("w", 1)], ordered=True, sort_key=[1])
    assert "equal sort keys" in msg and "'z'" in msg and "'q'" in msg


# --------------------------------------------------------------------------- Spark vs DuckDB


@pytest.fixture(scope="module")
def spark_tpch(spark_local, tpch_sf001_dir):
    queries.register_views(spark_local, queries.parquet_reader(spark_local, tpch_sf001_dir))
    return spark_local


@pytest.mark.spark
def test_spark_reads_partition_columns_as_strings(spark_tpch):
    row = spark_tpch.sql(
        "select l_shipmonth, count(*) from lineitem "
        "where l_shipmonth = '1995-03' group by l_shipmonth"
    ).collect()
    assert [tuple(r) for r in row] == [("1995-03", 769)]
    types = dict(spark_tpch.table("orders").dtypes)
    assert types["o_ordermonth"] == "string"
    assert types["o_totalprice"] == "decimal(15,2)"
    assert types["o_orderdate"] == "date"


def test_duckdb_gives_the_known_result_sizes(duckdb_expected):
    for n in queries.QUERY_NUMBERS:
        assert len(duckdb_expected[n]) == SF001_RESULT_ROWS[n], f"Q{n}: {len(duckdb_expected[n])}"
    assert duckdb_expected[17] == [(None,)]


@pytest.mark.spark
@pytest.mark.parametrize("n", tpch_query_params())
def test_query_matches_duckdb(n, spark_tpch, duckdb_expected, tpch_scale):
    """Spark's own reader against DuckDB: ``DEFAULT_QUERIES`` by default, all 22 under
    ``make stress`` (every one of the 22 is compared with DuckDB by default through
    tiered_hive in ``test_tpch_fragment_hits.py``)."""
    expected = duckdb_expected[n]
    actual = oracle.spark_rows(spark_tpch.sql(queries.query_text(n, tpch_scale, "spark")))
    diff = oracle.compare_results(
        expected, actual, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"Q{n}: {diff}"
