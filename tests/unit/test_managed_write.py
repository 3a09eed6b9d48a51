"""The managed-table write path without Spark: begin -> tasks -> commit/abort, the locks it
takes, what snapshots see, and the cleaner. Clocks and sleeps are injected."""

from __future__ import annotations

import datetime as dt
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.config import load_settings
from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.errors import SchemaError
from raptorx_py.hive.model import MANAGED_TABLE, Column, Table
from raptorx_py.metastore import transactions
from raptorx_py.metastore.locks import (
    LockManager,
    LockRefusedError,
    Operation,
    lock_components,
    show_locks,
)
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.metastore.transactions import TxnAbortedError, get_table_snapshots
from raptorx_py.metastore.write_paths import DIRECTORY, FILE, STAGING, write_paths_of_table
from raptorx_py.storage.acid_layout import delta_dir_name
from raptorx_py.tables.cleaner import clean_table
from raptorx_py.tables.commit import commit_write
from raptorx_py.tables.commit_files import CommitFiles, WriteRecords
from raptorx_py.tables.heartbeat import TxnHeartbeat
from raptorx_py.tables.partition_records import WrittenPartitions, group_by_partition
from raptorx_py.tables.rollback import abort_write
from raptorx_py.tables.staging import staging_dir_name, staging_txn_id
from raptorx_py.tables.task_files import write_task
from raptorx_py.tables.write_job import begin_write
from raptorx_py.tables.write_target import MANAGED_PARAMETERS
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock

COLUMNS = [
    Column("id", "bigint"),
    Column("amount", "decimal(10,2)"),
    Column("day", "date"),
    Column("region", "string"),
]


def write_settings(tmp_path, metastore: str = "ms", **overrides: str):
    """Settings of a writer whose SQLite metastore is ``<tmp_path>/<metastore>.db`` and whose
    warehouse is ``<tmp_path>/warehouse``: 2 lock retries 5 s apart, unless overridden."""
    return load_settings(
        overrides={
            "hive.metastore.url": f"sqlite:///{tmp_path}/{metastore}.db",
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
            "hive.lock.numretries": "2",
            "hive.lock.sleep.between.retries": "5s",
            **overrides,
        }
    )


@pytest.fixture
def setup(tmp_path):
    settings = write_settings(tmp_path, **{"hive.txn.timeout": "60s"})
    clock = FakeClock()
    ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"), clock=clock, txn_timeout=60)
    yield settings, ms, clock, tmp_path
    ms.close()


def committed_then_allocated(settings, ms, ids: range):
    """``db.t`` with ids 0..3 committed, then a second write of ``ids`` that has its write id
    but has moved and committed nothing: ``(job, files, write id)``."""
    commit_write(ms, settings, *write(settings, ms, [batch(range(4))]))
    job, files = write(settings, ms, [batch(ids)])
    return job, files, ms.allocate_write_id(job.txn_id, "db", "t")


def die_after_moving(settings, ms, job, files, wid):
    """A commit that moves its files into ``delta_<wid>`` (through ``CommitFiles``, which
    records what it creates) and then dies: no partition recorded, no commit, no abort.
    Returns the directories it created."""
    table = ms.get_table("db", "t")
    commit_files = CommitFiles(
        settings, table.location, WriteRecords(ms, job.txn_id, "db", table.name)
    )
    partitions = WrittenPartitions.of(ms, table, group_by_partition(files))
    heartbeat = TxnHeartbeat(settings, job.txn_id, metastore=ms)
    commit_files.move_files(partitions, delta_dir_name(wid), heartbeat)
    return commit_files.created_dirs


def batch(ids, region_of=lambda i: "EU" if i % 2 else "US"):
    ids = list(ids)
    return pa.RecordBatch.from_pydict(
        {
            "id": pa.array(ids, pa.int64()),
            "amount": pa.array([None if i % 7 == 0 else f"{i}.25" for i in ids]).cast(
                pa.decimal128(10, 2)
            ),
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 30) for i in ids]),
            "region": pa.array([region_of(i) for i in ids], pa.string()),
        }
    )


