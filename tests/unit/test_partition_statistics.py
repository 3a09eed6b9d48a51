"""tables/partition_statistics.py without Spark: what ANALYZE, ADD PARTITION and MSCK REPAIR
refuse, and what they record."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.config import load_settings
from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.errors import SchemaError
from raptorx_py.hive.model import MANAGED_TABLE, Column, Table
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.predicates import Comparison
from raptorx_py.tables.partition_statistics import (
    add_partition,
    analyze_partition,
    repair_table,
)
from raptorx_py.tables.table_registration import register_external_table
from tests.support.counter_deltas import CounterDeltas


def write(path, ids):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)


@pytest.fixture
def setup(tmp_path):
    settings = load_settings(
        overrides={"hive.metastore.url": f"sqlite:///{tmp_path}/ms.db"}, env={}, cwd=tmp_path
    )
    ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"))
    root = tmp_path / "t"
    write(str(root / "n=1" / "f.parquet"), [1, 2])
    write(str(root / "n=2" / "f.parquet"), [3])
    register_external_table(ms, settings, "db.t", str(root))  # n: int
    yield settings, ms, root
    ms.close()


def test_managed_tables_are_refused(setup):
    settings, ms, _ = setup
    ms.create_table(Table("db", "m", MANAGED_TABLE, "/w/m", (Column("id", "bigint"),), ()))
    with pytest.raises(SchemaError, match="db.m is a MANAGED_TABLE.*for EXTERNAL tables"):
        analyze_partition(ms, settings, "db.m", ())


def test_a_value_not_of_its_keys_type_is_refused(setup):
    settings, ms, _ = setup
    with pytest.raises(SchemaError, match="value 'x' of key 'n' is not a int"):
        add_partition(ms, settings, "db.t", ("x",))


def test_repair_of_an_unpartitioned_table_names_analyze(setup, tmp_path):
    settings, ms, _ = setup
    write(str(tmp_path / "flat" / "f.parquet"), [1])
    register_external_table(ms, settings, "db.flat", str(tmp_path / "flat"))
    with pytest.raises(SchemaError, match="raptorx table analyze db.flat"):
        repair_table(ms, settings, "db.flat")


def test_repair_reports_a_partition_whose_directory_is_gone(setup):
    settings, ms, root = setup
    shutil.rmtree(root / "n=2")
    write(str(root / "n=3" / "f.parquet"), [9])
    report = repair_table(ms, settings, "db.t")
    assert (report.added, report.without_files) == (("n=3",), ("n=2",))
    values = {p.values for p in ms.list_partitions(ms.get_table("db", "t"))}
    assert values == {("1",), ("2",), ("3",)}  # reported, not dropped


def test_an_empty_partition_is_trusted_until_a_file_appears(setup):
    settings, ms, root = setup
    added = add_partition(ms, settings, "db.t", ("5",))
    assert added.row_count == 0 and added.location.endswith("/t/n=5")

    def plan():
        table = ms.get_table("db", "t")
        with CounterDeltas() as c:
            p = plan_scan(ms, settings, table, table.all_columns, (Comparison(">", "id", 0),))
        return p, c

    _, c = plan()
    assert c["planner.partitions_stats_untrusted"] == 0
    write(str(root / "n=5" / "f.parquet"), [7])
    p, c = plan()
    assert c["planner.partitions_stats_untrusted"] == 1
    assert any(s.url.endswith("n=5/f.parquet") for s in p.splits)
