"""The versioned metastore cache in the data source, through real Spark, on both metastore
backends (``metastore_url``: an SQLite file and a PostgreSQL database, one per test).

What a query does (``raptorx_py.datasource.source``): per scan, the planning process (the
application's planner in the driver's own process, ``datasource/planning/driver_planner.py``)
takes the query's snapshot ONCE (``CachedMetastore.snapshot``: table id, type,
ValidWriteIdList, the one uncached round trip), reads the table and the partitions under it
through its process-wide cache (``cached_metastore_for``), and the snapshot rides with the
pickled reader. The planner
serves every query of the application, so the cache is warm from the second query.

Counted, never timed: ``metastore.round_trips`` summed over every process (``counted``).
Every read passes ``hive.metastore.url`` of the test's own metastore and a cache TTL (the
default ``0s`` turns the cache off); ``hive.metastore-refresh-interval=1h`` keeps the
background refresher from changing what the cache holds, which proves that what a query sees
after a commit does not depend on it (its statements count as
``metastore.refresh_round_trips`` anyway, never as a query's).

Every test's metastore and table directories are its own (``tmp_path``), so the caches of
one test are never those of another.

Managed tables are written as insert-only ACID: the files of write id ``w`` are in
``<partition>/delta_<w>_<w>/``.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.hive.model import EXTERNAL_TABLE, MANAGED_TABLE, Column, Partition, Table
from raptorx_py.metastore.notifications import current_notification_id
from raptorx_py.metastore.store import Metastore, backend_for_url
from tests.support.counter_deltas import CounterDeltas

pytestmark = pytest.mark.spark

#: Round trips of the database reads behind a cache miss (as tests/unit/test_cached_store.py):
#: get_table = database, table, columns, keys, parameters, statistics; list_partitions =
#: partitions, key values, parameters, statistics.
GET_TABLE_TRIPS = 6
LIST_PARTITIONS_TRIPS = 4
#: A query whose snapshot no cached entry is fresh for: snapshot + table + partitions.
MISS = 1 + GET_TABLE_TRIPS + LIST_PARTITIONS_TRIPS

COLUMNS = (Column("id", "bigint"), Column("v", "string"))
KEYS = (Column("k", "int"),)


def options(url: str, **extra) -> dict[str, str]:
    return {
        "hive.metastore.url": url,
        "hive.metastore-cache-ttl": "1h",
        "hive.metastore-refresh-interval": "1h",
        **extra,
    }


def load(spark, name: str, opts: dict[str, str]):
    return spark.read.format("tiered_hive").options(**opts).load(name)


def ids(df) -> list[int]:
    return sorted(r[0] for r in df.select("id").collect())


def write_files(root: str, k: int, write_id: int | None, ids_: range) -> None:
    """One Parquet file of ``ids_`` in partition ``k=<k>``: in ``delta_<w>_<w>/`` for a write
    id (managed, insert-only ACID), directly in the partition directory without one."""
    d = os.path.join(root, f"k={k}")
    if write_id is not None:
        d = os.path.join(d, f"delta_{write_id:07d}_{write_id:07d}")
    os.makedirs(d, exist_ok=True)
    pq.write_table(
        pa.table(
            {
                "id": pa.array(list(ids_), pa.int64()),
                "v": pa.array([f"v{i}" for i in ids_], pa.string()),
            }
        ),
        os.path.join(d, "part-0.parquet"),
    )


def rows_of(k: int, write_id: int = 1) -> range:
    """The ids a write of ``write_id`` puts in partition ``k`` (disjoint for every pair)."""
    base = k * 100 + write_id * 10
    return range(base, base + 3)


class Tables:
    """Tables of one test's metastore (``writer`` is the test's own connection: "the other
    application", or the writing application itself)."""

    def __init__(self, url: str, tmp_path):
        self.url = url
        self.tmp = tmp_path
        self.writer = Metastore(backend_for_url(url))
        # Tables the Spark writer creates go under the database's location: keep it in this
        # test's directory (every test's metastore starts write ids at 1 again).
        self.writer.create_database("db", f"file://{tmp_path}/warehouse/db.db")

    def managed(self, name: str, keys: list[int], *, with_files=None) -> Table:
        """A managed table whose partitions ``keys`` are written by one committed
        transaction (write id 1); only ``with_files`` (default: all) get a data file."""
        root = str(self.tmp / name)
        table = self.writer.create_table(
            Table("db", name, MANAGED_TABLE, f"file://{root}", COLUMNS, KEYS)
        )
        txn = self.writer.open_transaction(user="test")
        wid = self.writer.allocate_write_id(txn, "db", name)
        parts = [Partition((str(k),), f"{table.location}/k={k}") for k in keys]
        self.writer.add_partitions(table, parts, write_id=wid)
        for k in keys if with_files is None else with_files:
            write_files(root, k, wid, rows_of(k, wid))
        self.writer.commit_transaction(txn)
        return table

    def commit(
        self,
        table: Table,
        *,
        add: tuple[int, ...] = (),
        append: tuple[int, ...] = (),
        commit: bool = True,
    ) -> tuple[int, int]:
        """One transaction: new partitions ``add`` and appends to the existing partitions
        ``append``, each with a file in its ``delta_<w>_<w>/``; ``(txn, write id)``."""
        w = self.writer
        txn = w.open_transaction(user="test")
        wid = w.allocate_write_id(txn, table.database, table.name)
        root = table.location[len("file://") :]
        for k in add + append:
            write_files(root, k, wid, rows_of(k, wid))
        if add:
            w.add_partitions(
                table, [Partition((str(k),), f"{table.location}/k={k}") for k in add], write_id=wid
            )
        for k in append:
            w.alter_partition(table, Partition((str(k),), f"{table.location}/k={k}"), write_id=wid)
        if commit:
            w.commit_transaction(txn)
        return txn, wid

    def close(self) -> None:
        self.writer.close()


