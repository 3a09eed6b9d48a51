"""Hive's lock manager on the HIVE_LOCKS table: shared and exclusive, hierarchical, no waits.

Semantics (the Hive documents "Hive Concurrency Model" and Hive 3's ``TxnHandler``):

* Three lock types, Hive 3's: ``SHARED_READ`` (the document's S), ``SHARED_WRITE`` (Hive's
  "semi-shared") and ``EXCLUSIVE`` (the document's X). Compatibility, requested against
  held (``COMPATIBLE``; Hive 3's ``TxnHandler`` jump table, which reduces to the document's
  S/X matrix on S and X)::

                     held:  SHARED_READ  SHARED_WRITE  EXCLUSIVE
        SHARED_READ         yes          yes           no
        SHARED_WRITE        yes          no            no
        EXCLUSIVE           no           no            no

* Lockable objects: a database, a table, a partition (named ``k1=v1/k2=v2`` as Hive names
  partitions). Hierarchy: "whenever a partition is locked in any mode, all its parents are
  locked in S mode": a lock on a partition also takes ``SHARED_READ`` on its table and
  database and on each partition prefix (``k1=v1`` for ``k1=v1/k2=v2``); a lock on a table
  also takes ``SHARED_READ`` on its database. Conflicts are then checked object by object,
  so an EXCLUSIVE table lock (drop table) and any lock on one of its partitions exclude each
  other through the table row.
* A request is all or nothing: its components (after adding parents, one per object, the
  strongest type kept) are sorted lexicographically by (database, table, partition),
  checked against every held lock and inserted in ONE write transaction. A refused request
  leaves nothing behind and never waits inside the database; ``LockManager`` retries it
  after ``hive.lock.sleep.between.retries``, at most ``hive.lock.numretries`` times, then
  raises ``LockRefusedError`` naming the holder. (The document's deadlock avoidance is
  the lexicographic order; all-or-nothing acquisition also gives it.)
* Locks of one transaction never conflict with each other (Hive's rule). A transaction's
  locks are released by its commit or abort and live as long as it heartbeats; a lock taken
  outside a transaction is released by ``unlock`` and expires after its last heartbeat by
  its own timeout: the ``hive.txn.timeout`` of the client that took it, recorded with it
  (LOCK_TIMEOUTS), never the expiring client's (see ``transactions.expire_timed_out``).
* ``hive.support.concurrency=false`` makes ``LockManager`` a no-op.

Which operation takes which lock (``lock_components``) follows the document's table
(reads S on the table and partitions read; ALTER TABLE, DROP TABLE, INSERT OVERWRITE X on the
table or partition; ADD/DROP/TOUCH PARTITION S on the table and X on the partition), with
Hive 3's types for transactional (managed, insert-only) tables: an INSERT into a managed
table takes SHARED_WRITE, not X: readers of earlier snapshots keep reading (SHARED_READ and
SHARED_WRITE are compatible; the new delta directory is invisible to them), while two
appenders of one partition are serialised because each rewrites the partition's metadata
(statistics, write id). An INSERT into an external table takes X, as in the document (its
readers have no snapshot to protect them), and so does Hive 3 in its default strict mode.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from raptorx_py.config.settings import Settings
from raptorx_py.errors import LockError, LockRefusedError, NoSuchLockError
from raptorx_py.metastore.sql_session import SqlMetastore
from raptorx_py.metastore.transactions import (
    default_host,
    default_user,
    expire_timed_out,
    require_open,
)
from raptorx_py.metastore.transactions import (
    heartbeat as send_heartbeat,
)


class LockType(Enum):
    """Hive's lock types; the values are HL_LOCK_TYPE's letters."""

    SHARED_READ = "r"
    SHARED_WRITE = "w"
    EXCLUSIVE = "e"


SR, SW, X = LockType.SHARED_READ, LockType.SHARED_WRITE, LockType.EXCLUSIVE

#: (requested, held) -> whether both may be held on one object at once.
COMPATIBLE: dict[tuple[LockType, LockType], bool] = {
    (SR, SR): True,
    (SR, SW): True,
    (SR, X): False,
    (SW, SR): True,
    (SW, SW): False,
    (SW, X): False,
    (X, SR): False,
    (X, SW): False,
    (X, X): False,
}

_STRENGTH = {SR: 0, SW: 1, X: 2}


def compatible(requested: LockType, held: LockType) -> bool:
    return COMPATIBLE[(requested, held)]


class LockedObject:
    """A database, a table of it, or a partition of that table, as a lock names it (mixed
    into the lock dataclasses, whose fields ``db``, ``table``, ``partition`` it reads)."""

    db: str
    table: str | None
    partition: str | None

    @property
    def key(self) -> tuple[str, str, str]:
        """The object, comparable: the lexicographic acquisition order sorts on this."""
        return (self.db, self.table or "", self.partition or "")

    @property
    def object_name(self) -> str:
        """``db``, ``db.table`` or ``db.table/k=v``."""
        name = self.db if self.table is None else f"{self.db}.{self.table}"
        return name if self.partition is None else f"{name}/{self.partition}"


@dataclass(frozen=True)
class LockComponent(LockedObject):
    """One object to lock in one mode. ``partition`` is Hive's partition name
    (``k1=v1/k2=v2``, values escaped as in directory names) and needs ``table``."""

    lock_type: LockType
    db: str
    table: str | None = None
    partition: str | None = None

    def __post_init__(self) -> None:
        if self.partition is not None and self.table is None:
            raise ValueError(f"partition lock {self.partition} in {self.db} names no table")
        if not isinstance(self.lock_type, LockType):
            raise ValueError(f"not a lock type: {self.lock_type!r}")

    def parents(self) -> list[LockComponent]:
        """SHARED_READ on every object above this one (the hierarchy rule)."""
        if self.table is None:
            return []
        out = [LockComponent(SR, self.db)]
        if self.partition is not None:
            out.append(LockComponent(SR, self.db, self.table))
            parts = self.partition.split("/")
            out += [
                LockComponent(SR, self.db, self.table, "/".join(parts[:i]))
                for i in range(1, len(parts))
            ]
        return out


def expand(components: Iterable[LockComponent]) -> list[LockComponent]:
    """Add the parents of every component, keep one component per object (the strongest
    type asked for it), and sort them in acquisition (lexicographic) order."""
    strongest: dict[tuple[str, str, str], LockComponent] = {}
    for c in components:
        for item in (c, *c.parents()):
            have = strongest.get(item.key)
            if have is None or _STRENGTH[item.lock_type] > _STRENGTH[have.lock_type]:
                strongest[item.key] = item
    return [strongest[k] for k in sorted(strongest)]


class Operation(Enum):
    """What a statement does to an object, for ``lock_components``."""

    SELECT = "select"
    INSERT = "insert"
    INSERT_OVERWRITE = "insert overwrite"
    ADD_PARTITION = "add partition"
    DROP_PARTITION = "drop partition"
    ALTER_PARTITION = "alter partition"  # touch, concatenate, set location/properties
    ALTER_TABLE = "alter table"  # rename, add/replace/change columns, set properties
    DROP_TABLE = "drop table"
    CREATE_TABLE = "create table"
    DROP_DATABASE = "drop database"


def lock_components(
    operation: Operation,
    db: str,
    table: str | None = None,
    partitions: Sequence[str] = (),
    *,
    managed: bool = True,
) -> list[LockComponent]:
    """The explicit lock components of ``operation`` (the module docstring's table);
    ``try_lock`` adds the parents. ``partitions`` are the partition names touched; none
    means the whole table (an unpartitioned table, or partitions not known in advance, as
    with dynamic partitioning, where the document locks the table)."""
    if operation in (Operation.CREATE_TABLE, Operation.DROP_DATABASE):
        # CREATE TABLE: S on the database, so it is not dropped meanwhile (Hive: DDL_SHARED).
        return [LockComponent(SR if operation is Operation.CREATE_TABLE else X, db)]
    if table is None:
        raise ValueError(f"{operation.value} locks a table: no table given")
    if operation in (Operation.ALTER_TABLE, Operation.DROP_TABLE):
        return [LockComponent(X, db, table)]
    if operation in (Operation.ADD_PARTITION, Operation.DROP_PARTITION, Operation.ALTER_PARTITION):
        if not partitions:
            raise ValueError(f"{operation.value} on {db}.{table} names no partition")
        lock_type = X
    elif operation is Operation.SELECT:
        lock_type = SR
    elif operation is Operation.INSERT:
        lock_type = SW if managed else X
    else:  # INSERT_OVERWRITE
        lock_type = X
    if not partitions:
        return [LockComponent(lock_type, db, table)]
    return [LockComponent(lock_type, db, table, p) for p in partitions]


@dataclass(frozen=True)
class LockInfo(LockedObject):
    """One held lock component, as ``show_locks`` lists it. The detail fields (``user``
    onwards) are ``None`` unless asked for with ``extended``."""

    lock_id: int  # HL_LOCK_EXT_ID: the request
    component_id: int  # HL_LOCK_INT_ID: its position in acquisition order, from 1
    txn_id: int | None
    db: str
    table: str | None
    partition: str | None
    state: str  # always "ACQUIRED": refused requests are not stored
    lock_type: LockType
    acquired_at_ms: int | None = None
    last_heartbeat_ms: int | None = None
    user: str | None = None
    host: str | None = None
    agent_info: str | None = None

    def describe(self) -> str:
        """'lock 7 (EXCLUSIVE on db.t/p=1, transaction 12, user bob on host h, acquired
        2024-05-01T10:00:00Z, last heartbeat ...)'"""
        owner = f"transaction {self.txn_id}" if self.txn_id is not None else "no transaction"
        who = f"user {self.user or '?'} on host {self.host or '?'}"
        agent = f", agent {self.agent_info}" if self.agent_info else ""
        return (
            f"lock {self.lock_id} ({self.lock_type.name} on {self.object_name}, {owner}, "
            f"{who}{agent}, acquired {format_ms(self.acquired_at_ms)}, last heartbeat "
            f"{format_ms(self.last_heartbeat_ms)})"
        )


