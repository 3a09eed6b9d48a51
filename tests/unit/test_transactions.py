"""Transactions and write ids on every metastore backend: lifecycle, per-table write ids,
snapshots in one round trip, expiry on an injected clock, schema upgrade, races between
connections and between processes."""

import multiprocessing
import threading

import pytest

from raptorx_py.errors import InvalidNameError, MetastoreError, NoSuchObjectError
from raptorx_py.hive.model import EXTERNAL_TABLE, Column, Table
from raptorx_py.hive.table_parameters import WRITE_ID_PARAM
from raptorx_py.hive.write_ids import ValidWriteIdList
from raptorx_py.metastore import schema
from raptorx_py.metastore.notifications import current_notification_id, get_notifications
from raptorx_py.metastore.store import backend_for_url
from raptorx_py.metastore.transactions import (
    NoSuchTxnError,
    TxnAbortedError,
    TxnError,
    get_table_snapshots,
)
from tests.support.counter_deltas import CounterDeltas
from tests.unit.txn_helpers import (
    TIMEOUT,
    allocate_in_process,
    managed_table,
    open_ms,
    partition,
)


@pytest.fixture
def ms(metastore_url, clock):
    with open_ms(metastore_url, clock=clock, txn_timeout=TIMEOUT) as m:
        m.create_database("db")
        m.create_table(managed_table())
        m.create_table(managed_table(name="u"))
        yield m


def _round_trips(fn):
    trips = CounterDeltas()
    result = fn()
    return result, trips["metastore.round_trips"]


# -- lifecycle ----------------------------------------------------------------------------
def test_open_then_commit(ms, clock):
    txn = ms.open_transaction(user="alice", host="h1", agent_info="test")
    info = ms.get_transaction(txn)
    assert (info.state, info.user, info.host, info.agent_info) == ("open", "alice", "h1", "test")
    assert info.started_ms == info.last_heartbeat_ms == int(clock.now * 1000)
    ms.commit_transaction(txn)
    assert ms.get_transaction(txn).state == "committed"