def cache_construction_trips(url: str) -> int:
    """Round trips of building a process's cache for ``url``: opening the metastore (its
    schema check) and reading the last notification id. Measured here, in this process."""
    trips = CounterDeltas()
    with Metastore(backend_for_url(url)) as ms:
        current_notification_id(ms)
    return trips["metastore.round_trips"]


@pytest.fixture
def tables(metastore_url, tmp_path):
    t = Tables(metastore_url, tmp_path)
    yield t
    t.close()


# -- counted: one round trip per warm query ------------------------------------------------------
def test_warm_query_over_10000_partitions_is_one_round_trip(spark, tables, counted):
    """The issue's acceptance count. 10,000 partitions (built in a few statements); only the
    two the query filters on have files. The metastore returns all 10,000 (pruning by value
    happens in the planner), so a cold query fetches them once and a warm one not at all."""
    tables.managed("big", list(range(10_000)), with_files=[5, 6])
    build = cache_construction_trips(tables.url)
    opts = options(tables.url)
    with counted() as at_load:
        df = load(spark, "db.big", opts)
    # load() runs schema() in the application's planner (the driver's process,
    # driver_planner.py), through its cache, new for this metastore: its construction, the
    # snapshot, the table and its 10,000 partitions (their summed size is the table's, for
    # Spark's join planning), once.
    assert at_load["metastore_cache.partition_misses"] == 1, at_load.delta
    trips = build + 1 + GET_TABLE_TRIPS + LIST_PARTITIONS_TRIPS
    assert at_load["metastore.round_trips"] == trips, at_load.delta

    query = df.where("k in (5, 6)")
    with counted() as cold:
        assert ids(query) == [*rows_of(5), *rows_of(6)]
    # The same process plans the scan, through the same cache: the table and the partitions
    # are served (read by load() under a snapshot fresh for the query's): its snapshot alone.
    assert cold["metastore_cache.partition_misses"] == 0, cold.delta
    assert cold["metastore_cache.table_misses"] == 0 and cold["metastore_cache.table_hits"] == 1
    assert cold["planner.partitions_total"] == 10_000
    assert cold["planner.partitions_pruned_by_value"] == 9_998
    assert cold["reader.files_opened"] == 2
    assert cold["metastore.round_trips"] == 1, cold.delta

    for _ in range(2):  # warm, and stays warm
        with counted() as warm:
            assert ids(query) == [*rows_of(5), *rows_of(6)]
        assert warm["metastore.round_trips"] == 1, warm.delta  # the snapshot, nothing else
        assert warm["metastore_cache.partition_hits"] == 1
        assert warm["metastore_cache.table_hits"] == 1
        assert warm["planner.partitions_total"] == 10_000 and warm["reader.files_opened"] == 2

    with counted() as other:  # a new load() and another filter: warm too
        assert ids(load(spark, "db.big", opts).where("k = 6")) == list(rows_of(6))
    # load()'s schema() takes a snapshot of its own (through the same warm cache), then
    # the scan takes the query's: two round trips, both snapshots.
    assert other["metastore.round_trips"] == 2, other.delta
    assert other["metastore_cache.table_hits"] == 2 and other["metastore_cache.table_misses"] == 0


