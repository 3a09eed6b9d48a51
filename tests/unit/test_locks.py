"""Hive's locks on every metastore backend: every cell of the compatibility matrix at every
level, every hierarchy rule, all-or-nothing requests in lexicographic order, retries with an
injected sleep, expiry on an injected clock, show locks, and two connections racing."""

import threading

import pytest

from raptorx_py.config import build_settings
from raptorx_py.metastore import locks
from raptorx_py.metastore.locks import (
    COMPATIBLE,
    SR,
    SW,
    LockComponent,
    LockError,
    LockManager,
    LockRefusedError,
    LockType,
    NoSuchLockError,
    Operation,
    X,
    expand,
    lock_components,
    show_locks,
    try_lock,
    unlock,
)
from raptorx_py.metastore.transactions import TxnAbortedError, TxnError
from tests.support.counter_deltas import CounterDeltas
from tests.unit.txn_helpers import TIMEOUT, open_ms


@pytest.fixture
def ms(metastore_url, clock):
    with open_ms(metastore_url, clock=clock, txn_timeout=TIMEOUT) as m:
        yield m


def settings(retries=3, sleep="2s", concurrency=True):
    return build_settings(
        {
            "hive.lock.numretries": (str(retries), "test", None),
            "hive.lock.sleep.between.retries": (sleep, "test", None),
            "hive.support.concurrency": (str(concurrency).lower(), "test", None),
        }
    )


def take(ms, *components, txn_id=None, user="holder"):
    return try_lock(ms, components, txn_id=txn_id, user=user, host="h")


def C(lock_type, obj):
    """A component from 'db', 'db.t' or 'db.t/p=1'."""
    name, _, part = obj.partition("/")
    db, _, table = name.partition(".")
    return LockComponent(lock_type, db, table or None, part or None)


# -- the compatibility matrix -------------------------------------------------------------------
#: The documents' matrix, Hive 3's types: (requested, held) -> granted.
MATRIX = [
    (SR, SR, True),
    (SR, SW, True),
    (SR, X, False),
    (SW, SR, True),
    (SW, SW, False),
    (SW, X, False),
    (X, SR, False),
    (X, SW, False),
    (X, X, False),
]


def test_the_matrix_table_is_the_documents():
    assert COMPATIBLE == {(r, h): ok for r, h, ok in MATRIX}


@pytest.mark.parametrize("obj", ["db", "db.t", "db.t/p=1"])
@pytest.mark.parametrize(
    "requested, held, granted", MATRIX, ids=[f"{r.name}-vs-held-{h.name}" for r, h, _ in MATRIX]
)
def test_every_cell_of_the_matrix_at_every_level(ms, obj, requested, held, granted):
    first = take(ms, C(held, obj))
    assert first.acquired
    second = take(ms, C(requested, obj), user="requester")
    assert second.acquired == granted
    if not granted:
        assert second.blocked == C(requested, obj)
        assert (second.holder.lock_id, second.holder.lock_type) == (first.lock_id, held)
        assert second.holder.object_name == obj


# -- hierarchy ------------------------------------------------------------------------------
HIERARCHY = [
    # (held, requested, granted, why)
    ([C(X, "db.t")], [C(SR, "db.t/p=1")], False, "a partition lock takes S on its table"),
    ([C(SR, "db.t/p=1")], [C(X, "db.t")], False, "drop table waits for readers of a partition"),
    ([C(SW, "db.t/p=1")], [C(X, "db.t")], False, "drop table waits for an insert"),
    ([C(X, "db.t/p=1")], [C(X, "db.t")], False, "and for a partition being dropped"),
    ([C(X, "db")], [C(SR, "db.t")], False, "a table lock takes S on its database"),
    ([C(SR, "db.t/p=1")], [C(X, "db")], False, "drop database waits for any lock beneath"),
    ([C(X, "db.t/p=1")], [C(X, "db.t/p=2")], True, "sibling partitions are independent"),
    ([C(X, "db.t/p=1")], [C(SW, "db.t/p=2")], True, "an insert next to an add partition"),
    ([C(X, "db.t/p=1")], [C(SR, "db.t")], True, "the table's own S is compatible"),
    ([C(X, "db.t")], [C(X, "db.u")], True, "other tables are independent"),
    ([C(X, "db.t")], [C(X, "db2.t")], True, "other databases are independent"),
    ([C(X, "db.t/a=1")], [C(SR, "db.t/a=1/b=2")], False, "a partition prefix is a parent"),
    ([C(SR, "db.t/a=1/b=2")], [C(X, "db.t/a=1")], False, "and takes S"),
    ([C(X, "db.t/a=1/b=2")], [C(X, "db.t/a=1/b=3")], True, "sub-partitions are independent"),
    ([C(X, "db.t/a=1/b=2")], [C(X, "db.t/a=2")], True, "another prefix is independent"),
]


