"""The three storage tiers composed in tiered_hive, proved by the requests the S3 endpoint
serves and by the tiers' counters (read from the metrics sink, so they show that the driver's
and the executors' counts are flushed there).

- TPC-H over sealed partitions: a cold run fetches each needed block once, a warm run makes
  no request at all, and both return DuckDB's rows.
- Open partitions are listed by every query; un-sealing one makes it listed again, and a
  file added to an open partition is read by the next query.
- A corrupt block, a corrupt footer entry and an unusable cache directory cost requests,
  never rows; a cached copy that passes its checksum but does not decode is read again
  from the store.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py import cli
from raptorx_py.cache.block_cache import DEFAULT_BLOCK_SIZE, block_cache_for
from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.errors import FileChangedError
from raptorx_py.storage.fs import filesystem_for
from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch import oracle, queries
from tests.support.counter_deltas import CounterDeltas
from tests.support.tpch_loading import load_tpch_into_bucket

pytestmark = [pytest.mark.spark, pytest.mark.s3]

DATABASE = "tpch_tiers"
QUERIES = (1, 6, 5)


def tier_options(base: Path, **extra: str) -> dict[str, str]:
    """Per-read properties that switch every storage tier on, caching under ``base``."""
    return {
        "hive.file-status-cache-tables": "*",
        "hive.parquet.metadata-cache-enabled": "true",
        "cache.enabled": "true",
        "cache.base-directory": str(base),
        "hive.file-handle-cache-enabled": "true",
        **extra,
    }


def nonzero(requests: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in requests.items() if v}


@pytest.fixture(scope="module")
def tpch(request, env, s3_endpoint, tpch_sf001_dir, tpch_scale):
    """SF 0.01 in its own bucket, registered sealed (the loader's default) as tpch_tiers.*;
    returns the S3 properties."""
    return load_tpch_into_bucket(
        request, env, s3_endpoint, tpch_scale, bucket="raptorx-storage-tiers", database=DATABASE
    )


def register_tpch_views(spark, options: dict[str, str]) -> None:
    def reader(table):
        return spark.read.format("tiered_hive").options(**options).load(f"{DATABASE}.{table}")

    queries.register_views(spark, reader)


def run_query(spark, n, scale, counted, s3_endpoint):
    # Each query asks the store for each file's identity once, as if first in this JVM
    # (which remembers the versions it checked: an earlier test's query read them too).
    spark._jvm.raptorx.cache.BlockCachingFileSystem.forgetChecked()
    s3_endpoint.reset_stats()
    with counted() as c:
        rows = oracle.spark_rows(spark.sql(queries.query_text(n, scale, "spark")))
    return rows, c, s3_endpoint.stats()


def test_tpch_data_files_fit_in_one_block(tpch_sf001_dir):
    """What the request counts below rely on: at SF 0.01 every file is one cache block."""
    sizes = [p.stat().st_size for p in Path(tpch_sf001_dir).rglob("*.parquet")]
    assert len(sizes) > 100 and max(sizes) < DEFAULT_BLOCK_SIZE


@pytest.mark.parametrize("n", QUERIES, ids=lambda n: f"q{n:02d}")
def test_cold_run_fetches_each_block_once_and_warm_run_makes_no_request(
    n, spark, env, tpch, tpch_scale, duckdb_expected, counted, s3_endpoint, tmp_path
):
    # Each query starts from caches no other query filled: its own cache directory, and its
    # own listing cache (a process keeps one listing cache per distinct size setting).
    options = {
        **tpch,
        **tier_options(tmp_path / "cache", **{"hive.file-status-cache-size": str(100_000 + n)}),
    }
    register_tpch_views(spark, options)

    rows, c, store = run_query(spark, n, tpch_scale, counted, s3_endpoint)
    diff = oracle.compare_results(
        duckdb_expected[n], rows, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"cold Q{n}: {diff}"
    # Every partition value pruning leaves is listed (an external partition's statistics
    # are trusted only for the files it lists), those its statistics prune too.
    listed = c["planner.partitions_listed"]
    assert listed == c["planner.partitions_total"] - c["planner.partitions_pruned_by_value"]
    opened = c["reader.files_opened"]  # each table is scanned once: distinct files
    assert listed > 0 and opened > 0
    # Listings: every surviving partition once, all sealed, so all stored.
    assert (c["listing_cache.misses"], c["listing_cache.stores"]) == (listed, listed), c.delta
    assert c["listing_cache.hits"] == 0 and c["listing_cache.skipped_unsealed"] == 0
    # Data: one block per file, fetched with one ranged GET; the footer comes out of it. The
    # splits are Spark's reader's (hive.parquet.reader AUTO; a pushed aggregation is computed
    # in the JVM too), which reads footers through the block cache and opens each file with
    # the size and ETag the listing gave (no HEAD: s3a's If-Match checks every GET); the
    # footer cache is the Python reader's.
    spark_files = c["reader.spark_splits"]  # one split per file at this scale
    assert c["block_cache.misses"] == c["block_cache.remote_requests"] == opened
    assert c["storage.status_from_listing"] == spark_files, c.delta
    assert c["storage.status_requests"] == 0, c.delta
    # Each fetch opened the file or took a kept handle (an earlier query's files are kept).
    assert c["storage.file_opens"] + c["file_handles.hits"] == opened, c.delta
    assert c["footer_cache.misses"] == opened - spark_files
    # A table's partitions (lineitem's 80-odd months) are listed by one listing of its
    # location (planner.TableRoot), the others one by one.
    assert c["planner.root_listings"] >= 1 and c["planner.listings_from_root"] > 16, c.delta
    lists = listed - c["planner.listings_from_root"] + c["planner.root_listings"]
    expected_requests = {"LIST": lists, "RANGED_GET": opened}
    assert nonzero(store["requests"]) == nonzero(expected_requests)
    assert store["bytes"]["RANGED_GET"] == c["block_cache.bytes_from_remote"] > 0

    register_tpch_views(spark, options)
    rows, c, store = run_query(spark, n, tpch_scale, counted, s3_endpoint)
    diff = oracle.compare_results(
        duckdb_expected[n], rows, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"warm Q{n}: {diff}"
    assert store["total_requests"] == 0, store["requests"]
    assert c["listing_cache.hits"] == listed and c["listing_cache.misses"] == 0
    assert c["reader.files_opened"] == opened
    assert c["storage.file_opens"] == c["file_handles.hits"] == 0  # nothing fetched
    assert c["footer_cache.hits_memory"] + c["footer_cache.hits_disk"] == opened - spark_files
    assert c["block_cache.misses"] == 0 and c["block_cache.hits"] >= opened
    assert c["block_cache.bytes_from_remote"] == 0 and c["block_cache.bytes_from_cache"] > 0


# --- a small table of our own: open partitions, corruption, unusable directories ----------


def put_file(fs, path: str, ids) -> None:
    with fs.open(path, "wb") as f:
        pq.write_table(pa.table({"id": pa.array(list(ids), pa.int64())}), f)


@pytest.fixture
def events(env, s3_endpoint, s3_bucket):
    """``<db>.events`` on S3: partitions m=1, m=2, m=3 of 10 rows each, registered sealed.
    Returns (name, props, fs, bucket)."""
    props = s3_endpoint.s3_properties()
    settings = env.settings(**props)
    fs, _ = filesystem_for(f"s3://{s3_bucket}", settings)
    for m in (1, 2, 3):
        put_file(fs, f"{s3_bucket}/events/m={m}/part-0.parquet", range(10 * m, 10 * m + 10))
    name = f"{env.unique_db('tiers')}.events"
    with env.metastore(**props) as ms:
        register_external_table(ms, settings, name, f"s3://{s3_bucket}/events", sealed=True)
    return name, props, fs, s3_bucket


def query_events(spark, name, options, counted, s3_endpoint, sql="count(*)"):
    """``sql`` over ``name`` read by the Python reader, whose tiers these tests count (the
    footer cache is the Python reader's; under AUTO the JVM reads and aggregates)."""
    options = {"hive.parquet.reader": "PYTHON", **options}
    df = spark.read.format("tiered_hive").options(**options).load(name)
    s3_endpoint.reset_stats()
    with counted() as c:
        value = df.selectExpr(sql).collect()[0][0]
    return value, c, s3_endpoint.stats()["requests"]


def test_open_partitions_are_listed_by_every_query(
    spark, env, events, counted, s3_endpoint, tmp_path
):
    name, props, fs, bucket = events
    options = {**props, **tier_options(tmp_path / "cache")}
    with env.metastore(**props) as ms:
        table = ms.get_table(*name.split("."))
        ms.set_partition_parameters(table, ("3",), {"sealed": None})  # m=3 is open

    rows, c, requests = query_events(spark, name, options, counted, s3_endpoint)
    assert rows == 30 and requests["LIST"] == 3
    assert (c["listing_cache.misses"], c["listing_cache.skipped_unsealed"]) == (2, 1)

    rows, c, requests = query_events(spark, name, options, counted, s3_endpoint)
    assert rows == 30 and requests["LIST"] == 1  # only the open partition
    assert (c["listing_cache.hits"], c["listing_cache.skipped_unsealed"]) == (2, 1)

    assert (
        cli.main(
            [
                "partition",
                "unseal",
                name,
                "m=1",
                "-p",
                f"hive.metastore.url={env.properties['hive.metastore.url']}",
            ]
        )
        == 0
    )
    rows, c, requests = query_events(spark, name, options, counted, s3_endpoint)
    assert rows == 30 and requests["LIST"] == 2  # m=1 and m=3
    assert (c["listing_cache.hits"], c["listing_cache.skipped_unsealed"]) == (1, 2)

    put_file(fs, f"{bucket}/events/m=3/part-1.parquet", range(100, 105))
    rows, c, requests = query_events(spark, name, options, counted, s3_endpoint)
    assert rows == 35 and requests["LIST"] == 2
    assert c["footer_cache.misses"] == 1  # only the new file is new to the footer cache


def block_files(base: Path) -> list[Path]:
    return sorted(p for p in (base / "blocks" / "data").rglob("*") if p.is_file())


def footer_files(base: Path) -> list[Path]:
    return sorted((base / "footers").rglob("*.footer"))


def scribble(path: Path) -> None:
    """Overwrite bytes in the middle of ``path``, in place (same size)."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 16] = bytes(b ^ 0xFF for b in data[mid : mid + 16])
    path.write_bytes(bytes(data))


def test_corrupt_cache_files_cost_requests_not_rows(spark, events, counted, s3_endpoint, tmp_path):
    name, props, _, _ = events
    base = tmp_path / "cache"
    options = {**props, **tier_options(base)}
    total, _, _ = query_events(spark, name, options, counted, s3_endpoint, "sum(id)")
    assert total == sum(range(10, 40))
    blocks, footers = block_files(base), footer_files(base)
    assert len(blocks) == 3 and len(footers) == 3

    for p in blocks:
        scribble(p)
    total, c, requests = query_events(spark, name, options, counted, s3_endpoint, "sum(id)")
    assert total == sum(range(10, 40))
    assert c["block_cache.corrupt_blocks"] == 3
    assert requests["RANGED_GET"] == c["block_cache.misses"] == 3  # fetched again
    assert requests["LIST"] == 0

    for p in footer_files(base):
        scribble(p)
    # Another memory bound gives every worker a new footer cache with an empty memory tier,
    # so the footers must come from the (corrupt) disk entries.
    options["hive.parquet.metadata-cache-size"] = "50MB"
    total, c, requests = query_events(spark, name, options, counted, s3_endpoint, "sum(id)")
    assert total == sum(range(10, 40))
    assert c["footer_cache.corrupt_entries"] == 3 and c["footer_cache.misses"] == 3
    assert sum(requests.values()) == 0  # the footers were read again from cached blocks


def test_unusable_cache_directory_reads_from_the_store(
    spark, events, counted, s3_endpoint, tmp_path
):
    name, props, _, _ = events
    (tmp_path / "a-file").write_text("not a directory")
    options = {**props, **tier_options(tmp_path / "a-file" / "cache")}
    total, c, requests = query_events(spark, name, options, counted, s3_endpoint, "sum(id)")
    assert total == sum(range(10, 40))
    assert c["block_cache.bypassed"] == 3 and c["block_cache.misses"] == 0
    assert c["footer_cache.misses"] == 3 and c["footer_cache.hits_disk"] == 0
    assert requests["RANGED_GET"] == 6  # per file: the footer, then the data


# --- the same composition without Spark (this process: logs and exact counts) -------------


def plan_events(env, props, name, settings):
    with env.metastore(**props) as ms:
        table = ms.get_table(*name.split("."))
        return table, plan_scan(ms, settings, table, table.all_columns, [])


def read_ids(plan, table, settings) -> list[int]:
    return sorted(
        i
        for s in plan.splits
        for b in read_split(s, table, table.all_columns, (), settings)
        for i in b.column("id").to_pylist()
    )


def test_unusable_cache_directory_warns_once_per_tier(env, events, tmp_path, caplog):
    name, props, _, _ = events
    (tmp_path / "a-file").write_text("not a directory")
    settings = env.settings(**props, **tier_options(tmp_path / "a-file" / "cache"))
    table, plan = plan_events(env, props, name, settings)
    with caplog.at_level(logging.WARNING, logger="raptorx_py"):
        for _ in range(2):
            assert read_ids(plan, table, settings) == list(range(10, 40))
    by_logger = sorted(r.name for r in caplog.records if r.levelno >= logging.WARNING)
    assert by_logger == ["raptorx_py.cache.block_store", "raptorx_py.cache.footer_cache"]


def test_cached_bytes_that_do_not_decode_are_read_again_from_the_store(
    env, events, tmp_path, s3_endpoint
):
    name, props, _, _ = events
    settings = env.settings(**props, **tier_options(tmp_path / "cache"))
    table, plan = plan_events(env, props, name, settings)
    # A block that passes its checksum but holds other bytes (what no checksum can catch).
    split = plan.splits[0]
    target, path = filesystem_for(split.url, settings)
    cache = block_cache_for(settings.block_cache, target)
    key = cache.block_key(path, split.size, split.version)
    assert cache.store.put(key, 0, b"\0" * split.size)
    c = CounterDeltas()
    s3_endpoint.reset_stats()
    assert read_ids(plan, table, settings) == list(range(10, 40))
    assert c["reader.cache_fallbacks"] == 1
    # The fallback read the file itself; the other two files went through the cache.
    assert c["block_cache.misses"] == 2 and c["block_cache.hits"] >= 1


def test_object_overwritten_after_listing_fails_and_is_not_cached(env, events, tmp_path):
    name, props, fs, bucket = events
    base = tmp_path / "cache"
    settings = env.settings(**props, **tier_options(base))
    table, plan = plan_events(env, props, name, settings)
    split = plan.splits[0]
    put_file(fs, split.url.removeprefix("s3://"), range(1000, 1010))  # same size, new ETag
    with pytest.raises(FileChangedError, match=r"was overwritten after the query"):
        list(read_split(split, table, table.all_columns, (), settings))
    assert block_files(base) == [] and footer_files(base) == []


def test_a_table_registered_again_is_listed_again(env, events, tmp_path, s3_endpoint):
    """Sealed listings are keyed by the metastore object: re-registering the table (replace)
    after its files changed lists it afresh, even where the parameters come out equal."""
    name, props, fs, bucket = events
    settings = env.settings(**props, **tier_options(tmp_path / "cache"))
    _, plan = plan_events(env, props, name, settings)
    assert len(plan.splits) == 3
    fs.rm(f"{bucket}/events/m=1/part-0.parquet")
    put_file(fs, f"{bucket}/events/m=1/part-9.parquet", range(10, 20))  # same rows, new name
    with env.metastore(**props) as ms:
        register_external_table(
            ms, settings, name, f"s3://{bucket}/events", replace=True, sealed=True
        )
    s3_endpoint.reset_stats()
    _, plan = plan_events(env, props, name, settings)
    assert s3_endpoint.stats()["requests"]["LIST"] == 3
    assert sorted(
        s.url.rsplit("/", 2)[-2] + "/" + s.url.rsplit("/", 1)[-1] for s in plan.splits
    ) == ["m=1/part-9.parquet", "m=2/part-0.parquet", "m=3/part-0.parquet"]