def test_cache_off_reads_the_database_under_one_snapshot(spark, tables, counted):
    """``hive.metastore-cache-ttl=0s`` (the default): every query reads the database, still
    under one snapshot per scan: snapshot + table + partitions, nothing more."""
    tables.managed("t", [1, 2])
    opts = options(tables.url, **{"hive.metastore-cache-ttl": "0s"})
    df = load(spark, "db.t", opts)
    assert ids(df) == [*rows_of(1), *rows_of(2)]  # whatever the planner had to build
    for _ in range(2):
        with counted() as c:
            assert ids(df) == [*rows_of(1), *rows_of(2)]
        assert c["metastore.round_trips"] == MISS, c.delta
        assert c["metastore_cache.partition_hits"] == 0


@pytest.mark.parametrize(
    "props, warm_trips",
    [
        # Tables are not cached: each query reads its table (partitions still cached).
        ({"hive.metastore-cache-scope": "PARTITION"}, 1 + GET_TABLE_TRIPS),
        # Two partitions do not fit a cache of one: each query reads them (the table is cached).
        ({"hive.metastore-cache-maximum-size": "1"}, 1 + LIST_PARTITIONS_TRIPS),
    ],
    ids=["scope-partition", "maximum-size-1"],
)
def test_scope_and_maximum_size_decide_what_a_warm_query_reads(
    spark, tables, counted, props, warm_trips
):
    tables.managed("t", [1, 2])
    df = load(spark, "db.t", options(tables.url, **props))
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    for _ in range(2):
        with counted() as c:
            assert ids(df) == [*rows_of(1), *rows_of(2)]
        assert c["metastore.round_trips"] == warm_trips, c.delta


def test_without_partition_versioning_managed_partitions_are_served_by_age(spark, tables, counted):
    """``hive.partition-versioning-enabled=false``: a managed table's partition list is cached
    without write ids, like an external table's: within the TTL and before a refresh, a
    commit's new partition is not listed (the table itself, still versioned, is read again
    because the snapshot moved)."""
    table = tables.managed("t", [1, 2])
    df = load(spark, "db.t", options(tables.url, **{"hive.partition-versioning-enabled": "false"}))
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    tables.commit(table, add=(3,))
    with counted() as c:
        assert ids(df) == [*rows_of(1), *rows_of(2)]
    assert c["metastore.round_trips"] == 1 + GET_TABLE_TRIPS, c.delta
    assert c["metastore_cache.partition_hits"] == 1 and c["metastore_cache.table_misses"] == 1


# -- no stale read; read your own writes ---------------------------------------------------------
def test_a_commit_is_seen_by_the_very_next_query(spark, tables, counted):
    """No stale read of a managed table: a commit made by another connection (another
    application, or the writing application itself, which is the same from the metastore's
    side) is in the next query's snapshot, so the cached entries read before it are not fresh
    for it and the query reads the database, with the background refresher an hour away."""
    table = tables.managed("t", [1, 2])
    df = load(spark, "db.t", options(tables.url))
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    with counted() as warm:
        assert ids(df) == [*rows_of(1), *rows_of(2)]
    assert warm["metastore.round_trips"] == 1

    _, wid = tables.commit(table, add=(3,))
    with counted() as after:
        assert ids(df) == [*rows_of(1), *rows_of(2), *rows_of(3, wid)]
    assert after["metastore_cache.partition_misses"] == 1, after.delta
    assert after["metastore.round_trips"] == MISS  # snapshot, then the database, once

    _, wid2 = tables.commit(table, append=(1,))  # an append to an existing partition
    assert ids(df.where("k = 1")) == [*rows_of(1), *rows_of(1, wid2)]
    with counted() as warm_again:  # the new state is cached in turn
        assert ids(df.where("k = 1")) == [*rows_of(1), *rows_of(1, wid2)]
    assert warm_again["metastore.round_trips"] == 1, warm_again.delta