def write(settings, ms, batches, *, overwrite=False, table="t", partition_by=("region",)):
    job = begin_write(ms, settings, "db", table, COLUMNS, overwrite, partition_by)
    files = write_task(
        settings, job, batches, heartbeat=TxnHeartbeat(settings, job.txn_id, metastore=ms)
    )
    return job, files


def read_ids(settings, ms, table="t") -> list[int]:
    t = ms.get_table("db", table)
    plan = plan_scan(ms, settings, t, t.all_columns, [])
    ids = []
    for s in plan.splits:
        ids += pq.read_table(s.url.removeprefix("file://"), columns=["id"]).column("id").to_pylist()
    return sorted(ids)


def test_append_twice_then_overwrite(setup):
    settings, ms, _, tmp = setup
    job, files = write(settings, ms, [batch(range(0, 10)), batch(range(10, 20))])
    assert {f.values for f in files} == {("EU",), ("US",)}
    result = commit_write(ms, settings, job, files)
    assert (result.write_id, result.rows, result.partitions_added) == (1, 20, 2)
    job, files = write(settings, ms, [batch(range(20, 25), lambda i: "ASIA")])
    assert commit_write(ms, settings, job, files).write_id == 2
    assert read_ids(settings, ms) == list(range(25))

    t = ms.get_table("db", "t")
    assert t.table_type == "MANAGED_TABLE"
    assert t.location == f"file://{tmp}/warehouse/db.db/t"
    parts = {p.values: p for p in ms.list_partitions(t)}
    assert parts[("EU",)].row_count == 10 and parts[("EU",)].parameters["writeId"] == "1"
    assert parts[("EU",)].stats["id"].low == 1 and parts[("EU",)].stats["id"].high == 19
    assert parts[("EU",)].stats["amount"].num_nulls == 1  # id 7
    assert os.path.isdir(f"{tmp}/warehouse/db.db/t/region=EU/{delta_dir_name(1)}")
    assert not [n for n in os.listdir(f"{tmp}/warehouse/db.db/t") if n.startswith(".")]

    job, files = write(settings, ms, [batch([100, 101])], overwrite=True)
    result = commit_write(ms, settings, job, files)
    assert read_ids(settings, ms) == [100, 101]
    parts = {p.values: p for p in ms.list_partitions(t)}
    # ASIA received no row: it stays, empty, under the overwrite's base
    assert parts[("ASIA",)].row_count == 0 and parts[("ASIA",)].parameters["writeId"] == "3"
    assert parts[("EU",)].row_count == 1

    # an append after the overwrite lands above its base
    job, files = write(settings, ms, [batch([7])])
    commit_write(ms, settings, job, files)
    assert read_ids(settings, ms) == [7, 100, 101]
    assert {p.values: p for p in ms.list_partitions(t)}[("EU",)].row_count == 2


def test_partition_values_split_exactly(setup):
    settings, ms, _, _ = setup
    rng = random.Random(7)
    regions = ["EU", "US", None, "a/b=c", ""]
    ids = list(range(300))
    rng.shuffle(ids)
    region_of = {i: rng.choice(regions) for i in ids}
    job, files = write(
        settings, ms, [batch(ids[:150], region_of.get), batch(ids[150:], region_of.get)]
    )
    commit_write(ms, settings, job, files)
    t = ms.get_table("db", "t")
    got = {}
    for p in ms.list_partitions(t):
        plan = plan_scan(ms, settings, t, t.all_columns, [])
        got[p.values] = p.row_count
    expected = {}
    for i in ids:  # "" is Hive's null partition too
        key = (region_of[i] or None,)
        expected[key] = expected.get(key, 0) + 1
    assert got == expected
    assert read_ids(settings, ms) == list(range(300))
    assert len(plan.splits) == 4  # one file per partition for this one task


def test_unpartitioned_append_and_overwrite(setup):
    settings, ms, _, _ = setup
    for lo in (0, 5):
        job, files = write(settings, ms, [batch(range(lo, lo + 5))], partition_by=None, table="u")
        commit_write(ms, settings, job, files)
    assert read_ids(settings, ms, "u") == list(range(10))
    assert ms.get_table("db", "u").parameters["numRows"] == "10"
    job, files = write(settings, ms, [], overwrite=True, partition_by=None, table="u")
    commit_write(ms, settings, job, files)
    assert read_ids(settings, ms, "u") == []
    assert ms.get_table("db", "u").parameters["numRows"] == "0"