@pytest.mark.parametrize("held, requested, granted, why", HIERARCHY, ids=[h[3] for h in HIERARCHY])
def test_hierarchy(ms, held, requested, granted, why):
    assert take(ms, *held).acquired
    assert take(ms, *requested, user="requester").acquired == granted, why


def test_a_partition_lock_also_holds_s_on_its_parents(ms):
    got = take(ms, C(SW, "db.t/a=1/b=2"))
    rows = show_locks(ms)
    assert [(r.object_name, r.lock_type, r.component_id) for r in rows] == [
        ("db", SR, 1),
        ("db.t", SR, 2),
        ("db.t/a=1", SR, 3),
        ("db.t/a=1/b=2", SW, 4),
    ]
    assert {r.lock_id for r in rows} == {got.lock_id}
    assert got.components == tuple(
        C(t, o)
        for o, t, _ in (
            ("db", SR, 1),
            ("db.t", SR, 2),
            ("db.t/a=1", SR, 3),
            ("db.t/a=1/b=2", SW, 4),
        )
    )


def test_a_request_is_taken_in_lexicographic_order_one_component_per_object():
    got = expand([C(SR, "db.u/p=2"), C(X, "db.t"), C(SR, "a.t"), C(SR, "db.u/p=1"), C(SW, "db.u")])
    assert [(c.object_name, c.lock_type) for c in got] == [
        ("a", SR),
        ("a.t", SR),
        ("db", SR),
        ("db.t", X),
        ("db.u", SW),
        ("db.u/p=1", SR),
        ("db.u/p=2", SR),
    ]


def test_a_refused_request_takes_nothing_and_names_its_first_conflict(ms):
    take(ms, C(X, "db.u"))
    take(ms, C(X, "db.w"))
    refused = take(ms, C(SR, "db.t"), C(SR, "db.w"), C(SR, "db.u"), user="requester")
    assert not refused.acquired
    assert refused.blocked == C(SR, "db.u")  # db.u sorts before db.w
    assert {r.user for r in show_locks(ms, extended=True)} == {"holder"}


def test_locks_of_one_transaction_never_conflict_with_each_other(ms):
    txn, other = ms.open_transaction(), ms.open_transaction()
    assert take(ms, C(SR, "db.t"), txn_id=txn).acquired
    assert take(ms, C(X, "db.t"), txn_id=txn).acquired  # upgrade within the transaction
    assert not take(ms, C(SR, "db.t"), txn_id=other).acquired
    assert not take(ms, C(SR, "db.t")).acquired


# -- which operation takes which lock ------------------------------------------------------------
@pytest.mark.parametrize(
    "operation, table, partitions, managed, expected",
    [
        (Operation.SELECT, "t", ["p=1"], True, [(SR, "db.t/p=1")]),
        (Operation.SELECT, "t", [], True, [(SR, "db.t")]),
        (Operation.INSERT, "t", ["p=1"], True, [(SW, "db.t/p=1")]),
        (Operation.INSERT, "t", [], True, [(SW, "db.t")]),  # dynamic partitions: the table
        (Operation.INSERT, "t", ["p=1"], False, [(X, "db.t/p=1")]),
        (Operation.INSERT_OVERWRITE, "t", ["p=1"], True, [(X, "db.t/p=1")]),
        (Operation.INSERT_OVERWRITE, "t", [], True, [(X, "db.t")]),
        (Operation.ADD_PARTITION, "t", ["p=1"], True, [(X, "db.t/p=1")]),
        (Operation.DROP_PARTITION, "t", ["p=1", "p=2"], True, [(X, "db.t/p=1"), (X, "db.t/p=2")]),
        (Operation.ALTER_PARTITION, "t", ["p=1"], False, [(X, "db.t/p=1")]),
        (Operation.ALTER_TABLE, "t", [], True, [(X, "db.t")]),
        (Operation.DROP_TABLE, "t", [], False, [(X, "db.t")]),
        (Operation.CREATE_TABLE, None, [], True, [(SR, "db")]),
        (Operation.DROP_DATABASE, None, [], True, [(X, "db")]),
    ],
)
def test_operation_locks_follow_the_documents_table(
    operation, table, partitions, managed, expected
):
    got = lock_components(operation, "db", table, partitions, managed=managed)
    assert got == [C(t, o) for t, o in expected]