def test_an_open_or_aborted_write_is_neither_read_nor_a_reason_to_reload(spark, tables, counted):
    """A write id that is open, then aborted, is not in the committed set: the cached entries
    stay fresh (a warm query stays one round trip while another application writes), and
    its files (a new partition and an append, each in ``delta_<w>_<w>/``) are not read, not
    even by a query that reads the database (cache off), which lists the new partition: the
    planner reads only the directories the snapshot's ValidWriteIdList allows."""
    table = tables.managed("t", [1, 2])
    df = load(spark, "db.t", options(tables.url))
    off = load(spark, "db.t", options(tables.url, **{"hive.metastore-cache-ttl": "0s"}))
    before = [*rows_of(1), *rows_of(2)]
    assert ids(df) == before
    txn, _ = tables.commit(table, add=(3,), append=(1,), commit=False)
    with counted() as c:
        assert ids(df) == before
    assert c["metastore.round_trips"] == 1, c.delta
    with counted() as c_off:
        assert ids(off) == before
    assert c_off["planner.partitions_total"] == 3  # the open write's partition is listed
    tables.writer.abort_transaction(txn)
    with counted() as c:
        assert ids(df) == before
    assert c["metastore.round_trips"] == 1, c.delta
    assert ids(off) == before


# -- monotonic reads -------------------------------------------------------------------------
def test_reads_are_monotonic_across_queries(spark, tables, counted):
    """Commits interleaved with queries (seeded order of appends and new partitions): every
    query sees everything the previous one saw plus exactly what was committed in between,
    and a query repeated without a commit is served from the cache (one round trip)."""
    import random

    rng = random.Random(4)
    table = tables.managed("t", [1, 2])
    df = load(spark, "db.t", options(tables.url))
    seen = set(ids(df))
    expected = set(seen)
    keys = [1, 2]
    for step in range(4):
        if rng.random() < 0.5:
            k = max(keys) + 1
            keys.append(k)
            _, wid = tables.commit(table, add=(k,))
        else:
            k = rng.choice(keys)
            _, wid = tables.commit(table, append=(k,))
        expected |= set(rows_of(k, wid))
        now = set(ids(df))
        assert seen <= now, f"step {step}: rows went missing: {sorted(seen - now)}"
        assert now == expected, step
        seen = now
        with counted() as again:
            assert set(ids(df)) == seen
        assert again["metastore.round_trips"] == 1, (step, again.delta)


# -- a query's snapshot is fixed for its whole run ---------------------------------------------
def test_the_snapshot_is_taken_once_per_scan_and_rides_with_the_reader(tables, env):
    """The reader Spark builds for a scan (here in this process, as the planning worker does:
    reader, pickle for the executors, partitions) takes the snapshot in ``__init__``; a commit
    between that and ``partitions()``, or between planning and ``read()``, changes nothing
    the scan reads, and the pickled reader carries the snapshot."""
    from pyspark import cloudpickle
    from pyspark.sql.types import LongType, StructField, StructType

    from raptorx_py.datasource.reader import TieredHiveReader
    from raptorx_py.metastore.cached_store import close_cached_metastores

    table = tables.managed("t", [1, 2])
    settings = env.settings(**options(tables.url))
    try:
        reader = TieredHiveReader(settings, "db", "t", StructType([StructField("id", LongType())]))
        shipped = cloudpickle.loads(cloudpickle.dumps(reader))  # what the executors get
        assert shipped.snapshot == reader.snapshot
        assert shipped.snapshot["db.t"].write_ids.high_watermark == 1

        tables.commit(table, add=(3,))  # after the snapshot, before partitions()
        planned = reader.partitions()
        tables.commit(table, append=(1,))  # after planning, before reading
        got = sorted(
            v for p in planned for batch in shipped.read(p) for v in batch.column(0).to_pylist()
        )
        assert got == [*rows_of(1), *rows_of(2)]
    finally:
        close_cached_metastores()