def format_ms(ms: int | None) -> str:
    if ms is None:
        return "?"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class LockResponse:
    """What one attempt got: ``lock_id`` when acquired, else the first conflict (in
    acquisition order): the component asked for and the lock holding its object."""

    lock_id: int | None
    components: tuple[LockComponent, ...]
    blocked: LockComponent | None = None
    holder: LockInfo | None = None

    @property
    def acquired(self) -> bool:
        return self.lock_id is not None


_LOCK_COLUMNS = (
    "HL_LOCK_EXT_ID, HL_LOCK_INT_ID, HL_TXNID, HL_DB, HL_TABLE, HL_PARTITION, "
    "HL_LOCK_STATE, HL_LOCK_TYPE, HL_ACQUIRED_AT, HL_LAST_HEARTBEAT, HL_USER, "
    "HL_HOST, HL_AGENT_INFO"
)


def _lock_info(row, extended: bool = True) -> LockInfo:
    ext, intid, txn, db, tbl, part, _state, ltype, acquired, beat, user, host, agent = row
    info = LockInfo(
        ext,
        intid,
        txn,
        db,
        tbl,
        part,
        "ACQUIRED",
        LockType(ltype),
        acquired,
        beat,
        user,
        host,
        agent,
    )
    if not extended:
        info = replace(
            info, acquired_at_ms=None, last_heartbeat_ms=None, user=None, host=None, agent_info=None
        )
    return info