def test_transaction_ids_increase(ms):
    ids = [ms.open_transaction() for _ in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3


def test_user_and_host_default_to_this_process(ms):
    import socket

    info = ms.get_transaction(ms.open_transaction())
    assert info.host == socket.gethostname() and info.user


@pytest.mark.parametrize(
    "first, then, error, message",
    [
        ("commit", "commit", TxnError, "is already committed; cannot commit"),
        ("commit", "abort", TxnError, "is already committed; cannot abort"),
        (
            "abort",
            "commit",
            TxnAbortedError,
            "is aborted \\(aborted by its client\\); cannot commit",
        ),
        (
            "abort",
            "heartbeat",
            TxnAbortedError,
            "is aborted \\(aborted by its client\\); cannot heartbeat",
        ),
        (
            "commit",
            "allocate",
            TxnError,
            "is already committed; cannot allocate a write id for db.t",
        ),
    ],
)
def test_a_finished_transaction_refuses_more(ms, first, then, error, message):
    txn = ms.open_transaction()
    getattr(ms, f"{first}_transaction")(txn)
    action = {
        "commit": lambda: ms.commit_transaction(txn),
        "abort": lambda: ms.abort_transaction(txn),
        "heartbeat": lambda: ms.heartbeat(txn_id=txn),
        "allocate": lambda: ms.allocate_write_id(txn, "db", "t"),
    }[then]
    with pytest.raises(error, match=f"transaction {txn} {message}"):
        action()


def test_abort_of_an_aborted_transaction_is_a_no_op(ms):
    txn = ms.open_transaction()
    ms.abort_transaction(txn)
    events = current_notification_id(ms)
    ms.abort_transaction(txn)
    assert ms.get_transaction(txn).state == "aborted"
    assert current_notification_id(ms) == events


def test_unknown_transaction(ms):
    with pytest.raises(NoSuchTxnError, match="transaction 999 does not exist; cannot commit"):
        ms.commit_transaction(999)
    with pytest.raises(LookupError):
        ms.get_transaction(999)


# -- write ids ------------------------------------------------------------------------------
def test_write_ids_are_per_table_monotonic_and_one_per_txn_and_table(ms):
    t1, t2 = ms.open_transaction(), ms.open_transaction()
    assert ms.allocate_write_id(t1, "db", "t") == 1
    assert ms.allocate_write_id(t2, "db", "t") == 2
    assert ms.allocate_write_id(t1, "db", "t") == 1  # asked again: the same one
    assert ms.allocate_write_id(t2, "db", "u") == 1  # another table counts on its own
    assert ms.allocate_write_id(t1, "db", "u") == 2


def test_write_ids_only_for_existing_managed_tables(ms):
    ms.create_table(Table("db", "ext", EXTERNAL_TABLE, "file:///x", (Column("a", "int"),)))
    txn = ms.open_transaction()
    with pytest.raises(MetastoreError, match="db.ext is an EXTERNAL table"):
        ms.allocate_write_id(txn, "db", "ext")
    with pytest.raises(NoSuchObjectError, match="table 'db.nope' does not exist.*db.t"):
        ms.allocate_write_id(txn, "db", "nope")


def test_write_ids_continue_after_drop_and_recreate(ms):
    txn = ms.open_transaction()
    assert ms.allocate_write_id(txn, "db", "t") == 1
    ms.commit_transaction(txn)
    ms.drop_table("db", "t")
    ms.create_table(managed_table())
    txn = ms.open_transaction()
    # a new table at the same location must not reuse delta_1_1 of the dropped one
    assert ms.allocate_write_id(txn, "db", "t") == 2


# -- snapshots -------------------------------------------------------------------------------
def test_snapshot_lists_open_and_aborted_write_ids(ms):
    committed, aborted, still_open = (ms.open_transaction() for _ in range(3))
    for txn in (committed, aborted, still_open):
        ms.allocate_write_id(txn, "db", "t")
    ms.commit_transaction(committed)
    ms.abort_transaction(aborted)
    snap = ms.get_valid_write_ids(["db.t"])["db.t"]
    assert snap == ValidWriteIdList("db.t", 3, open_write_ids={3}, aborted_write_ids={2})
    assert str(snap) == "db.t:3:3:3:2"
    assert [w for w in (1, 2, 3) if snap.is_visible(w)] == [1]


def test_snapshot_of_a_never_written_table_is_empty(ms):
    assert ms.get_valid_write_ids(["db.u"]) == {"db.u": ValidWriteIdList("db.u", 0)}


def test_snapshots_of_many_tables_take_one_round_trip(ms):
    ms.create_table(Table("db", "ext", EXTERNAL_TABLE, "file:///x", (Column("a", "int"),)))
    txn = ms.open_transaction()
    ms.allocate_write_id(txn, "db", "t")
    ms.allocate_write_id(txn, "db", "u")
    ms.commit_transaction(txn)
    txn2 = ms.open_transaction()
    ms.allocate_write_id(txn2, "db", "t")
    got, trips = _round_trips(lambda: get_table_snapshots(ms, ["db.t", "db.u", "db.ext"]))
    assert trips == 1
    assert got["db.t"].write_ids == ValidWriteIdList("db.t", 2, {2})
    assert got["db.u"].write_ids == ValidWriteIdList("db.u", 1)
    assert got["db.ext"].write_ids is None and got["db.ext"].table_type == EXTERNAL_TABLE
    assert got["db.t"].table_id == ms.get_table("db", "t").id
    wids, trips = _round_trips(lambda: ms.get_valid_write_ids(["db.t", "db.u"]))
    assert trips == 1 and set(wids) == {"db.t", "db.u"}


def test_snapshot_table_id_changes_when_the_table_is_recreated(ms):
    before = get_table_snapshots(ms, ["db.t"])["db.t"].table_id
    ms.create_table(managed_table(), replace=True)
    assert get_table_snapshots(ms, ["db.t"])["db.t"].table_id != before


def test_a_transaction_reads_its_own_writes(ms):
    txn = ms.open_transaction()
    other = ms.open_transaction()
    mine = ms.allocate_write_id(txn, "db", "t")
    theirs = ms.allocate_write_id(other, "db", "t")
    own = ms.get_valid_write_ids(["db.t"], txn_id=txn)["db.t"]
    assert own.is_visible(mine) and not own.is_visible(theirs)
    assert not ms.get_valid_write_ids(["db.t"])["db.t"].is_visible(mine)


def test_snapshot_of_unknown_tables(ms):
    with pytest.raises(NoSuchObjectError, match="table 'db.nope' does not exist"):
        ms.get_valid_write_ids(["db.t", "db.nope"])
    with pytest.raises(NoSuchObjectError, match="database 'nodb' does not exist"):
        ms.get_valid_write_ids(["nodb.t"])
    # The one naming rule (names.py) checks it, before any round trip.
    with pytest.raises(InvalidNameError, match="'nodot' is not of the form <database>.<table>"):
        ms.get_valid_write_ids(["nodot"])
    assert ms.get_valid_write_ids([]) == {}


# -- partitions written under a write id ------------------------------------------------------
def test_partitions_record_the_write_id_that_wrote_them(ms):
    table = ms.get_table("db", "t")
    txn = ms.open_transaction()
    wid = ms.allocate_write_id(txn, "db", "t")
    [added] = ms.add_partitions(table, [partition("a", table)], write_id=wid)
    assert added.parameters == {"numRows": "1", WRITE_ID_PARAM: str(wid)}
    ms.commit_transaction(txn)
    txn = ms.open_transaction()
    wid2 = ms.allocate_write_id(txn, "db", "t")
    altered = ms.alter_partition(table, partition("a", table, rows=3), write_id=wid2)
    assert altered.parameters == {"numRows": "3", WRITE_ID_PARAM: str(wid2)}
    assert altered.id == added.id


def test_writing_under_a_finished_or_foreign_write_id_is_refused(ms):
    table = ms.get_table("db", "t")
    txn = ms.open_transaction()
    wid = ms.allocate_write_id(txn, "db", "t")
    ms.commit_transaction(txn)
    with pytest.raises(
        TxnError,
        match=f"transaction {txn} is already committed; cannot write db.t under write id {wid}",
    ):
        ms.add_partitions(table, [partition("a", table)], write_id=wid)
    with pytest.raises(TxnError, match="write id 7 was never allocated for db.t"):
        ms.add_partitions(table, [partition("a", table)], write_id=7)
    assert ms.list_partitions(table) == []  # nothing half-done
    ext = ms.create_table(
        Table(
            "db",
            "ext",
            EXTERNAL_TABLE,
            "file:///x",
            (Column("a", "int"),),
            (Column("p", "string"),),
        )
    )
    with pytest.raises(MetastoreError, match="db.ext is an EXTERNAL table: it has no write ids"):
        ms.add_partitions(ext, [partition("a")], write_id=wid)


# -- expiry on the injected clock ------------------------------------------------------------
def test_a_transaction_without_heartbeat_expires(ms, clock):
    dead = ms.open_transaction()
    wid = ms.allocate_write_id(dead, "db", "t")
    clock.advance(TIMEOUT + 1)
    assert ms.get_transaction(dead).state == "open"  # reads expire nothing
    alive = ms.open_transaction()  # any transactional write does
    assert ms.get_transaction(dead).state == "aborted"
    assert ms.get_valid_write_ids(["db.t"])["db.t"].aborted_write_ids == {wid}
    with pytest.raises(
        TxnAbortedError,
        match=f"transaction {dead} is aborted \\(expired by "
        f".*more than its own timeout of 300s.*\\); cannot commit",
    ):
        ms.commit_transaction(dead)
    ms.commit_transaction(alive)
    abort = [e for e in get_notifications(ms) if e.event_type == "ABORT_TXN"]
    assert [e.txn_id for e in abort] == [dead]
    assert "no heartbeat for 301s, more than its own timeout of 300s" in abort[0].message["reason"]


def test_heartbeats_keep_a_transaction_alive(ms, clock):
    txn = ms.open_transaction()
    for _ in range(3):
        clock.advance(TIMEOUT * 0.9)
        ms.heartbeat(txn_id=txn)
    assert ms.expire_timed_out() == []
    ms.commit_transaction(txn)
    assert ms.get_transaction(txn).state == "committed"


def test_a_late_commit_of_a_timed_out_transaction_fails_and_stays_aborted(ms, clock):
    txn = ms.open_transaction()
    clock.advance(TIMEOUT + 0.001)
    with pytest.raises(TxnAbortedError):
        ms.commit_transaction(txn)
    assert ms.get_transaction(txn).state == "aborted"  # the expiry itself was committed


def test_expiry_is_exactly_at_the_timeout(ms, clock):
    txn = ms.open_transaction()
    clock.advance(TIMEOUT)
    assert ms.expire_timed_out() == []
    clock.advance(0.001)
    assert ms.expire_timed_out() == [txn]


# -- schema upgrade -------------------------------------------------------------------------
def test_a_version_1_database_upgrades_in_place(metastore_url):
    backend = backend_for_url(metastore_url)
    conn = backend.connect()
    for ddl in schema.DDL_V1:
        conn.execute(ddl.format(id=backend.id_type))
    conn.execute(
        "INSERT INTO VERSION (VER_ID, SCHEMA_VERSION, VERSION_COMMENT) VALUES (1, 1, 'v1')"
    )
    conn.execute("INSERT INTO DBS (NAME, CREATE_TIME) VALUES ('old', 0)")
    conn.close()
    with open_ms(metastore_url) as ms:
        assert ms.list_databases() == ["old"]
        (version,) = ms.sql.execute("SELECT SCHEMA_VERSION FROM VERSION").fetchone()
        assert version == schema.SCHEMA_VERSION == 5
        assert ms.sql.execute("SELECT COUNT(*) FROM PARTITION_FORMATS").fetchone()[0] == 0
        ms.create_table(managed_table(db="old"))
        txn = ms.open_transaction()
        assert ms.allocate_write_id(txn, "old", "t") == 1
        ms.commit_transaction(txn)
        assert [e.event_type for e in get_notifications(ms)] == [
            "CREATE_TABLE",
            "OPEN_TXN",
            "ALLOC_WRITE_ID",
            "COMMIT_TXN",
        ]
        assert get_notifications(ms)[0].event_id == 1
    with open_ms(metastore_url) as ms:  # opening again changes nothing
        assert current_notification_id(ms) == 4
        assert ms.sql.execute("SELECT COUNT(*) FROM NOTIFICATION_SEQUENCE").fetchone()[0] == 1


def test_a_newer_schema_is_refused(metastore_url):
    with open_ms(metastore_url) as ms:
        ms.sql.execute("UPDATE VERSION SET SCHEMA_VERSION = 99")
    with pytest.raises(MetastoreError, match="schema version 99, newer than this"):
        open_ms(metastore_url)


# -- races ----------------------------------------------------------------------------------
def test_two_connections_allocating_concurrently_get_distinct_contiguous_ids(metastore_url):
    with open_ms(metastore_url) as setup:
        setup.create_database("db")
        setup.create_table(managed_table())
        first_event = current_notification_id(setup) + 1
    got: list[list[int]] = [[], []]
    barrier = threading.Barrier(2)
    errors = []

    def run(i):
        try:
            with open_ms(metastore_url) as ms:
                barrier.wait(10)
                for _ in range(15):
                    txn = ms.open_transaction()
                    got[i].append(ms.allocate_write_id(txn, "db", "t"))
                    ms.commit_transaction(txn)
        except Exception as e:  # surfaced by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(got[0] + got[1]) == list(range(1, 31))
    assert got[0] == sorted(got[0]) and got[1] == sorted(got[1])
    with open_ms(metastore_url) as ms:
        ids = [e.event_id for e in get_notifications(ms, first_event - 1)]
        assert ids == list(range(first_event, first_event + 90))


def test_two_processes_allocating_concurrently_no_duplicates_no_event_gaps(metastore_url):
    with open_ms(metastore_url) as setup:
        setup.create_database("db")
        setup.create_table(managed_table())
        first_event = current_notification_id(setup) + 1
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=allocate_in_process, args=(metastore_url, "db.t", 20, start, results))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    start.set()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert sorted(got[0] + got[1]) == list(range(1, 41))
    with open_ms(metastore_url) as ms:
        events = get_notifications(ms, first_event - 1)
        assert [e.event_id for e in events] == list(range(first_event, first_event + 120))
        allocs = [e.write_id for e in events if e.event_type == "ALLOC_WRITE_ID"]
        assert allocs == list(range(1, 41))  # the log's order is the allocation order