def test_a_snapshot_never_reads_a_fragment_computed_from_a_later_commit(
    tables, env, tmp_path, counted
):
    """With the fragment result cache on, a scan planned before a commit, read
    after a newer scan has computed and stored the fragments of that commit, returns its own
    snapshot's rows. The entries it is served are those of the files its snapshot lists (the
    same bytes, so the same results); the later commit's entries are never looked up."""
    from pyspark.sql.types import LongType, StructField, StructType

    from raptorx_py.datasource.reader import TieredHiveReader
    from raptorx_py.metastore.cached_store import close_cached_metastores

    table = tables.managed("t", [1, 2])
    settings = env.settings(
        **options(
            tables.url,
            **{
                "fragment-result-cache.enabled": "true",
                "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
            },
        )
    )
    schema = StructType([StructField("id", LongType())])

    def read_all(reader, planned):
        return sorted(v for p in planned for b in reader.read(p) for v in b.column(0).to_pylist())

    try:
        old = TieredHiveReader(settings, "db", "t", schema)
        old_planned = old.partitions()
        _, wid = tables.commit(table, append=(1,), add=(3,))  # write 2: two more files
        new = TieredHiveReader(settings, "db", "t", schema)
        with counted() as later:
            newer = read_all(new, new.partitions())
        assert later["fragment_cache.stores"] == 4  # the two files of write 1, two of write 2
        assert newer == sorted([*rows_of(1), *rows_of(2), *rows_of(1, wid), *rows_of(3, wid)])
        with counted() as c:
            got = read_all(old, old_planned)
        assert got == sorted([*rows_of(1), *rows_of(2)])
        assert (c["fragment_cache.hits"], c["fragment_cache.misses"]) == (2, 0)
        assert c["reader.fragments_computed"] == 0
    finally:
        close_cached_metastores()


# -- external tables: TTL and the notification log ---------------------------------------------
def external(tables: Tables, name: str, keys) -> Table:
    root = str(tables.tmp / name)
    table = tables.writer.create_table(
        Table("db", name, EXTERNAL_TABLE, f"file://{root}", COLUMNS, KEYS)
    )
    add_external(tables, table, keys)
    return table


def add_external(tables: Tables, table: Table, keys) -> None:
    root = table.location[len("file://") :]
    for k in keys:
        write_files(root, k, None, rows_of(k))
    tables.writer.add_partitions(
        table, [Partition((str(k),), f"{table.location}/k={k}") for k in keys]
    )


def test_an_external_table_is_served_within_its_ttl(spark, tables, counted):
    """External tables have no write ids: within ``hive.metastore-cache-ttl`` and before the
    next refresh the cached partition list is served (eventual consistency, as documented):
    a partition added meanwhile is not listed yet, and the query is one round trip."""
    table = external(tables, "ext", [1, 2])
    df = load(spark, "db.ext", options(tables.url))
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    add_external(tables, table, [3])
    with counted() as c:
        assert ids(df) == [*rows_of(1), *rows_of(2)]  # k=3 is not served yet
    assert c["metastore.round_trips"] == 1, c.delta
    assert c["metastore_cache.partition_hits"] == 1


