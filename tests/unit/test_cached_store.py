"""The versioned metastore cache on every metastore backend: fresh-or-newer reads, commit-gated
publication from the notification log, table-id checks, prewarm, TTL for external tables,
scope/versioning/size settings, and the document's guarantees. Counted, never timed.

"Two applications" are two Metastore connections on one database: ``writer`` changes the
metastore, ``reader`` is the connection behind the cache under test."""

from __future__ import annotations

import os
import random

import pytest

from raptorx_py.config import build_settings
from raptorx_py.errors import MetastoreError
from raptorx_py.hive.model import EXTERNAL_TABLE, Column, ColumnStats, Partition, Table
from raptorx_py.metastore.cache_events import mark_committed
from raptorx_py.metastore.cached_store import (
    CachedMetastore,
    cached_metastore_for,
    close_cached_metastores,
)
from raptorx_py.metastore.catalog import NotificationEvent, QuerySnapshot, TableSnapshot
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.metastore.notifications import get_notifications
from raptorx_py.metastore.store import Metastore, SqliteBackend
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock
from tests.unit.txn_helpers import managed_table, open_ms, partition

#: Round trips of a database read: get_table (database, table, columns, keys, parameters,
#: statistics) and list_partitions (partitions, key values, parameters, statistics).
GET_TABLE_TRIPS = 6
LIST_PARTITIONS_TRIPS = 4
COLD = 1 + GET_TABLE_TRIPS + LIST_PARTITIONS_TRIPS


def settings_for(url: str, **props):
    raw = {"hive.metastore.url": url, "hive.metastore-cache-ttl": "1h", **props}
    return build_settings({k: (v, "test", None) for k, v in raw.items()})


class Trips:
    """``with Trips() as t: ...; t.n``: metastore round trips and cache counters in between."""

    def __enter__(self):
        self.deltas = CounterDeltas().__enter__()
        return self

    def __exit__(self, *exc):
        self.deltas.__exit__(*exc)

    @property
    def n(self) -> int:
        return self.deltas["metastore.round_trips"]

    def __getitem__(self, name: str) -> int:
        return self.deltas[f"metastore_cache.{name}"]


@pytest.fixture
def clock():
    return FakeClock(0.0)


@pytest.fixture
def writer(metastore_url):
    with open_ms(metastore_url) as ms:
        ms.create_database("db")
        yield ms


@pytest.fixture
def reader(metastore_url, writer):
    with open_ms(metastore_url) as ms:
        yield ms


@pytest.fixture
def make_cache(metastore_url, reader, clock):
    made = []

    def make(**props):
        cache = CachedMetastore(
            reader, settings_for(metastore_url, **props).metastore_cache, clock=clock
        )
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.close()


def commit_partitions(ms, table: Table, values, *, commit: bool = True):
    """Add partitions under a new transaction's write id; returns ``(txn, write_id)``."""
    txn = ms.open_transaction(user="test")
    wid = ms.allocate_write_id(txn, table.database, table.name)
    ms.add_partitions(table, [partition(v, table) for v in values], write_id=wid)
    if commit:
        ms.commit_transaction(txn)
    return txn, wid


def new_table(ms, name="t", values=("a", "b")) -> Table:
    table = ms.create_table(managed_table("db", name))
    if values:
        commit_partitions(ms, table, values)
    return table


def new_external_table(ms, *values: str) -> Table:
    """``db.ext``, partitioned by ``p``, with the partitions ``values``."""
    table = Table(
        "db", "ext", EXTERNAL_TABLE, "file:///e", (Column("id", "int"),), (Column("p", "string"),)
    )
    return ms.create_table(table, [partition(v) for v in values])


def query(cache, name="db.t"):
    """What the data source does: snapshot, get_table, list_partitions."""
    snap = cache.snapshot([name])
    table = cache.get_table(*name.split("."), snapshot=snap)
    return table, cache.list_partitions(table, snapshot=snap)


def queried(cache, name="db.t") -> tuple[int, list[str]]:
    """The round trips of one query (``query``) and the partition values it returned."""
    with Trips() as t:
        _, parts = query(cache, name)
    return t.n, values_of(parts)