# -- the metastore side: one attempt, one write transaction ---------------------------------
def try_lock(
    ms: SqlMetastore,
    components: Iterable[LockComponent],
    *,
    txn_id: int | None = None,
    user: str | None = None,
    host: str | None = None,
    agent_info: str | None = None,
) -> LockResponse:
    """Check the request against every held lock and take all of it, or nothing."""
    wanted = tuple(expand(components))
    if not wanted:
        raise ValueError("a lock request needs at least one component")
    user = default_user() if user is None else user
    host = default_host() if host is None else host
    dbs = sorted({c.db for c in wanted})
    with ms.sql.transaction():
        expire_timed_out(ms)
        error = require_open(ms, txn_id, "take locks") if txn_id is not None else None
        if error is None:
            held = [
                _lock_info(r)
                for r in ms.sql.execute(
                    f"SELECT {_LOCK_COLUMNS} FROM HIVE_LOCKS WHERE HL_DB IN "
                    f"({', '.join('?' * len(dbs))}) ORDER BY HL_LOCK_EXT_ID, HL_LOCK_INT_ID",
                    dbs,
                ).fetchall()
            ]
            conflict = _first_conflict(wanted, held, txn_id)
            if conflict is not None:
                return LockResponse(None, wanted, *conflict)
            (lock_id,) = ms.sql.execute(
                "UPDATE NEXT_LOCK_ID SET NL_NEXT = NL_NEXT + 1 WHERE NL_ID = 1 "
                "RETURNING NL_NEXT - 1"
            ).fetchone()
            now = ms.sql.now_ms()
            ms.sql.executemany(
                f"INSERT INTO HIVE_LOCKS ({_LOCK_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        lock_id,
                        i,
                        txn_id,
                        c.db,
                        c.table,
                        c.partition,
                        "a",
                        c.lock_type.value,
                        now,
                        now,
                        user,
                        host,
                        agent_info,
                    )
                    for i, c in enumerate(wanted, 1)
                ],
            )
            if txn_id is None:  # a transaction's locks live and die with it
                ms.sql.execute(
                    "INSERT INTO LOCK_TIMEOUTS (LT_LOCK_EXT_ID, LT_TIMEOUT_MS) VALUES (?, ?)",
                    (lock_id, int(ms.txn_timeout * 1000)),
                )
            return LockResponse(lock_id, wanted)
    raise error