def test_operations_that_need_a_table_or_partition_say_so():
    with pytest.raises(ValueError, match="select locks a table: no table given"):
        lock_components(Operation.SELECT, "db")
    with pytest.raises(ValueError, match="add partition on db.t names no partition"):
        lock_components(Operation.ADD_PARTITION, "db", "t")
    with pytest.raises(ValueError, match="names no table"):
        LockComponent(SR, "db", None, "p=1")


def test_an_insert_runs_beside_readers_but_not_beside_another_insert(ms):
    lm = LockManager(ms, settings(retries=0), sleep=lambda s: None)
    lm.acquire_for(Operation.SELECT, "db", "t", ["p=1"])
    insert = lm.acquire_for(Operation.INSERT, "db", "t", ["p=1"], user="bob", host="h1")
    with pytest.raises(LockRefusedError, match="user bob on host h1"):
        lm.acquire_for(Operation.INSERT, "db", "t", ["p=1"])
    with pytest.raises(LockRefusedError):
        lm.acquire_for(Operation.DROP_TABLE, "db", "t")
    insert.release()
    lm.acquire_for(Operation.INSERT, "db", "t", ["p=1"])


# -- retries -----------------------------------------------------------------------------------
def test_a_refused_lock_is_retried_after_the_sleep(ms):
    holder = take(ms, C(X, "db.t"))
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            unlock(ms, holder.lock_id)

    lm = LockManager(ms, settings(retries=5, sleep="2s"), sleep=sleep)
    with lm.acquire([C(X, "db.t")], user="me") as held:
        assert held.lock_id is not None and sleeps == [2.0, 2.0]
        assert [r.lock_id for r in show_locks(ms, table="t", db="db")] == [held.lock_id]
    assert show_locks(ms) == []  # released on exit


def test_after_the_last_retry_the_error_names_the_holder(ms, clock, monkeypatch):
    txn = ms.open_transaction(user="alice", host="box1")
    holder = try_lock(
        ms, [C(X, "db.t/p=1")], txn_id=txn, user="alice", host="box1", agent_info="nightly load"
    )
    sleeps, attempts = [], []

    def counting(*args, **kwargs):
        attempts.append(1)
        return try_lock(*args, **kwargs)

    monkeypatch.setattr(locks, "try_lock", counting)  # what LockManager calls per attempt
    lm = LockManager(ms, settings(retries=3, sleep="500ms"), sleep=sleeps.append)
    with pytest.raises(LockRefusedError) as info:
        lm.acquire([C(SR, "db.t/p=1")])
    assert len(attempts) == 4 and sleeps == [0.5, 0.5, 0.5]
    message = str(info.value)
    assert message.startswith(
        "cannot take SHARED_READ on db.t/p=1: refused 4 times, 0.5s "
        "apart (hive.lock.numretries=3, "
        "hive.lock.sleep.between.retries=0.5s); held by "
    )
    assert (
        f"held by lock {holder.lock_id} (EXCLUSIVE on db.t/p=1, transaction {txn}, user "
        f"alice on host box1, agent nightly load, acquired 2023-11-14T22:13:20Z, last "
        f"heartbeat 2023-11-14T22:13:20Z)"
    ) in message
    assert info.value.holder.lock_id == holder.lock_id
    assert info.value.requested == C(SR, "db.t/p=1")


def test_without_concurrency_locking_is_a_no_op(ms):
    take(ms, C(X, "db.t"))
    trips = CounterDeltas()
    lm = LockManager(ms, settings(concurrency=False), sleep=lambda s: pytest.fail("slept"))
    held = lm.acquire([C(X, "db.t")])
    held.heartbeat()
    held.release()
    assert held.lock_id is None
    assert trips["metastore.round_trips"] == 0
    assert len(show_locks(ms)) == 2  # the other client's db S + table X only


# -- release, heartbeats, expiry ---------------------------------------------------------------
def test_commit_and_abort_release_a_transactions_locks(ms):
    for end in (ms.commit_transaction, ms.abort_transaction):
        txn = ms.open_transaction()
        assert take(ms, C(X, "db.t"), txn_id=txn).acquired
        assert not take(ms, C(SR, "db.t")).acquired
        end(txn)
        assert show_locks(ms) == []