def values_of(partitions) -> list[str]:
    return [p.values[0] for p in partitions]


# -- the key acceptance test: counted round trips on a large table ------------------------------
def test_warm_query_on_10000_partitions_is_exactly_one_round_trip(writer, make_cache):
    table = writer.create_table(
        Table(
            "db",
            "big",
            "MANAGED_TABLE",
            "file:///w/db.db/big",
            (Column("id", "bigint"),),
            (Column("p", "int"),),
        )
    )
    txn = writer.open_transaction(user="test")
    wid = writer.allocate_write_id(txn, "db", "big")
    with Trips() as build:
        writer.add_partitions(
            table,
            [
                Partition(
                    (str(i),),
                    f"{table.location}/p={i}",
                    {"numRows": "10"},
                    {"id": ColumnStats(0, i, i + 9)},
                )
                for i in range(10_000)
            ],
            write_id=wid,
        )
    writer.commit_transaction(txn)
    assert build.n < 20  # batched: a handful of statements, not four per partition
    cache = make_cache()

    with Trips() as cold:
        _, parts = query(cache, "db.big")
    assert len(parts) == 10_000
    assert cold.n == COLD  # the partitions are fetched once
    assert cold["partition_misses"] == 1 and cold["table_misses"] == 1
    assert parts[0].stats["id"] == ColumnStats(0, 0, 9) and parts[0].row_count == 10
    assert parts[0].parameters["writeId"] == str(wid)

    with Trips() as warm:
        _, again = query(cache, "db.big")
    assert warm.n == 1  # the snapshot, nothing else
    assert warm["partition_hits"] == 1 and warm["table_hits"] == 1
    assert again == parts


def test_add_partitions_records_the_write_id_and_one_event_per_call(writer):
    table = writer.create_table(managed_table("db", "t"))
    txn = writer.open_transaction(user="test")
    wid = writer.allocate_write_id(txn, "db", "t")
    writer.add_partitions(table, [partition("a", table), partition("b", table)], write_id=wid)
    writer.add_partitions(table, [partition("c", table)], write_id=wid)
    parts = writer.list_partitions(table)
    assert [p.parameters for p in parts] == [{"numRows": "1", "writeId": str(wid)}] * 3
    event = get_notifications(writer)[-2]
    assert event.event_type == "ADD_PARTITION" and event.txn_id == txn
    assert [p["values"] for p in event.message["partitions"]] == [["a"], ["b"]]
    with pytest.raises(MetastoreError, match="already exist"):
        writer.add_partitions(table, [partition("a", table)])