def test_uncommitted_write_is_invisible_to_a_concurrent_snapshot(setup):
    settings, ms, _, _ = setup
    # a second write is moved in but not committed yet: simulate by doing the steps by hand
    job, files, wid = committed_then_allocated(settings, ms, range(4, 8))
    t = ms.get_table("db", "t")
    for f in files:
        dest = f"{t.location}/region={f.values[0]}/{delta_dir_name(wid)}"
        os.makedirs(dest.removeprefix("file://"), exist_ok=True)
        os.rename(
            f.url.removeprefix("file://"),
            f"{dest.removeprefix('file://')}/{f.url.rsplit('/', 1)[-1]}",
        )
    assert read_ids(settings, ms) == [0, 1, 2, 3]


def test_commit_that_dies_after_allocating_is_invisible_then_cleaned(setup):
    settings, ms, clock, tmp = setup
    # the dying commit: write id allocated, files moved, then nothing (no commit, no abort)
    commit_write(ms, settings, *write(settings, ms, [batch(range(4))]))
    job, files = write(settings, ms, [batch(range(10, 14), region_of=lambda i: "NEW")])
    wid = ms.allocate_write_id(job.txn_id, "db", "t")
    table_dir = f"{tmp}/warehouse/db.db/t"
    moved = f"{table_dir}/region=NEW/{delta_dir_name(wid)}"  # a partition never registered
    assert die_after_moving(settings, ms, job, files, wid) == [moved]
    assert len(os.listdir(moved)) == len(files) == 1
    assert read_ids(settings, ms) == [0, 1, 2, 3]

    # still open: the cleaner keeps everything (the write may be running)
    report = clean_table(ms, settings, "db", "t")
    assert report.removed == [] and os.path.isdir(moved)

    clock.now += 61  # no heartbeat for longer than hive.txn.timeout
    report = clean_table(ms, settings, "db", "t")
    assert report.expired_txns == [job.txn_id]
    assert report.removed_aborted == [f"file://{moved}"]
    assert report.removed_staging == [job.staging_url]
    assert not os.path.exists(moved) and not os.path.exists(job.staging_url[7:])
    assert ms.get_valid_write_ids(["db.t"])["db.t"].aborted_write_ids == {wid}
    assert read_ids(settings, ms) == [0, 1, 2, 3]
    # committed data is never touched
    assert os.path.isdir(f"{table_dir}/region=US/{delta_dir_name(1)}")
    # the dead commit cannot come back
    with pytest.raises(TxnAbortedError):
        ms.commit_transaction(job.txn_id)


def test_failed_commit_aborts_and_removes_what_it_moved(setup, monkeypatch):
    settings, ms, _, tmp = setup
    first, files = write(settings, ms, [batch(range(4))])
    commit_write(ms, settings, first, files)
    job, files = write(settings, ms, [batch(range(4, 8))])

    def broken(*args, **kwargs):
        raise RuntimeError("metastore went away")

    monkeypatch.setattr(ms, "commit_transaction", broken)
    with pytest.raises(RuntimeError, match="went away"):
        commit_write(ms, settings, job, files)
    monkeypatch.undo()
    assert ms.get_transaction(job.txn_id).state == "aborted"
    assert not os.path.exists(f"{tmp}/warehouse/db.db/t/region=US/{delta_dir_name(2)}")
    assert not os.path.exists(job.staging_url[7:])
    assert read_ids(settings, ms) == [0, 1, 2, 3]
    # The committed write kept only its staging record; the failed one all of its own, which
    # the cleaner forgets without reporting as removed what the rollback already removed.
    kinds = {(r.txn_id, r.kind) for r in write_paths_of_table(ms, "db", "t")}
    assert {k for t, k in kinds if t == first.txn_id} == {STAGING}
    assert {k for t, k in kinds if t == job.txn_id} == {STAGING, DIRECTORY, FILE}
    report = clean_table(ms, settings, "db", "t")
    assert report.removed == [] and report.left_unrecorded == []
    assert write_paths_of_table(ms, "db", "t") == []