def _first_conflict(
    wanted: Sequence[LockComponent], held: Sequence[LockInfo], txn_id: int | None
) -> tuple[LockComponent, LockInfo] | None:
    by_object: dict[tuple[str, str, str], list[LockInfo]] = {}
    for h in held:
        by_object.setdefault(h.key, []).append(h)
    for c in wanted:  # acquisition order: the first blocked object is reported
        for h in by_object.get(c.key, ()):
            if txn_id is not None and h.txn_id == txn_id:
                continue  # a transaction never conflicts with itself
            if not compatible(c.lock_type, h.lock_type):
                return c, h
    return None


def unlock(ms: SqlMetastore, lock_id: int) -> None:
    """Release a lock request taken outside a transaction (a transaction's locks go with
    its commit or abort, as in Hive)."""
    with ms.sql.transaction():
        rows = ms.sql.execute(
            "SELECT HL_TXNID FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID = ?", (lock_id,)
        ).fetchall()
        if rows and rows[0][0] is None:
            ms.sql.execute("DELETE FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID = ?", (lock_id,))
            ms.sql.execute("DELETE FROM LOCK_TIMEOUTS WHERE LT_LOCK_EXT_ID = ?", (lock_id,))
            return
    if not rows:
        raise NoSuchLockError(
            f"lock {lock_id} does not exist (released, or expired after no "
            f"heartbeat for its own timeout)"
        )
    raise LockError(
        f"lock {lock_id} belongs to transaction {rows[0][0]}: it is released when "
        f"that transaction commits or aborts"
    )