def test_a_transactions_locks_are_not_unlocked_one_by_one(ms):
    txn = ms.open_transaction()
    got = take(ms, C(X, "db.t"), txn_id=txn)
    with pytest.raises(LockError, match=f"lock {got.lock_id} belongs to transaction {txn}"):
        unlock(ms, got.lock_id)
    with pytest.raises(NoSuchLockError, match="lock 999 does not exist"):
        unlock(ms, 999)


def test_a_lock_needs_an_open_transaction(ms):
    txn = ms.open_transaction()
    ms.abort_transaction(txn)
    with pytest.raises(
        TxnAbortedError,
        match=f"transaction {txn} is aborted \\(aborted by its client\\); cannot take locks",
    ):
        take(ms, C(SR, "db.t"), txn_id=txn)
    with pytest.raises(TxnError, match="transaction 999 does not exist"):
        take(ms, C(SR, "db.t"), txn_id=999)


def test_a_lock_without_heartbeat_expires(ms, clock):
    dead = take(ms, C(X, "db.t"))
    clock.advance(TIMEOUT + 1)
    taken = take(ms, C(X, "db.t"), user="next")
    assert taken.acquired
    assert {r.lock_id for r in show_locks(ms)} == {taken.lock_id}
    with pytest.raises(NoSuchLockError, match=f"lock {dead.lock_id} does not exist"):
        ms.heartbeat(lock_id=dead.lock_id)


def test_heartbeats_keep_locks(ms, clock):
    lock = take(ms, C(X, "db.t"))
    txn = ms.open_transaction()
    assert take(ms, C(X, "db.u"), txn_id=txn).acquired
    for _ in range(3):
        clock.advance(TIMEOUT * 0.9)
        ms.heartbeat(lock_id=lock.lock_id)
        ms.heartbeat(txn_id=txn)
    assert not take(ms, C(SR, "db.t")).acquired
    assert not take(ms, C(SR, "db.u")).acquired
    rows = show_locks(ms, extended=True)
    assert {r.last_heartbeat_ms for r in rows} == {int(clock.now * 1000)}


def test_an_expired_transaction_loses_its_locks(ms, clock):
    txn = ms.open_transaction()
    assert take(ms, C(X, "db.t"), txn_id=txn).acquired
    clock.advance(TIMEOUT + 1)
    assert take(ms, C(X, "db.t")).acquired
    assert ms.get_transaction(txn).state == "aborted"


def test_held_lock_heartbeat_and_release(ms, clock):
    lm = LockManager(ms, settings(), sleep=lambda s: None)
    held = lm.acquire([C(X, "db.t")])
    clock.advance(TIMEOUT * 0.9)
    held.heartbeat()
    clock.advance(TIMEOUT * 0.9)
    assert not take(ms, C(X, "db.t")).acquired
    held.release()
    held.release()  # twice is harmless
    assert show_locks(ms) == []


# -- show locks -------------------------------------------------------------------------------
def test_show_locks_filters_and_details(ms, clock):
    txn = ms.open_transaction()
    a = try_lock(ms, [C(SR, "db.t/p=1")], txn_id=txn, user="u1", host="h1", agent_info="ag")
    b = take(ms, C(X, "db.u"))
    c = take(ms, C(SR, "other.t"))
    assert [r.lock_id for r in show_locks(ms)] == [a.lock_id] * 3 + [b.lock_id] * 2 + [
        c.lock_id
    ] * 2
    assert [r.object_name for r in show_locks(ms, "db", "t")] == ["db.t", "db.t/p=1"]
    assert [r.object_name for r in show_locks(ms, "db", "t", "p=1")] == ["db.t/p=1"]
    assert {r.object_name for r in show_locks(ms, "db")} == {"db", "db.t", "db.t/p=1", "db.u"}
    assert show_locks(ms, "db", "nope") == []
    [short] = show_locks(ms, "db", "t", "p=1")
    assert (short.txn_id, short.state, short.lock_type) == (txn, "ACQUIRED", SR)
    assert short.user is None and short.acquired_at_ms is None
    [full] = show_locks(ms, "db", "t", "p=1", extended=True)
    assert (full.user, full.host, full.agent_info) == ("u1", "h1", "ag")
    assert full.acquired_at_ms == full.last_heartbeat_ms == int(clock.now * 1000)
    with pytest.raises(ValueError, match="a table needs its database"):
        show_locks(ms, table="t")


