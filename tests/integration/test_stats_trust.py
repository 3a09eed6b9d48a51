"""An external partition's statistics describe the
files they were computed from, so they prune (or drop a predicate) only while the partition
lists those files, sealed or not. A file added after registration must be read, and the
documented unseal / change / seal sequence must leave statistics that describe the new files
(through Spark with the jar, so with aggregation pushdown: the issues' exact scenarios)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cli import main
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


def _cli(env, *argv):
    assert main([*argv, "-p", f"hive.metastore.url={env.properties['hive.metastore.url']}"]) == 0


@pytest.mark.parametrize("seal_with", ["cli", "by hand"])
def test_unseal_change_seal_answers_as_spark_does(spark, env, tmp_path, counted, seal_with):
    """`partition unseal`, a new file (id 500 and a null), `partition
    seal`. Before, the registration's statistics (ids 1..3) stayed trusted: `id > 100`
    returned nothing and `count(*), sum(id) WHERE id <= 10` counted the new file's rows,
    (4, 506) (with IS NOT NULL, its null). "by hand": the seal set without the command (as
    an older raptorx or another tool would), whose statistics are then not trusted."""
    root = str(tmp_path / "t")
    part = os.path.join(root, "k=a")
    _write(os.path.join(part, "part-0.parquet"), [1, 2, 3])
    name = f"{env.unique_db()}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, root, sealed=True)
    _cli(env, "partition", "unseal", name, "k=a")
    _write(os.path.join(part, "part-1.parquet"), [500, None])
    if seal_with == "cli":
        _cli(env, "partition", "seal", name, "k=a")
    else:
        with env.metastore() as ms:
            ms.set_partition_parameters(ms.get_table(*name.split(".")), ("a",), {"sealed": "true"})

    df = spark.read.format("tiered_hive").load(name)
    ref = spark.read.parquet(root)
    for where in ("id > 100", "id <= 10", "id IS NOT NULL"):
        with counted() as c:
            got = df.where(where).selectExpr("count(*) AS n", "sum(id) AS s").collect()
        want = ref.where(where).selectExpr("count(*) AS n", "sum(id) AS s").collect()
        assert got == want, where
        assert c["planner.partitions_stats_untrusted"] == (0 if seal_with == "cli" else 1)
    assert sorted(r.id for r in df.where("id > 100").collect()) == [500]