def test_overwrite_refused_while_an_appender_holds_shared_write(setup):
    settings, ms, _, _ = setup
    job, files = write(settings, ms, [batch(range(4))])
    commit_write(ms, settings, job, files)
    other = ms.open_transaction(user="alice", host="etl-1")
    LockManager(ms, settings).acquire(
        lock_components(Operation.INSERT, "db", "t", ["region=EU"]),
        txn_id=other,
        user="alice",
        host="etl-1",
    )
    job, files = write(settings, ms, [batch(range(50, 52))], overwrite=True)
    sleeps = []
    with pytest.raises(LockRefusedError) as err:
        commit_write(ms, settings, job, files, sleep=sleeps.append)
    message = str(err.value)
    assert "cannot take EXCLUSIVE on db.t" in message
    assert f"transaction {other}" in message and "user alice on host etl-1" in message
    assert "refused 3 times" in message and sleeps == [5.0, 5.0]
    assert ms.get_transaction(job.txn_id).state == "aborted"
    assert ms.get_valid_write_ids(["db.t"])["db.t"].high_watermark == 1  # none allocated
    assert read_ids(settings, ms) == [0, 1, 2, 3]
    # another appender of another partition is not blocked by the SHARED_WRITE
    job, files = write(settings, ms, [batch([9], lambda i: "ASIA")])
    assert commit_write(ms, settings, job, files, sleep=sleeps.append).write_id == 2


def test_a_commit_that_dies_records_no_partition_metadata(setup, monkeypatch):
    """The partitions a commit records and the commit itself are one database transaction:
    a commit that fails after recording them leaves the metastore as it was."""
    settings, ms, _, _ = setup
    job, files = write(settings, ms, [batch(range(4))])
    commit_write(ms, settings, job, files)
    table = ms.get_table("db", "t")
    before = {
        p.values: (p.parameters.get("numRows"), p.parameters.get("writeId"))
        for p in ms.list_partitions(table)
    }
    assert set(before) == {("EU",), ("US",)}
    job, files = write(
        settings, ms, [batch(range(4, 10), region_of=lambda i: "APAC" if i > 7 else "EU")]
    )
    real_commit = ms.commit_transaction

    def dies_after_recording(txn_id):
        real_commit(txn_id)  # inside the commit's database transaction: rolled back below
        raise RuntimeError("driver killed during commit")

    monkeypatch.setattr(ms, "commit_transaction", dies_after_recording)
    with pytest.raises(RuntimeError, match="driver killed"):
        commit_write(ms, settings, job, files)
    monkeypatch.undo()
    assert ms.get_transaction(job.txn_id).state == "aborted"
    after = {
        p.values: (p.parameters.get("numRows"), p.parameters.get("writeId"))
        for p in ms.list_partitions(table)
    }
    assert after == before
    assert read_ids(settings, ms) == [0, 1, 2, 3]


def test_abort_removes_staging_and_task_needs_an_open_txn(setup):
    settings, ms, clock, _ = setup
    job, files = write(settings, ms, [batch(range(4))])
    assert os.path.isdir(job.staging_url[7:])
    abort_write(ms, settings, job)
    assert ms.get_transaction(job.txn_id).state == "aborted"
    assert not os.path.exists(job.staging_url[7:])
    assert "db" not in ms.list_databases()  # the table is created by the commit only
    with pytest.raises(TxnAbortedError):
        write_task(
            settings,
            job,
            [batch([1])],
            heartbeat=TxnHeartbeat(settings, job.txn_id, metastore=ms),
        )


def test_schema_and_table_kind_are_checked(setup):
    settings, ms, _, tmp = setup
    job, files = write(settings, ms, [batch([1])])
    commit_write(ms, settings, job, files)
    with pytest.raises(SchemaError, match="partitioned by \\(region\\).*asks for \\(day\\)"):
        begin_write(ms, settings, "db", "t", COLUMNS, False, ("day",))
    with pytest.raises(SchemaError, match="column 'id' of db.t is bigint.*is string"):
        begin_write(ms, settings, "db", "t", [Column("id", "string"), *COLUMNS[1:]], False)
    with pytest.raises(SchemaError, match="lacks|has columns"):
        begin_write(ms, settings, "db", "t", COLUMNS[:2], False)
    with pytest.raises(SchemaError, match="not columns of the data"):
        begin_write(ms, settings, "db", "new", COLUMNS, False, ("nope",))
    # A char/varchar column (a Hive Metastore's table, say): Spark would pad and check
    # lengths, this path does neither, so it refuses the table, naming the columns.
    chars = (Column("id", "bigint"), Column("c", "char(5)"), Column("v", "varchar(4)"))
    location = f"file://{tmp}/warehouse/db.db/chars"
    ms.create_table(Table("db", "chars", MANAGED_TABLE, location, chars, (), MANAGED_PARAMETERS))
    for given in (chars, [Column(c.name, "string") for c in chars]):
        with pytest.raises(
            SchemaError, match=r"db.chars has char/varchar column\(s\) c char\(5\), v"
        ):
            begin_write(ms, settings, "db", "chars", given, False)


