"""When the store holds less than the metastore says (docs/design/files-changing.md, the rule
of that name), through Spark: a partition whose directory is gone fails the query with
``PartitionMissingError``, cold, through ``load()`` and by SQL name, under every
``hive.parquet.reader``; ``hive.ignore-absent-partitions`` reads it as empty, counted; a
warm listing cache that still names its files gives ``FileChangedError`` with the sealed
partition's advice, whichever reader reads; ``raptorx table show --check`` reports it; and
Spark's reader on S3, for a sealed file grown, shrunk or deleted, gives the same
``FileChangedError`` as the Python reader, counted in ``reader.files_changed``. The Hive
Metastore's half: ``test_hive_metastore_spark.py``. Counts and errors, never timings."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cli import main
from raptorx_py.error_report import concise_message
from raptorx_py.storage.fs import filesystem_for
from raptorx_py.tables.table_registration import register_external_table
from tests.support.spark_sql_metrics import scan_metrics

pytestmark = pytest.mark.spark

ROWS = 10  # per partition
READERS = ("AUTO", "SPARK", "PYTHON")


def tier_options(tiers: str, cache_dir) -> dict[str, str]:
    """Every data tier on (block, footer, fragment caches) or off; the listing cache, which
    keeps the sealed partitions' listings, is set by each test."""
    on = tiers == "on"
    return {
        "cache.enabled": str(on).lower(),
        "cache.base-directory": str(cache_dir / "blocks"),
        "hive.parquet.metadata-cache-enabled": str(on).lower(),
        "fragment-result-cache.enabled": str(on).lower(),
        "fragment-result-cache.base-directory": str(cache_dir / "fragments"),
    }


def write_partitions(root, keys=(1, 2, 3)) -> None:
    for k in keys:
        part = root / f"k={k}"
        part.mkdir(parents=True)
        ids = pa.array(range(k * 100, k * 100 + ROWS), pa.int64())
        pq.write_table(pa.table({"id": ids}), str(part / "part-0.parquet"))


def failure(run) -> str:
    """The one line of our error that ``run()`` failed with (as the error hook prints it)."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - a pyspark exception, read below
        run()
    message = concise_message(info.value)
    assert message is not None, info.value
    return message


@pytest.fixture
def sealed_table(env, tmp_path):
    """``<db>.t``: three sealed partitions of 10 rows on local files, and its directory."""
    root = tmp_path / "t"
    write_partitions(root)
    name = f"{env.unique_db('absent')}.t"
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, f"file://{root}", sealed=True)
    return name, root


def test_a_partition_gone_fails_cold_by_load_and_by_name_unless_ignored(
    spark, env, sealed_table, counted, capsys
):
    name, root = sealed_table
    shutil.rmtree(root / "k=2")
    with counted() as c:
        for reader in READERS:
            df = spark.read.format("tiered_hive").option("hive.parquet.reader", reader).load(name)
            message = failure(df.collect)
            assert message.startswith("raptorx_py.errors.PartitionMissingError: "), message
            assert f"partition k=2 of {name}, at file://{root}/k=2, does not exist" in message
            assert f"raptorx partition drop {name} k=2" in message
            assert "hive.ignore-absent-partitions=true" in message
        by_name = failure(spark.sql(f"SELECT count(*) FROM raptorx.{name}").collect)
        assert by_name.startswith("raptorx_py.errors.PartitionMissingError: ")
        assert f"partition k=2 of {name}" in by_name
    assert c["planner.partitions_absent"] == 4
    assert c["planner.partitions_absent_skipped"] == 0

    ignoring = spark.read.format("tiered_hive").option("hive.ignore-absent-partitions", "true")
    with counted() as c:
        assert len(ignoring.load(name).collect()) == 2 * ROWS
        (scan,) = scan_metrics(spark, name)
        assert scan["absent partitions read as empty"] == "1"
        assert ignoring.load(name).filter("k = 2").count() == 0
    assert c["planner.partitions_absent"] == c["planner.partitions_absent_skipped"] == 2

    args = ["-p", f"hive.metastore.url={env.properties['hive.metastore.url']}"]
    assert main(["table", "show", name, "--partitions", "--check", *args]) == 1
    out = capsys.readouterr().out
    assert f"2  rows={ROWS}  file://{root}/k=2  ABSENT: does not exist" in out
    assert "checked 3 partitions: 1 absent from storage" in out
    assert main(["table", "repair", name, "--drop-missing", *args]) == 0
    assert "dropped partition k=2: absent from storage" in capsys.readouterr().out
    assert main(["table", "show", name, "--check", *args]) == 0
    assert spark.read.format("tiered_hive").load(name).count() == 2 * ROWS


@pytest.mark.parametrize("tiers", ["on", "off"])
@pytest.mark.parametrize("reader", READERS)
def test_a_partition_gone_under_a_warm_listing_is_a_changed_file(
    spark, env, sealed_table, counted, reader, tiers, tmp_path
):
    """The sealed partition's listing is cached by the first query; its directory deleted,
    the next query plans with the cached files and fails reading them: FileChangedError with
    the sealed partition's advice, from either reader, never fewer rows. Spark's reader says
    so in the JVM: no Python task runs."""
    name, root = sealed_table
    df = (
        spark.read.format("tiered_hive")
        .options(**tier_options(tiers, tmp_path / "cache"))
        .option("hive.file-status-cache-tables", "*")
        .option("hive.parquet.reader", reader)
        .load(name)
    )
    # Statistics rule every file out: the listing is cached, none of the files' bytes are.
    assert df.filter("id < 0").count() == 0
    shutil.rmtree(root / "k=2")
    with counted() as c:
        message = failure(df.collect)
    assert message.startswith("raptorx_py.errors.FileChangedError: "), message
    assert f"file://{root}/k=2/part-0.parquet" in message
    assert f"`raptorx partition unseal {name} k=2`" in message
    assert "hive.file-status-cache-expire-time" in message
    assert c["reader.files_changed"] == 1
    assert c["planner.partitions_absent"] == 0
    assert c["reader.spark_files_changed"] == (0 if reader == "PYTHON" else 1)
    assert (c["reader.python_tasks"] == 0) == (reader != "PYTHON"), dict(c)


@pytest.mark.parametrize("reader", ["AUTO", "PYTHON"])
def test_a_partition_gone_is_read_whole_from_caches_that_hold_it(
    spark, env, sealed_table, counted, reader, tmp_path
):
    """The other half of the cached listing's rule: what the caches hold of a sealed
    partition's listed files is read whole, the rows the metastore says, never fewer."""
    name, root = sealed_table
    df = (
        spark.read.format("tiered_hive")
        .options(**tier_options("on", tmp_path / "cache"))
        .option("hive.file-status-cache-tables", "*")
        .option("hive.parquet.reader", reader)
        .load(name)
    )
    expected = sorted(r.id for r in df.collect())
    assert len(expected) == 3 * ROWS
    shutil.rmtree(root / "k=2")
    with counted() as c:
        assert sorted(r.id for r in df.collect()) == expected
    assert c["reader.files_changed"] == 0
    # from the block cache, or the fragment cache where the first read stored the splits
    assert c["block_cache.hits"] + c["fragment_cache.hits"] > 0, dict(c)
    assert c["block_cache.misses"] == 0, dict(c)