def test_lock_type_letters_are_hives():
    assert [t.value for t in LockType] == ["r", "w", "e"]


# -- two connections racing -------------------------------------------------------------------
def test_two_connections_racing_for_one_exclusive_lock(metastore_url):
    wins = []
    barrier = threading.Barrier(2)
    errors = []

    def contend(name, rounds):
        try:
            with open_ms(metastore_url) as ms:
                for _ in range(rounds):
                    barrier.wait(10)
                    got = try_lock(ms, [C(X, "db.t")], user=name, host="h")
                    barrier.wait(10)  # both attempts are done before either releases
                    if got.acquired:
                        wins.append(got.lock_id)
                        unlock(ms, got.lock_id)
        except Exception as e:  # surfaced by the assertion below
            errors.append(e)

    open_ms(metastore_url).close()  # create the schema once, outside the race
    threads = [threading.Thread(target=contend, args=(n, 10)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(wins) == 10 and len(set(wins)) == 10  # exactly one winner per round


def test_a_lock_outside_a_transaction_keeps_its_own_timeout(metastore_url, clock):
    """The timeout is the taking client's (LOCK_TIMEOUTS), as a transaction's is: a client
    with a short hive.txn.timeout no longer drops a lock whose holder heartbeats under a
    longer one; the lock still expires after its own timeout."""
    with (
        open_ms(metastore_url, clock=clock, txn_timeout=3 * TIMEOUT) as patient,
        open_ms(metastore_url, clock=clock, txn_timeout=TIMEOUT) as hasty,
    ):
        lock = take(patient, C(X, "db.t"))
        clock.advance(2 * TIMEOUT)  # past the hasty client's timeout, within the lock's
        assert hasty.expire_timed_out() == []
        assert not take(hasty, C(SR, "db.t")).acquired
        patient.heartbeat(lock_id=lock.lock_id)
        clock.advance(3 * TIMEOUT)
        assert not take(hasty, C(SR, "db.t")).acquired  # exactly at its timeout: kept
        clock.advance(0.001)
        assert take(hasty, C(SR, "db.t")).acquired  # the hasty client expired it
        with pytest.raises(NoSuchLockError, match=f"lock {lock.lock_id} does not exist"):
            patient.heartbeat(lock_id=lock.lock_id)
        (left,) = hasty.sql.execute(
            "SELECT COUNT(*) FROM LOCK_TIMEOUTS WHERE LT_LOCK_EXT_ID = ?", (lock.lock_id,)
        ).fetchone()
        assert left == 0  # removed with the lock


def test_unlock_removes_the_locks_timeout(ms):
    lock = take(ms, C(X, "db.t"))
    txn = ms.open_transaction()
    assert take(ms, C(X, "db.u"), txn_id=txn).acquired
    rows = ms.sql.execute("SELECT LT_LOCK_EXT_ID, LT_TIMEOUT_MS FROM LOCK_TIMEOUTS").fetchall()
    assert [tuple(r) for r in rows] == [(lock.lock_id, int(TIMEOUT * 1000))]  # not the txn's
    unlock(ms, lock.lock_id)
    assert ms.sql.execute("SELECT COUNT(*) FROM LOCK_TIMEOUTS").fetchone()[0] == 0


def test_a_lock_taken_before_the_upgrade_expires_after_the_expiring_clients_timeout(
    metastore_url, clock
):
    """A version 3 database (no LOCK_TIMEOUTS) holding a lock upgrades in place; that lock
    recorded no timeout, so the expiring client's stands in."""
    from raptorx_py.metastore import schema

    with open_ms(metastore_url, clock=clock, txn_timeout=3 * TIMEOUT) as old:
        lock = take(old, C(X, "db.t"))
        old.sql.execute("DROP TABLE LOCK_TIMEOUTS")
        old.sql.execute("UPDATE VERSION SET SCHEMA_VERSION = 3")
    with open_ms(metastore_url, clock=clock, txn_timeout=TIMEOUT) as new:
        (version,) = new.sql.execute("SELECT SCHEMA_VERSION FROM VERSION").fetchone()
        assert version == schema.SCHEMA_VERSION == 5
        assert not take(new, C(SR, "db.t")).acquired
        clock.advance(TIMEOUT + 1)
        assert take(new, C(SR, "db.t")).acquired
        assert lock.lock_id not in {r.lock_id for r in show_locks(new)}