def test_staging_names():
    assert staging_txn_id(staging_dir_name(42)) == 42
    assert staging_txn_id("/x/t/" + staging_dir_name(7, "abc") + "/") == 7
    assert staging_txn_id("region=EU") is None
    assert staging_dir_name(1).startswith(".")


def test_cli_clean(setup, capsys):
    from raptorx_py.cli import main

    settings, ms, _, tmp = setup
    commit_write(ms, settings, *write(settings, ms, [batch(range(4))]))
    job, files = write(settings, ms, [batch(range(4, 6), region_of=lambda i: "US")])
    wid = ms.allocate_write_id(job.txn_id, "db", "t")
    dead = f"{tmp}/warehouse/db.db/t/region=US/{delta_dir_name(wid)}"
    assert die_after_moving(settings, ms, job, files, wid) == [dead]
    ms.abort_transaction(job.txn_id)  # the client aborted, then died before cleaning up
    args = ["-p", f"hive.metastore.url={settings.metastore_url}"]
    assert main(["table", "clean", "db.t", *args]) == 0
    out = capsys.readouterr().out
    assert f"removed aborted file://{dead}" in out and f"removed staging {job.staging_url}" in out
    assert "2 directories removed" in out
    assert not os.path.exists(dead) and read_ids(settings, ms) == [0, 1, 2, 3]
    assert main(["table", "clean", "db.t", *args]) == 0
    assert "0 directories removed" in capsys.readouterr().out


def test_waiting_for_a_lock_keeps_the_writer_alive(tmp_path):
    """The holder dies (stops heartbeating); the waiting writer heartbeats while it waits, so
    it outlives the holder, whose expiry releases the lock."""
    settings = write_settings(
        tmp_path,
        **{
            "hive.lock.numretries": "5",
            "hive.lock.sleep.between.retries": "50s",
            "hive.txn.timeout": "60s",
        },
    )
    clock = FakeClock()
    ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"), clock=clock, txn_timeout=60)
    job, files = write(settings, ms, [batch(range(4))])
    commit_write(ms, settings, job, files)
    holder = ms.open_transaction()
    LockManager(ms, settings).acquire(lock_components(Operation.INSERT, "db", "t"), txn_id=holder)
    job, files = write(settings, ms, [batch([5])], overwrite=True)
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock.now += seconds

    assert commit_write(ms, settings, job, files, sleep=sleep).write_id == 2
    assert ms.get_transaction(holder).state == "aborted"
    assert ms.get_transaction(job.txn_id).state == "committed"
    assert max(slept) <= 20 and sum(slept) > 60  # waited longer than the timeout, in steps
    assert read_ids(settings, ms) == [5]
    ms.close()