def show_locks(
    ms: SqlMetastore,
    db: str | None = None,
    table: str | None = None,
    partition: str | None = None,
    extended: bool = False,
) -> list[LockInfo]:
    """Held locks, oldest request first: all, or those on ``db`` (and its tables and
    partitions), on ``db.table`` (and its partitions), or on one partition. ``extended``
    adds the details (times, user, host, agent)."""
    if table is not None and db is None or partition is not None and table is None:
        raise ValueError("show_locks: a table needs its database and a partition its table")
    where, params = [], []
    for column, value in (("HL_DB", db), ("HL_TABLE", table), ("HL_PARTITION", partition)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = f"SELECT {_LOCK_COLUMNS} FROM HIVE_LOCKS"
    if where:
        sql += " WHERE " + " AND ".join(where)
    with ms.sql.lock:
        rows = ms.sql.execute(sql + " ORDER BY HL_LOCK_EXT_ID, HL_LOCK_INT_ID", params).fetchall()
    return [_lock_info(r, extended) for r in rows]


# -- the client side: retries, sleeps, the switch ---------------------------------------------
class HeldLock:
    """A granted lock request (``lock_id`` is ``None`` when locking is off). As a context
    manager it releases a lock taken outside a transaction on exit; a transaction's locks
    are released by its commit or abort."""

    def __init__(
        self,
        manager: LockManager,
        lock_id: int | None,
        txn_id: int | None,
        components: tuple[LockComponent, ...],
    ):
        self.manager, self.lock_id, self.txn_id = manager, lock_id, txn_id
        self.components = components

    def heartbeat(self) -> None:
        if self.lock_id is not None:
            send_heartbeat(
                self.manager.metastore,
                txn_id=self.txn_id,
                lock_id=None if self.txn_id else self.lock_id,
            )

    def release(self) -> None:
        if self.lock_id is not None and self.txn_id is None:
            unlock(self.manager.metastore, self.lock_id)
            self.lock_id = None

    def __enter__(self) -> HeldLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"HeldLock(lock_id={self.lock_id}, txn_id={self.txn_id})"


class LockManager:
    """Takes lock requests for a client, as Hive's ``DbLockManager`` does for a session.

    ``acquire`` makes one attempt (``try_lock``); a refused attempt is retried
    after ``settings.lock_sleep_between_retries`` seconds (through ``sleep``, injectable),
    at most ``settings.lock_numretries`` times, so at most ``numretries + 1`` attempts;
    then ``LockRefusedError`` names the holder. With ``settings.support_concurrency``
    false nothing is locked and nothing is sent to the metastore.
    """

    def __init__(
        self,
        metastore: SqlMetastore,
        settings: Settings,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.metastore, self.settings, self.sleep = metastore, settings, sleep

    def acquire(
        self,
        components: Iterable[LockComponent],
        *,
        txn_id: int | None = None,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> HeldLock:
        components = tuple(components)
        if not self.settings.support_concurrency:
            return HeldLock(self, None, txn_id, components)
        retries = self.settings.lock_numretries
        pause = self.settings.lock_sleep_between_retries
        for attempt in range(retries + 1):
            if attempt:
                self.sleep(pause)
            response = try_lock(
                self.metastore,
                components,
                txn_id=txn_id,
                user=user,
                host=host,
                agent_info=agent_info,
            )
            if response.acquired:
                return HeldLock(self, response.lock_id, txn_id, response.components)
        blocked, holder = response.blocked, response.holder
        # try_lock's contract: a refused response names what blocked it and the holder.
        assert blocked is not None and holder is not None
        raise LockRefusedError(
            f"cannot take {blocked.lock_type.name} on {blocked.object_name}: refused "
            f"{retries + 1} times, {pause:g}s apart (hive.lock.numretries={retries}, "
            f"hive.lock.sleep.between.retries={pause:g}s); held by {holder.describe()}",
            blocked,
            holder,
        )

    def acquire_for(
        self,
        operation: Operation,
        db: str,
        table: str | None = None,
        partitions: Sequence[str] = (),
        *,
        managed: bool = True,
        txn_id: int | None = None,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> HeldLock:
        """``acquire`` the locks ``operation`` needs (``lock_components``)."""
        return self.acquire(
            lock_components(operation, db, table, partitions, managed=managed),
            txn_id=txn_id,
            user=user,
            host=host,
            agent_info=agent_info,
        )