# -- fresh-or-newer ---------------------------------------------------------------------------
def test_an_open_or_aborted_write_id_leaves_the_entry_fresh(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    query(cache)
    txn, _ = commit_partitions(writer, table, ["c"], commit=False)
    assert queried(cache) == (1, ["a", "b"])  # same committed write ids
    writer.abort_transaction(txn)
    assert queried(cache) == (1, ["a", "b"])


def test_a_commit_makes_the_entry_stale_and_the_newer_read_replaces_it(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    query(cache)
    commit_partitions(writer, table, ["c"])
    # no refresh: the snapshot alone tells the entry is stale
    assert queried(cache) == (COLD, ["a", "b", "c"])
    assert queried(cache) == (1, ["a", "b", "c"])


# -- the notification log ---------------------------------------------------------------------
def test_refresh_stages_a_write_and_publishes_it_on_commit(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    query(cache)
    txn, wid = commit_partitions(writer, table, ["c"], commit=False)
    with Trips() as t:
        assert cache.refresh() == 3  # OPEN_TXN, ALLOC_WRITE_ID, ADD_PARTITION
    assert t.n == 1 and cache.stats()["staged_transactions"] == 1
    _, parts = query(cache)
    assert values_of(parts) == ["a", "b"]  # staged, not readable
    writer.commit_transaction(txn)
    with Trips() as t:
        assert cache.refresh() == 1
    assert t.n == 1 and t["published"] == 2  # the table's tag and its partitions
    with Trips() as t:
        _, parts = query(cache)
    assert t.n == 1 and t["partition_hits"] == 1 and t["table_hits"] == 1
    assert values_of(parts) == ["a", "b", "c"]
    assert parts[2].parameters == {"writeId": str(wid)}  # the event carries no statistics
    with Trips() as t:
        assert cache.refresh() == 0
    assert t.n == 1


def test_abort_discards_the_stage(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    query(cache)
    txn, _ = commit_partitions(writer, table, ["c"], commit=False)
    writer.abort_transaction(txn)
    cache.refresh()
    assert cache.stats()["staged_transactions"] == 0
    assert queried(cache) == (1, ["a", "b"])


def test_fed_events_publish_only_on_commit(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    _, parts = query(cache)
    before = cache.snapshot(["db.t"])
    base = before["db.t"]
    wid = base.write_ids.high_watermark + 1
    # The snapshot of a reader after that commit (built here: the commit is only fed).
    after = QuerySnapshot(
        {
            "db.t": TableSnapshot(
                "db.t", table.id, table.table_type, mark_committed(base.write_ids, wid)
            )
        }
    )
    n = cache.last_event_id

    def event(i, kind, **kw):
        return NotificationEvent(
            n + i,
            0,
            kind,
            kw.pop("db", "db"),
            kw.pop("tbl", "t"),
            kw.pop("txn", 99),
            kw.pop("wid", None),
            kw,
        )

    cache.apply_events(
        [
            event(1, "OPEN_TXN", db=None, tbl=None),
            event(
                2,
                "ADD_PARTITION",
                wid=wid,
                tableId=table.id,
                partitions=[
                    {
                        "partId": 999,
                        "values": ["c"],
                        "location": "file:///c",
                        "writeId": wid,
                        "format": "ORC",  # a partition in another format than its table's
                    }
                ],
            ),
        ]
    )
    with Trips() as t:
        parts = cache.list_partitions(table, snapshot=before)
    assert t.n == 0 and values_of(parts) == ["a", "b"]  # staged: not readable yet
    assert cache.stats()["staged_transactions"] == 1
    cache.apply_events(
        [
            event(
                3,
                "COMMIT_TXN",
                db=None,
                tbl=None,
                txnId=99,
                writeIds=[{"db": "db", "table": "t", "writeId": wid}],
            )
        ]
    )
    with Trips() as t:
        parts = cache.list_partitions(table, snapshot=after)
    assert t.n == 0 and values_of(parts) == ["a", "b", "c"]  # published, never read from the db
    assert parts[2].location == "file:///c" and parts[2].id == 999
    assert parts[2].storage_format == "ORC" and parts[0].storage_format is None


def test_a_duplicate_event_is_ignored(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    query(cache)
    first = cache.last_event_id
    commit_partitions(writer, table, ["c"])
    cache.refresh()
    events = get_notifications(writer, first)
    with Trips() as t:
        assert cache.apply_events(events) == 0
    assert t["duplicate_events"] == len(events) and t["published"] == 0
    assert queried(cache) == (1, ["a", "b", "c"])


def test_a_gap_in_event_ids_reloads_everything(writer, make_cache):
    new_table(writer)
    new_table(writer, "u")
    cache = make_cache()
    query(cache)
    query(cache, "db.u")
    skipped = cache.last_event_id + 2
    with Trips() as t:
        cache.apply_events(
            [
                NotificationEvent(
                    skipped,
                    0,
                    "ALTER_DATABASE",
                    "db",
                    None,
                    None,
                    None,
                    {"dbId": 1, "location": None},
                )
            ]
        )
    assert t["log_gaps"] == 1 and cache.last_event_id == skipped
    assert cache.stats()["tables"] == cache.stats()["partition_lists"] == 0
    with Trips() as t:
        query(cache)
        query(cache, "db.u")
    assert t.n == 2 * COLD


def test_a_transaction_begun_before_the_cache_invalidates_instead_of_publishing(writer, make_cache):
    table = new_table(writer)
    txn, _ = commit_partitions(writer, table, ["c"], commit=False)
    cache = make_cache()  # never sees this transaction's OPEN_TXN nor its write
    query(cache)
    writer.commit_transaction(txn)
    with Trips() as t:
        cache.refresh()
    assert t["published"] == 0 and t["invalidations"] == 2
    _, parts = query(cache)
    assert values_of(parts) == ["a", "b", "c"]


def test_a_change_without_a_write_id_is_seen_after_refresh(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    query(cache)
    writer.set_partition_parameters(table, ["a"], {"sealed": "true"})
    _, parts = query(cache)
    assert "sealed" not in parts[0].parameters  # no write id: eventual, like external tables
    cache.refresh()
    with Trips() as t:
        _, parts = query(cache)
    assert t.n == COLD and parts[0].parameters["sealed"] == "true"


# -- table ids ----------------------------------------------------------------------------------
def test_a_dropped_and_recreated_table_is_never_served_from_the_old_entry(writer, make_cache):
    old = new_table(writer)
    cache = make_cache()
    query(cache)
    # Same name, same write ids (they are kept across drop-and-recreate), other partitions.
    new = writer.create_table(managed_table("db", "t"), [partition("z")], replace=True)
    assert writer.get_valid_write_ids(["db.t"])["db.t"].high_watermark == 1
    with Trips() as t:
        table, parts = query(cache)
    assert t["table_misses"] == 1 and t["partition_misses"] == 1
    assert table.id == new.id != old.id and values_of(parts) == ["z"]
    with pytest.raises(MetastoreError, match="dropped and recreated"):
        cache.list_partitions(old, snapshot=cache.snapshot(["db.t"]))


def test_a_snapshot_must_cover_the_table(writer, make_cache):
    new_table(writer)
    new_table(writer, "u")
    cache = make_cache()
    with pytest.raises(MetastoreError, match="does not cover db.u"):
        cache.get_table("db", "u", snapshot=cache.snapshot(["db.t"]))


# -- prewarm ------------------------------------------------------------------------------------
def test_prewarm_loads_everything_then_queries_are_warm(writer, make_cache):
    new_table(writer)
    new_table(writer, "u", ("x",))
    new_external_table(writer, "e")
    cache = make_cache()
    assert cache.prewarm() == 6
    for name in ("db.t", "db.u", "db.ext"):
        with Trips() as t:
            query(cache, name)
        assert t.n == 1, name


def test_prewarm_stays_within_the_maximum_size(writer, make_cache):
    new_table(writer, "a", ("1", "2", "3"))
    new_table(writer, "b", ("1", "2", "3"))
    cache = make_cache(**{"hive.metastore-cache-maximum-size": "5"})
    cache.prewarm()
    assert cache.stats()["tables"] == 2
    assert cache.stats()["partitions"] == 3  # b's three do not fit beside a's
    with Trips() as t:
        query(cache, "db.b")
    assert t["partition_misses"] == 1 and t["table_hits"] == 1


# -- external tables, TTL, scope, versioning, size --------------------------------------------
def test_an_external_table_is_served_for_the_ttl_and_refreshed_by_events(writer, make_cache, clock):
    ext = new_external_table(writer, "a")
    cache = make_cache(**{"hive.metastore-cache-ttl": "10s"})
    query(cache, "db.ext")
    clock.advance(9)
    with Trips() as t:
        _, parts = query(cache, "db.ext")
        cache.list_partitions(cache.get_table("db", "ext"))  # no snapshot: by age alone
    assert t.n == 1 and values_of(parts) == ["a"]
    writer.add_partitions(ext, [partition("b")])
    _, parts = query(cache, "db.ext")
    assert values_of(parts) == ["a"]  # eventual: until the event is applied...
    cache.refresh()
    _, parts = query(cache, "db.ext")
    assert values_of(parts) == ["a", "b"]  # ...or the TTL passes
    clock.advance(10)
    with Trips() as t:
        query(cache, "db.ext")
    assert t.n == COLD


def test_ttl_zero_turns_the_cache_off(writer, make_cache):
    new_table(writer)
    cache = make_cache(**{"hive.metastore-cache-ttl": "0s"})
    for _ in range(2):
        with Trips() as t:
            query(cache)
        assert t.n == COLD
    with Trips() as t:
        assert cache.refresh() == 0 and cache.prewarm() == 0
    assert t.n == 0 and cache.stats()["tables"] == 0


def test_scope_partition_caches_partitions_only(writer, make_cache):
    new_table(writer)
    cache = make_cache(**{"hive.metastore-cache-scope": "PARTITION"})
    query(cache)
    with Trips() as t:
        query(cache)
    assert t.n == 1 + GET_TABLE_TRIPS and t["partition_hits"] == 1


def test_without_partition_versioning_managed_partitions_live_by_ttl(writer, make_cache, clock):
    table = new_table(writer)
    cache = make_cache(
        **{"hive.partition-versioning-enabled": "false", "hive.metastore-cache-ttl": "10s"}
    )
    query(cache)
    commit_partitions(writer, table, ["c"])
    with Trips() as t:
        _, parts = query(cache)
    assert t["partition_hits"] == 1 and values_of(parts) == ["a", "b"]  # TTL only: stale
    clock.advance(10)
    _, parts = query(cache)
    assert values_of(parts) == ["a", "b", "c"]
    commit_partitions(writer, table, ["d"])
    cache.refresh()  # the commit invalidates the unversioned entry
    _, parts = query(cache)
    assert values_of(parts) == ["a", "b", "c", "d"]


def test_the_maximum_size_is_an_lru_bound(writer, make_cache):
    for name in ("a", "b", "c"):
        new_table(writer, name, ("1",))
    cache = make_cache(**{"hive.metastore-cache-maximum-size": "2"})
    query(cache, "db.a")
    query(cache, "db.b")
    query(cache, "db.a")  # b is now the least recently used
    query(cache, "db.c")
    assert cache.stats()["tables"] == 2 and cache.stats()["evictions"] == 2
    with Trips() as t:
        query(cache, "db.a")
    assert t.n == 1
    with Trips() as t:
        query(cache, "db.b")
    assert t.n == COLD


# -- guarantees ---------------------------------------------------------------------------------
def test_monotonic_reads_and_no_stale_read(writer, make_cache):
    table = new_table(writer, values=())
    cache = make_cache()
    committed: list[str] = []
    seen: list[str] = []
    for i in range(6):
        value = f"v{i}"
        commit_partitions(writer, table, [value])
        committed.append(value)
        if i % 2:
            cache.refresh()  # sometimes published from the log, sometimes read again
        _, parts = query(cache)
        now = values_of(parts)
        assert now == committed  # never misses a commit visible to the snapshot
        assert set(seen) <= set(now)  # never goes back
        seen = now


def test_the_writer_reads_its_own_writes_before_any_refresh(reader, make_cache):
    table = new_table(reader)  # the cache's own application writes
    cache = make_cache()
    query(cache)
    commit_partitions(reader, table, ["c"])
    _, parts = query(cache)
    assert values_of(parts) == ["a", "b", "c"]


def test_reads_inside_the_writers_transaction_are_not_cached(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    query(cache)
    txn, _ = commit_partitions(writer, table, ["c"], commit=False)
    own = cache.snapshot(["db.t"], txn_id=txn)
    assert values_of(cache.list_partitions(table, snapshot=own)) == ["a", "b", "c"]
    assert queried(cache) == (1, ["a", "b"])


def test_a_query_snapshot_holds_while_the_cache_keeps_a_version_for_it(writer, make_cache):
    table = new_table(writer)
    cache = make_cache()
    old = cache.snapshot(["db.t"])
    t_old = cache.get_table("db", "t", snapshot=old)
    assert values_of(cache.list_partitions(t_old, snapshot=old)) == ["a", "b"]
    commit_partitions(writer, table, ["c"])
    cache.refresh()  # publishes the newer version; the previous one is kept
    with Trips() as t:
        parts = cache.list_partitions(t_old, snapshot=old)
    assert t.n == 0 and values_of(parts) == ["a", "b"]  # the old query still sees its state
    _, parts = query(cache)
    assert values_of(parts) == ["a", "b", "c"]  # a new one sees the commit
    commit_partitions(writer, table, ["d"])
    cache.refresh()  # two versions newer: the old snapshot's version is gone
    with Trips() as t:
        parts = cache.list_partitions(t_old, snapshot=old)
    assert t["partition_misses"] == 1  # the database has no history: its current state
    assert values_of(parts) == ["a", "b", "c", "d"]
    # that older read did not displace the newest version
    assert queried(cache) == (1, ["a", "b", "c", "d"])


# -- process-wide cache, background refresher ---------------------------------------------------
def test_one_cache_per_process_per_metastore(metastore_url, tmp_path, writer):
    try:
        a = cached_metastore_for(settings_for(metastore_url).metastore_cache, start=False)
        assert cached_metastore_for(settings_for(metastore_url).metastore_cache, start=False) is a
        Metastore(SqliteBackend(f"{tmp_path}/other.db")).close()  # a read creates none
        other = cached_metastore_for(
            settings_for(f"sqlite:///{tmp_path}/other.db").metastore_cache, start=False
        )
        assert other is not a
    finally:
        close_cached_metastores()


def test_prewarm_at_start_up_makes_the_first_query_warm(metastore_url, writer):
    """``hive.metastore-cache-prewarm``: the process's cache is loaded when it is created, so
    the first query makes only its snapshot round trip; without it the first query loads."""
    new_table(writer)
    try:
        for prewarm, first_query in (("false", 11), ("true", 1)):
            close_cached_metastores()
            settings = settings_for(metastore_url, **{"hive.metastore-cache-prewarm": prewarm})
            cache = cached_metastore_for(settings.metastore_cache, start=False)
            with Trips() as t:
                _, parts = query(cache)
            assert values_of(parts) == ["a", "b"]
            assert t.n == first_query, prewarm
    finally:
        close_cached_metastores()


def test_a_failed_connection_is_replaced_once_and_other_errors_are_not(metastore_url, writer):
    """``with_cached_metastore``: a read that fails on the cache's connection (the driver's
    OperationalError) runs once more through a new cache; any other metastore error (here
    the dropped-and-recreated check) is raised as is, never retried."""
    import sqlite3

    from raptorx_py.metastore.cached_store import with_cached_metastore

    new_table(writer)
    settings = settings_for(metastore_url)
    caches = []

    def flaky(cache):
        caches.append(cache)
        if len(caches) == 1:
            raise MetastoreError("metastore query failed: gone") from sqlite3.OperationalError(
                "disk I/O error"
            )
        return query(cache)

    try:
        cached_metastore_for(settings.metastore_cache, start=False)
        reconnects = CounterDeltas()
        _, parts = with_cached_metastore(settings.metastore_cache, flaky)
        assert values_of(parts) == ["a", "b"]
        assert len(caches) == 2 and caches[0] is not caches[1]
        assert cached_metastore_for(settings.metastore_cache) is caches[1]  # the new one is kept
        assert reconnects["metastore_cache.reconnects"] == 1

        def recreated(cache):
            caches.append(cache)
            raise MetastoreError("table db.t was dropped and recreated")

        with pytest.raises(MetastoreError, match="dropped and recreated"):
            with_cached_metastore(settings.metastore_cache, recreated)
        assert len(caches) == 3 and caches[2] is caches[1]  # not retried, not discarded
    finally:
        close_cached_metastores()


def test_the_background_thread_refreshes(writer, make_cache):
    table = new_table(writer)
    cache = make_cache(**{"hive.metastore-refresh-interval": "10ms"})
    query(cache)
    commit_partitions(writer, table, ["c"])
    target = cache.last_event_id + 4  # OPEN_TXN, ALLOC_WRITE_ID, ADD_PARTITION, COMMIT_TXN
    cache.start()
    with cache.refreshed:
        assert cache.refreshed.wait_for(lambda: cache.last_event_id >= target, timeout=30)
    cache.stop()
    assert queried(cache) == (1, ["a", "b", "c"])


def test_the_background_refresher_counts_its_round_trips_apart(writer, make_cache):
    """A timer's statements are no query's: the refresher thread counts
    ``metastore.refresh_round_trips`` (one per refresh), never ``metastore.round_trips``, so
    a query's count stays exact while the cache refreshes in the background."""
    new_table(writer)
    cache = make_cache(**{"hive.metastore-refresh-interval": "10ms"})
    deltas = CounterDeltas()
    cache.start()
    with cache.refreshed:
        assert cache.refreshed.wait_for(lambda: cache.refreshes >= 3, timeout=30)
    cache.stop()
    trips = {k: deltas[k] for k in ("metastore.round_trips", "metastore.refresh_round_trips")}
    assert trips == {"metastore.round_trips": 0, "metastore.refresh_round_trips": cache.refreshes}
    with Trips() as t:
        cache.refresh()  # called directly, it is counted like any statement
    assert t.n == 1


def test_random_commits_refreshes_and_queries_never_read_stale(writer, make_cache):
    """Seeded model check: after any mix of committed adds, alters and drops (under write
    ids), aborted transactions, changes without a write id and refreshes, a query with a new
    snapshot sees exactly what the database holds."""
    rng = random.Random(int(os.environ.get("CACHE_MODEL_SEED", "4")))
    table = new_table(writer, values=("p0",))
    cache = make_cache()
    names = ["p0"]
    with Trips() as t:
        run(rng, writer, cache, table, names)
    assert t["published"] > 0 and t["partition_hits"] > 0  # the cache did take part


def run(rng, writer, cache, table, names):
    for step in range(40):
        op = rng.choice(["add", "alter", "drop", "abort", "params", "refresh", "refresh"])
        txn = (
            writer.open_transaction(user="test")
            if op in ("add", "alter", "drop", "abort")
            else None
        )
        wid = writer.allocate_write_id(txn, "db", "t") if txn is not None else None
        if op == "add":
            names.append(f"p{step + 1}")
            writer.add_partitions(table, [partition(names[-1], table)], write_id=wid)
        elif op == "alter" and names:
            victim = rng.choice(names)
            writer.alter_partition(
                table, Partition((victim,), f"file:///moved/{step}"), write_id=wid
            )
        elif op == "drop" and len(names) > 1:
            victim = names.pop(rng.randrange(len(names)))
            writer.drop_partitions(table, [[victim]], write_id=wid)
        elif op == "params":
            writer.set_partition_parameters(table, [rng.choice(names)], {"k": str(step)})
            cache.refresh()  # without a write id: visible to others after their refresh
        elif op == "refresh":
            cache.refresh()
        if op == "abort":
            writer.abort_transaction(txn)
        elif txn is not None:
            writer.commit_transaction(txn)
        if rng.random() < 0.5:
            cache.refresh()  # published from the log before the next query, or not
        _, parts = query(cache)
        truth = writer.list_partitions(table)
        assert [(p.values, p.location) for p in parts] == [(p.values, p.location) for p in truth], (
            step,
            op,
        )
        assert [p.parameters.get("k") for p in parts] == [p.parameters.get("k") for p in truth], (
            step,
            op,
        )


# -- every catalogue backend, the Hive Metastore over Thrift included ----------------------------
@pytest.fixture
def catalog_writer(catalog_settings):
    """The other application, on ``catalog_settings``' backend, with an empty ``db``."""
    with open_catalog(catalog_settings.metastore_connection, create=True) as ms:
        ms.create_database("db")
        yield ms


@pytest.fixture
def catalog_cache(catalog_settings, catalog_writer, clock):
    with CachedMetastore(
        open_catalog(catalog_settings.metastore_connection),
        catalog_settings.metastore_cache,
        clock=clock,
        owns_metastore=True,
    ) as cache:
        yield cache


def test_on_every_backend_an_external_change_arrives_by_its_event_once(
    catalog_writer, catalog_cache
):
    """Warm: one round trip (the snapshot; over Thrift, the notification poll that is the
    snapshot). A new partition is seen after its event is applied; the same event again is
    a duplicate and changes nothing."""
    ext = new_external_table(catalog_writer, "a")
    query(catalog_cache, "db.ext")
    with Trips() as t:
        _, parts = query(catalog_cache, "db.ext")
    assert values_of(parts) == ["a"] and t.n == 1 and t["partition_hits"] == 1
    catalog_cache.refresh()  # the table's creation, applied (a no-op over Thrift: done)
    before = catalog_cache.last_event_id
    catalog_writer.add_partitions(ext, [partition("b")])
    catalog_cache.refresh()
    _, parts = query(catalog_cache, "db.ext")
    assert values_of(parts) == ["a", "b"]
    events = catalog_writer.notifications_after(before)
    assert [e.event_type for e in events] == ["ADD_PARTITION"]
    with Trips() as t:
        assert catalog_cache.apply_events(events) == 0
    assert t["duplicate_events"] == 1 and t["invalidations"] == 0


def test_on_every_backend_a_gap_reloads_everything_and_the_ttl_bounds_an_entry(
    catalog_writer, catalog_cache, clock
):
    new_external_table(catalog_writer, "a")
    query(catalog_cache, "db.ext")
    assert catalog_cache.stats()["partition_lists"] == 1
    gap = catalog_cache.last_event_id + 2
    catalog_cache.apply_events(
        [NotificationEvent(gap, 0, "ALTER_DATABASE", "db", None, None, None, {})]
    )
    assert catalog_cache.stats()["partition_lists"] == catalog_cache.stats()["tables"] == 0
    assert catalog_cache.last_event_id == gap
    query(catalog_cache, "db.ext")  # reloaded
    clock.advance(3600)  # hive.metastore-cache-ttl=1h: every entry is now too old
    with Trips() as t:
        query(catalog_cache, "db.ext")
    assert t["partition_misses"] == 1 and t["partition_hits"] == 0


def test_on_every_backend_prewarm_makes_the_first_query_warm(catalog_writer, catalog_cache):
    """Prewarm loads the table and its partitions; the next query is the one round trip of
    a warm query (the snapshot; over Thrift, the notification poll that is the snapshot)."""
    new_external_table(catalog_writer, "a", "b")
    catalog_cache.refresh()  # the table's creation: nothing cached yet to invalidate
    assert catalog_cache.prewarm() == 2
    with Trips() as t:
        _, parts = query(catalog_cache, "db.ext")
    assert values_of(parts) == ["a", "b"] and t.n == 1
    assert (t["table_hits"], t["partition_hits"]) == (1, 1)


def test_on_every_backend_a_recreated_table_is_never_served_from_the_old_entry(
    catalog_writer, catalog_cache
):
    """The databases tell the new table by its id in the query's snapshot; a Hive
    Metastore's by the DROP_TABLE and CREATE_TABLE events the snapshot's poll applies."""
    new_external_table(catalog_writer, "a")
    assert values_of(query(catalog_cache, "db.ext")[1]) == ["a"]
    catalog_writer.drop_table("db", "ext")
    new_external_table(catalog_writer, "z")
    with Trips() as t:
        _, parts = query(catalog_cache, "db.ext")
    assert values_of(parts) == ["z"] and t["partition_hits"] == 0


def test_table_and_partitions_share_one_snapshot(writer, make_cache):
    # What a source's schema() reads (the table and, for its size, its partitions): the round
    # trips of get_table alone, never a second snapshot for the partitions.
    managed = writer.create_table(managed_table(name="m"))
    new_external_table(writer, "a")
    cache = make_cache()
    with Trips() as cold:
        table, parts = cache.get_table_and_partitions("db", "m")
    assert table.id == managed.id and cold.n == COLD
    with Trips() as warm:  # a managed table: the version check alone
        assert cache.get_table_and_partitions("db", "m")[1] == parts
    assert warm.n == 1
    cache.get_table_and_partitions("db", "ext")
    with Trips() as ext:  # an external table within its TTL: nothing
        _, ext_parts = cache.get_table_and_partitions("db", "ext")
    assert ext.n == 0 and values_of(ext_parts) == ["a"]