def test_listing_cache_keeps_raw_managed_listings_and_filters_by_snapshot(tmp_path):
    """Managed partitions are cached whether sealed or not; a snapshot older than the cached
    listing still reads only its own write ids; a commit changes the partition's version."""
    from raptorx_py.cache.listing_cache import listing_cache_for
    from raptorx_py.metastore.catalog import QuerySnapshot

    settings = load_settings(
        overrides={
            "hive.metastore.url": f"sqlite:///{tmp_path}/ms.db",
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
            "hive.file-status-cache-tables": f"db.cached_{tmp_path.name[-8:]}",
        }
    )
    name = f"cached_{tmp_path.name[-8:]}"
    ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"))
    job, files = write(settings, ms, [batch(range(4))], table=name)
    commit_write(ms, settings, job, files)

    def plan(snapshot=None):
        t = ms.get_table("db", name)
        p = plan_scan(ms, settings, t, t.all_columns, [], snapshot=snapshot)
        return sorted(
            i
            for s in p.splits
            for i in pq.read_table(s.url[7:], columns=["id"]).column("id").to_pylist()
        )

    old = QuerySnapshot(get_table_snapshots(ms, [f"db.{name}"]))
    assert plan() == [0, 1, 2, 3]
    cache = listing_cache_for(settings.listing_cache)
    assert len(cache) == 2  # both partitions cached, though nothing is sealed
    job, files = write(settings, ms, [batch([10, 11])], table=name)
    commit_write(ms, settings, job, files)
    assert plan() == [0, 1, 2, 3, 10, 11]  # new versions: listed again, new delta seen
    # the old snapshot, planned after the commit, through the cached new listings: its rows
    hits = CounterDeltas()
    assert plan(old) == [0, 1, 2, 3]
    assert hits["listing_cache.hits"] == 2
    ms.close()


def test_statistics_of_an_unseen_overwrite_never_prune_an_older_snapshot(setup):
    """An overwrite records its (narrower) statistics; a snapshot from before it still reads
    the old rows, so those statistics must not prune the partition for it."""
    from raptorx_py import predicates as preds
    from raptorx_py.metastore.catalog import QuerySnapshot

    settings, ms, _, _ = setup
    job, files = write(settings, ms, [batch(range(1, 40, 2))])  # EU ids 1..39
    commit_write(ms, settings, job, files)
    old = QuerySnapshot(get_table_snapshots(ms, ["db.t"]))
    job, files = write(settings, ms, [batch([1, 3])], overwrite=True)
    commit_write(ms, settings, job, files)
    t = ms.get_table("db", "t")
    wanted = [preds.Comparison(">", "id", 30)]

    def ids_of(plan):
        return sorted(
            i
            for s in plan.splits
            for i in pq.read_table(s.url[7:], columns=["id"]).column("id").to_pylist()
        )

    now = plan_scan(ms, settings, t, t.all_columns, wanted)
    assert now.partitions_pruned_by_stats == 1 and ids_of(now) == []
    before = plan_scan(ms, settings, t, t.all_columns, wanted, snapshot=old)
    assert before.partitions_pruned_by_stats == 0
    assert [i for i in ids_of(before) if i > 30] == [31, 33, 35, 37, 39]


def test_a_writers_transaction_and_locks_name_its_user_and_host(setup, monkeypatch):
    settings, ms, _, _ = setup
    monkeypatch.setattr(transactions.getpass, "getuser", lambda: "carol")
    monkeypatch.setattr(transactions.socket, "gethostname", lambda: "driver-7")
    job, files = write(settings, ms, [batch(range(4))])
    txn = ms.get_transaction(job.txn_id)
    assert (txn.user, txn.host) == ("carol", "driver-7")
    seen = []
    real = LockManager.acquire

    def spy(self, components, **kw):
        held = real(self, components, **kw)
        seen.extend((lk.user, lk.host) for lk in show_locks(ms, "db", "t", extended=True))
        return held

    monkeypatch.setattr(LockManager, "acquire", spy)
    commit_write(ms, settings, job, files)
    assert seen and set(seen) == {("carol", "driver-7")}


# --- which statistics may prune -------------------------------------------------------------


def test_external_statistics_prune_only_the_files_they_describe():
    from raptorx_py.datasource.planning.planner import stats_trusted
    from raptorx_py.hive.write_ids import ValidWriteIdList

    assert not stats_trusted({}, None, "v1:x")  # external, no file set recorded
    assert not stats_trusted({"sealed": "true"}, None, "v1:x")  # sealed is not enough
    assert stats_trusted({"statsFileSet": "v1:x"}, None, "v1:x")  # listed files match
    assert not stats_trusted({"statsFileSet": "v1:x", "sealed": "true"}, None, "v1:y")
    ids = ValidWriteIdList.from_string("db.t:5:9223372036854775807::3")
    assert stats_trusted({"writeId": "5"}, ids)
    assert not stats_trusted({"writeId": "3"}, ids)  # aborted or open
    assert not stats_trusted({"writeId": "6"}, ids)  # committed after it