def test_an_external_table_change_is_seen_after_a_refresh(spark, tables, counted):
    """The same change with the background refresher every 200ms: once the planning process's
    cache has applied the ADD_PARTITION event, the entry is invalidated and the next query
    lists k=3. The refresher runs in the planning process, where no clock can be injected, so
    the test runs the query until it sees the partition (at most 60 s of queries)."""
    table = external(tables, "ext", [1, 2])
    df = load(spark, "db.ext", options(tables.url, **{"hive.metastore-refresh-interval": "200ms"}))
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    deadline = time.monotonic() + 60
    with counted() as c:
        # In the block: the refresher (in the driver's planner, this process) may apply the
        # event before the first query of the loop, and its counts would be outside it.
        add_external(tables, table, [3])
        while ids(df) != [*rows_of(1), *rows_of(2), *rows_of(3)]:
            assert time.monotonic() < deadline, "the refresher never applied the event"
    assert c["metastore_cache.invalidations"] >= 1, c.delta
    # The refresher's statements are counted apart, flushed with the planning process's next query.
    assert c["metastore.refresh_round_trips"] >= 1
    assert c["metastore_cache.partition_misses"] >= 1
    with counted() as warm:
        assert ids(df) == [*rows_of(1), *rows_of(2), *rows_of(3)]
    assert warm["metastore_cache.partition_hits"] == 1, warm.delta


# -- dropped and recreated ---------------------------------------------------------------------
def test_a_recreated_table_is_never_served_from_the_old_entry(spark, tables):
    """A table dropped and recreated under the same name (``replace``) has a new id: the next
    query's snapshot carries it, and the old table's cached entries are not served."""
    table = tables.managed("t", [1, 2])
    df = load(spark, "db.t", options(tables.url))
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    root = str(tables.tmp / "t2")
    new = tables.writer.create_table(
        Table("db", "t", EXTERNAL_TABLE, f"file://{root}", COLUMNS, KEYS), replace=True
    )
    assert new.id != table.id
    add_external(tables, new, [7])
    assert ids(df) == list(rows_of(7))


# -- read your own writes, through the Spark writer ----------------------------------------------
def test_the_writing_application_reads_its_own_write(spark, tables, counted):
    """Writes through ``df.write.format("tiered_hive")`` (datasource/writer.py) commit a write
    id; this application's next query has it in its snapshot, so the warm cache entries,
    read before the write, are not fresh for it: the query reads the database and sees the
    write, with the background refresher an hour away."""
    opts = options(tables.url)

    def append(lo, hi):
        (
            spark.range(lo, hi)
            .selectExpr("id", "cast(id % 2 as int) as k")
            .write.format("tiered_hive")
            .options(**opts)
            .option("partition_by", "k")
            .mode("append")
            .save("db.w")
        )

    append(0, 10)
    df = load(spark, "db.w", opts)
    assert ids(df) == list(range(10))
    with counted() as warm:
        assert ids(df) == list(range(10))
    assert warm["metastore.round_trips"] == 1, warm.delta
    append(10, 15)
    with counted() as after:
        assert ids(df) == list(range(15))
    assert after["metastore_cache.partition_misses"] == 1, after.delta
    assert after["metastore.round_trips"] == MISS


# -- the cache outlives queries; its connection may not -------------------------------------
def test_a_lost_metastore_connection_is_reopened_by_the_next_query(
    spark, postgres_database_url, tmp_path, counted
):
    """The planning process's cache keeps one connection for many queries. When the server
    drops it (here: every other backend of the database terminated, as a restart would),
    the next query reconnects once, through a new cache, instead of failing, and so does
    every query after it."""
    tables = Tables(postgres_database_url, tmp_path)
    try:
        tables.managed("t", [1, 2])
        df = load(spark, "db.t", options(tables.url))
        assert ids(df) == [*rows_of(1), *rows_of(2)]
        with counted() as warm:
            assert ids(df) == [*rows_of(1), *rows_of(2)]
        assert warm["metastore.round_trips"] == 1
        killed = tables.writer.sql.execute(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()[0]
        assert killed >= 1  # at least the planning process's connection
        with counted() as c:
            assert ids(df) == [*rows_of(1), *rows_of(2)]
        assert c["metastore_cache.reconnects"] == 1, c.delta
        assert c["metastore_cache.table_misses"] == 1  # a new cache: read again
        with counted() as again:
            assert ids(df) == [*rows_of(1), *rows_of(2)]
        assert again["metastore.round_trips"] == 1 and again["metastore_cache.reconnects"] == 0
    finally:
        tables.close()
