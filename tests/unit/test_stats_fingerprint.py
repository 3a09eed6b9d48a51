"""Statistics are trusted only for the files they describe.

Planner-level (no Spark): a partition's statistics prune it or drop a predicate only while
the partition's listing is the file set they were computed from (``statsFileSet``); a
managed table's, partitioned or not, only while its last write is visible to the snapshot.
The reads go through ``scan.read_split`` with the predicates each split evaluates, so a
dropped predicate shows as rows that fail it."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.config import load_settings
from raptorx_py.datasource.planning.planner import plan_scan, stats_trusted
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.hive.model import Partition
from raptorx_py.hive.table_parameters import STATS_FILES_PARAM
from raptorx_py.hive.write_ids import ValidWriteIdList
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.predicates import Comparison, IsNotNull
from raptorx_py.storage.file_sets import file_set_fingerprint
from raptorx_py.storage.hive_layout import DataFile
from raptorx_py.tables.table_registration import register_external_table
from tests.support.counter_deltas import CounterDeltas


def write_ids(ids: list[int | None], path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)


@pytest.fixture
def setup(tmp_path):
    settings = load_settings(
        overrides={
            "hive.metastore.url": f"sqlite:///{tmp_path}/ms.db",
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
        },
        env={},
        cwd=tmp_path,
    )
    ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"))
    yield settings, ms, tmp_path
    ms.close()


def query(ms, settings, name, *predicates):
    """``(ids read, counter deltas)`` of ``SELECT id FROM name WHERE predicates``."""
    table = ms.get_table(*name.split("."))
    with CounterDeltas() as c:
        plan = plan_scan(ms, settings, table, table.all_columns, predicates)
    got = []
    for split in plan.splits:
        evaluated = plan.data_predicates if split.predicates is None else split.predicates
        for b in read_split(split, plan.table, plan.columns, evaluated, settings):
            got += b.column("id").to_pylist()
    return sorted(got, key=lambda v: (v is None, v)), c


def unseal_change_seal(ms, settings, name, part_dir, values):
    """The documented way of changing a sealed partition: unseal, upload, seal."""
    from raptorx_py.tables.partition_statistics import seal_partition, unseal_partition

    unseal_partition(ms, name, values)
    write_ids([500, None], os.path.join(part_dir, "part-1.parquet"))
    assert seal_partition(ms, settings, name, values).recomputed


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_file_added_outside_the_statistics_never_prunes_or_drops_a_predicate(setup, partitioned):
    """The issue's sequence without its commands: a file added to a sealed partition whose
    statistics were not recomputed (an out-of-band change, or a seal set by hand)."""
    settings, ms, tmp = setup
    root = str(tmp / "t")
    part = os.path.join(root, "k=a") if partitioned else root
    write_ids([1, 2, 3], os.path.join(part, "part-0.parquet"))
    register_external_table(ms, settings, "db.t", root, sealed=True)
    write_ids([500, None], os.path.join(part, "part-1.parquet"))  # stats still say 1..3

    got, c = query(ms, settings, "db.t", Comparison(">", "id", 100))
    assert got == [500]
    assert c["planner.partitions_pruned_by_stats"] == 0
    assert c["planner.partitions_stats_untrusted"] == 1
    got, c = query(ms, settings, "db.t", Comparison("<=", "id", 10))
    assert got == [1, 2, 3]  # id <= 10 kept although the stale max (3) made it always true
    assert c["planner.predicates_dropped_by_stats"] == 0
    got, _ = query(ms, settings, "db.t", IsNotNull("id"))
    assert got == [1, 2, 3, 500]  # the new file's null is not counted as not null


@pytest.mark.parametrize("partitioned", [True, False])
def test_statistics_of_the_registered_files_still_prune_and_simplify(setup, partitioned):
    settings, ms, tmp = setup
    root = str(tmp / "t")
    part = os.path.join(root, "k=a") if partitioned else root
    write_ids([1, 2, 3], os.path.join(part, "part-0.parquet"))
    register_external_table(ms, settings, "db.t", root)  # unsealed: trusted once listed

    got, c = query(ms, settings, "db.t", Comparison(">", "id", 100))
    assert got == []
    assert c["planner.partitions_pruned_by_stats"] == 1
    assert c["planner.partitions_stats_untrusted"] == 0
    got, c = query(ms, settings, "db.t", Comparison("<=", "id", 10))
    assert got == [1, 2, 3]
    assert c["planner.predicates_dropped_by_stats"] == 1


def test_unseal_change_seal_recomputes_the_statistics(setup):
    """The unseal, change, seal sequence: after ``partition seal`` the statistics describe
    the new file, so they prune and simplify correctly again."""
    settings, ms, tmp = setup
    root = str(tmp / "t")
    write_ids([1, 2, 3], os.path.join(root, "k=a", "part-0.parquet"))
    write_ids([7], os.path.join(root, "k=b", "part-0.parquet"))
    register_external_table(ms, settings, "db.t", root, sealed=True)
    unseal_change_seal(ms, settings, "db.t", os.path.join(root, "k=a"), ("a",))

    got, c = query(ms, settings, "db.t", Comparison(">", "id", 100))
    assert got == [500]
    assert c["planner.partitions_pruned_by_stats"] == 1  # k=b, by its still-true stats
    assert c["planner.partitions_stats_untrusted"] == 0  # k=a's were recomputed
    got, _ = query(ms, settings, "db.t", Comparison("<=", "id", 10))
    assert got == [1, 2, 3, 7]
    got, _ = query(ms, settings, "db.t", IsNotNull("id"))
    assert got == [1, 2, 3, 7, 500]
    (p,) = [p for p in ms.list_partitions(ms.get_table("db", "t")) if p.values == ("a",)]
    assert p.parameters["sealed"] == "true"
    assert p.row_count == 5
    assert p.stats["id"].num_nulls == 1 and p.stats["id"].high == 500


def test_one_trust_rule_for_partitions_and_unpartitioned_tables():
    """Item 4c: an unpartitioned managed table is held to the write-id rule its partitions
    are; an external object to its file set."""
    files = (DataFile("/t/k=a/f.parquet", 10, "mtime:1.0"),)
    fingerprint = file_set_fingerprint("/t/k=a", files)
    ids = ValidWriteIdList.from_string("db.t:5:9223372036854775807::3")
    assert stats_trusted({STATS_FILES_PARAM: fingerprint}, None, fingerprint)
    assert stats_trusted({STATS_FILES_PARAM: fingerprint, "sealed": "true"}, None, fingerprint)
    assert not stats_trusted({"sealed": "true"}, None, fingerprint)  # no file set recorded
    other = file_set_fingerprint("/t/k=a", (DataFile("/t/k=a/f.parquet", 10, "mtime:2.0"),))
    assert not stats_trusted({STATS_FILES_PARAM: fingerprint}, None, other)
    assert stats_trusted({"writeId": "5"}, ids)
    assert not stats_trusted({"writeId": "3"}, ids)  # aborted or open
    assert not stats_trusted({"writeId": "6"}, ids)  # committed after the snapshot
    p = Partition(("1",), "/x", {"writeId": "6"})
    assert not stats_trusted(p.parameters, ids)


def test_an_unpartitioned_managed_table_is_pruned_only_under_a_visible_write_id(setup):
    """Item 4c: table statistics of a managed table whose last write the snapshot does not
    see never prune it (before, any managed unpartitioned table was trusted)."""
    from raptorx_py.hive.model import MANAGED_TABLE, Column, ColumnStats, Table

    settings, ms, tmp = setup
    loc = str(tmp / "warehouse" / "db.db" / "m")
    ms.create_database("db")
    ms.create_table(
        Table(
            "db",
            "m",
            MANAGED_TABLE,
            loc,
            (Column("id", "bigint"),),
            (),
            {
                "transactional": "true",
                "transactional_properties": "insert_only",
                "numRows": "3",
                "writeId": "6",
            },
            {"id": ColumnStats(0, 1, 3)},
        )
    )
    table = ms.get_table("db", "m")
    ids = ValidWriteIdList.from_string("db.m:5:9223372036854775807::")

    class Snap:
        def table(self, name):
            return type("T", (), {"write_ids": ids})()

    with CounterDeltas() as c:
        plan = plan_scan(
            ms, settings, table, table.all_columns, (Comparison(">", "id", 100),), snapshot=Snap()
        )
    assert plan.partitions_pruned_by_stats == 0
    assert c["planner.partitions_stats_untrusted"] == 1


def test_a_file_rewritten_under_a_cached_sealed_listing_fails_saying_what_to_do(tmp_path):
    """The sealed partition's cached listing names the old version; the read
    fails (never a mix of versions) with the commands that change a sealed partition, and
    after them the new version is read with statistics that describe it."""
    from raptorx_py.errors import FileChangedError
    from raptorx_py.tables.partition_statistics import seal_partition, unseal_partition

    settings = load_settings(
        overrides={
            "hive.metastore.url": f"sqlite:///{tmp_path}/ms.db",
            "hive.file-status-cache-tables": "db.*",
            "hive.file-status-cache-expire-time": "1h",
        },
        env={},
        cwd=tmp_path,
    )
    ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"))
    root = str(tmp_path / "t")
    path = os.path.join(root, "k=a", "part-0.parquet")
    write_ids([1, 2, 3], path)
    register_external_table(ms, settings, "db.t", root, sealed=True)
    assert query(ms, settings, "db.t", Comparison(">", "id", 0))[0] == [1, 2, 3]  # cached
    write_ids([4, 5, 6, 7, 8], path)  # rewritten in place: another size

    with pytest.raises(FileChangedError) as e, CounterDeltas() as c:
        query(ms, settings, "db.t", Comparison(">", "id", 0))
    assert c["reader.files_changed"] == 1
    message = str(e.value)
    assert "partition k=a of db.t" in message and "1h" not in message
    assert "`raptorx partition unseal db.t k=a`" in message
    assert "`raptorx partition seal db.t k=a`" in message
    assert "hive.file-status-cache-expire-time, 3600s" in message

    unseal_partition(ms, "db.t", ("a",))
    assert query(ms, settings, "db.t", Comparison(">", "id", 0))[0] == [4, 5, 6, 7, 8]
    assert seal_partition(ms, settings, "db.t", ("a",)).recomputed
    got, c = query(ms, settings, "db.t", Comparison(">", "id", 5))
    assert got == [6, 7, 8] and c["planner.partitions_stats_untrusted"] == 0
    ms.close()


def test_a_file_rewritten_between_planning_and_reading_fails_where_a_predicate_was_dropped(
    setup,
):
    """The plan dropped ``id <= 10`` (its statistics say ids 1..3); the file rewritten
    before the read holds 500: reading it without the predicate would return 500, so the
    read checks the listed version (every cache off) and fails instead."""
    from raptorx_py.errors import FileChangedError

    settings, ms, tmp = setup
    root = str(tmp / "t")
    path = os.path.join(root, "k=a", "part-0.parquet")
    write_ids([1, 2, 3], path)
    register_external_table(ms, settings, "db.t", root)
    table = ms.get_table("db", "t")
    plan = plan_scan(ms, settings, table, table.all_columns, (Comparison("<=", "id", 10),))
    (split,) = plan.splits
    assert split.predicates == ()  # dropped: always true for the listed file
    write_ids([500, 600, 700, 800], path)
    with pytest.raises(FileChangedError, match="changed after it was listed"):
        list(read_split(split, plan.table, plan.columns, split.predicates, settings))