@pytest.mark.s3
@pytest.mark.parametrize("tiers", ["on", "off"])
@pytest.mark.parametrize("change", ["grown", "shrunk", "deleted"])
def test_spark_reader_on_a_sealed_s3_file_changed_gives_the_python_readers_error(
    spark, env, s3_endpoint, s3_bucket, counted, tmp_path, change, tiers
):
    """A sealed partition's file on S3 replaced by a larger or smaller one, or deleted,
    without `partition unseal`, read by Spark's reader where the caches lack its bytes: the
    documented FileChangedError, its advice, counted, as the Python reader gives, raised in
    the JVM (no Python task)."""
    props = {**s3_endpoint.s3_properties(), "hive.file-status-cache-tables": "*"}
    settings = env.settings(**props)
    fs, _ = filesystem_for(f"s3://{s3_bucket}", settings)
    path = f"{s3_bucket}/absent-{change}-{tiers}/k=1/part-0.parquet"

    def put(n: int) -> None:
        with fs.open(path, "wb") as f:
            pq.write_table(pa.table({"id": pa.array(range(n), pa.int64())}), f)

    put(1000)
    name = f"{env.unique_db('changed')}.t"
    with env.metastore(**props) as ms:
        register_external_table(
            ms, settings, name, f"s3://{s3_bucket}/absent-{change}-{tiers}", sealed=True
        )
    df = (
        spark.read.format("tiered_hive")
        .options(**props)
        .options(**tier_options(tiers, tmp_path / "cache"))
        .option("hive.parquet.reader", "SPARK")
        .load(name)
    )
    # Statistics prune the file: its listing is cached, none of its bytes are.
    assert df.filter("id < 0").count() == 0
    if change == "deleted":
        fs.rm(path)
    else:
        put(5000 if change == "grown" else 3)
    with counted() as c:
        message = failure(df.collect)
    assert message.startswith("raptorx_py.errors.FileChangedError: "), message
    assert f"s3://{path}" in message
    assert f"`raptorx partition unseal {name} k=1`" in message
    assert c["reader.files_changed"] == 1
    assert c["reader.spark_files_changed"] == 1
    assert c["reader.python_tasks"] == 0
