"""Issue 10, finding 2: an external partition's statistics describe the files they were
computed from, so they prune only a sealed partition. A file added to an unsealed partition
after registration must be read (through Spark, the issue's exact scenario)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.tables.table_registration import register_external_table


def _write(path, ids):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_file_added_to_an_unsealed_partition_is_not_pruned(
    spark, env, tmp_path, counted, partitioned
):
    root = str(tmp_path / "t")
    part = os.path.join(root, "p=1") if partitioned else root
    _write(os.path.join(part, "part-0.parquet"), [1, 2, 3])
    name = f"{env.unique_db()}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root)  # unsealed, id 1..3
    _write(os.path.join(part, "part-1.parquet"), [500])  # after the statistics were taken

    df = spark.read.format("tiered_hive").load(name)
    with counted() as c:
        assert [r.id for r in df.where("id > 3").collect()] == [500]
    assert c["planner.partitions_pruned_by_stats"] == 0
    assert c["planner.partitions_stats_untrusted"] == 1
    assert df.selectExpr("count_if(id > 3) AS n").collect()[0].n == 1


def test_a_sealed_partition_is_still_pruned_by_its_statistics(spark, env, tmp_path, counted):
    root = str(tmp_path / "t")
    _write(os.path.join(root, "p=1", "part-0.parquet"), [1, 2, 3])
    name = f"{env.unique_db()}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root, sealed=True)
    with counted() as c:
        assert spark.read.format("tiered_hive").load(name).where("id > 3").count() == 0
    assert c["planner.partitions_pruned_by_stats"] == 1
    assert c["planner.partitions_stats_untrusted"] == 0
