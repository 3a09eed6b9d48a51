"""Transactions and table write ids (HMS's TXNS, TXN_TO_WRITE_ID, NEXT_WRITE_ID).

Contract:
- A transaction is opened, then committed or aborted, exactly once. Each state change is one
  metastore write transaction that also appends its notification event (OPEN_TXN,
  COMMIT_TXN, ABORT_TXN, ALLOC_WRITE_ID) and, on commit or abort, releases the
  transaction's locks.
- ``allocate_write_id`` hands out per-table write ids 1, 2, 3 ... without gaps or
  duplicates, across processes and machines (the NEXT_WRITE_ID row is upserted in the
  metastore's serialised write transaction). A transaction asking again for the same table
  gets the same write id (Hive: one write id per table per transaction). Only managed tables
  have write ids.
- ``get_table_snapshots`` / ``get_valid_write_ids`` read the snapshot of any number of tables
  in ONE round trip (one SELECT): the call a warm query makes instead of reading the
  metastore. It also returns each table's id and type, which the versioned cache checks
  (the synchronized-cache document: "it can be combined with HMS request for writeid").
- Expiry: an open transaction whose client has not heartbeated for the transaction's OWN
  timeout is aborted. The timeout belongs to the transaction, as in Hive: it is the
  ``txn_timeout`` (``hive.txn.timeout``) of the client that opened it, recorded when it opens
  (TXN_TIMEOUTS), so a client with a short timeout never aborts another client's live
  transaction. The ABORT_TXN event records why and by whom (user, host, pid of the expiring
  client, the timeout, the last heartbeat), and a later heartbeat, commit or write-id request
  of that transaction fails with that reason. A lock taken outside a transaction has its own
  timeout too (LOCK_TIMEOUTS, the ``txn_timeout`` of the client that took it) and is removed
  after that long without a heartbeat (one taken before schema version 4 recorded none: the
  expiring client's ``txn_timeout`` stands in). ``expire_timed_out`` does it, and every
  write of this module and of ``locks`` runs it first, in the same write transaction, so
  nothing needs a background thread and a dead client's transaction cannot commit late.
  Times come from the Metastore's injected ``clock``.

Limits: committed and aborted transactions are kept forever (no compactor or cleaner), so the
exceptions of a snapshot include every aborted write id ever; reads that take no write
transaction (``get_table_snapshots``) do not expire anything, so a dead client's write id
shows as open (invisible either way) until the next write.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from raptorx_py.errors import MetastoreError, NoSuchLockError
from raptorx_py.hive.model import EXTERNAL_TABLE, Table
from raptorx_py.hive.write_ids import ValidWriteIdList
from raptorx_py.metastore.catalog import TableSnapshot
from raptorx_py.metastore.notifications import append_event
from raptorx_py.metastore.sql_session import SqlMetastore
from raptorx_py.names import parse_table_name

OPEN, COMMITTED, ABORTED = "o", "c", "a"
STATE_NAMES = {OPEN: "open", COMMITTED: "committed", ABORTED: "aborted"}


class TxnError(MetastoreError):
    """A transaction cannot do what was asked in its current state (names the txn)."""


class NoSuchTxnError(TxnError, LookupError):
    """No transaction has that id."""


class TxnAbortedError(TxnError):
    """The transaction was aborted (by its client, or because it stopped heartbeating)."""


@dataclass(frozen=True)
class TxnInfo:
    txn_id: int
    state: str  # "open" | "committed" | "aborted"
    started_ms: int
    last_heartbeat_ms: int
    user: str | None
    host: str | None
    agent_info: str | None
    timeout_ms: int | None = None  # its own timeout (None: opened before schema version 3)


def default_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (some containers)
        return None


def default_host() -> str:
    return socket.gethostname()


def txn_label(txn_id: int) -> str:
    return f"transaction {txn_id}"


# -- expiry ------------------------------------------------------------------------------
def expire_timed_out(ms: SqlMetastore) -> list[int]:
    """Inside an open write transaction: abort every open transaction that has not
    heartbeated for ``ms.txn_timeout`` seconds and drop every lock taken outside a
    transaction that has not either. Returns the aborted transaction ids.

    A transaction's timeout is its own (TXN_TIMEOUTS), and so is a lock's taken outside a
    transaction (LOCK_TIMEOUTS); ``ms.txn_timeout`` only stands in for one that recorded
    none (taken before the schema recorded them)."""
    now = ms.sql.now_ms()
    default_ms = int(ms.txn_timeout * 1000)
    expired = ms.sql.execute(
        "SELECT t.TXN_ID, t.TXN_LAST_HEARTBEAT, COALESCE(o.TT_TIMEOUT_MS, ?) FROM TXNS t "
        "LEFT JOIN TXN_TIMEOUTS o ON o.TT_TXNID = t.TXN_ID WHERE t.TXN_STATE = ? "
        "AND t.TXN_LAST_HEARTBEAT + COALESCE(o.TT_TIMEOUT_MS, ?) < ? ORDER BY t.TXN_ID",
        (default_ms, OPEN, default_ms, now),
    ).fetchall()
    who = f"{default_user() or '?'}@{default_host()} (pid {os.getpid()})"
    for txn_id, last, timeout in expired:
        _abort(
            ms,
            txn_id,
            f"expired by {who}: no heartbeat for {(now - last) / 1000:g}s, "
            f"more than its own timeout of {timeout / 1000:g}s "
            f"(the hive.txn.timeout of the client that opened it)",
        )
    # All rows of one request share their heartbeat (heartbeat() updates them together).
    dead_locks = [
        (r[0],)
        for r in ms.sql.execute(
            "SELECT DISTINCT l.HL_LOCK_EXT_ID FROM HIVE_LOCKS l LEFT JOIN LOCK_TIMEOUTS o "
            "ON o.LT_LOCK_EXT_ID = l.HL_LOCK_EXT_ID WHERE l.HL_TXNID IS NULL "
            "AND l.HL_LAST_HEARTBEAT + COALESCE(o.LT_TIMEOUT_MS, ?) < ?",
            (default_ms, now),
        ).fetchall()
    ]
    if dead_locks:
        ms.sql.executemany("DELETE FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID = ?", dead_locks)
        ms.sql.executemany("DELETE FROM LOCK_TIMEOUTS WHERE LT_LOCK_EXT_ID = ?", dead_locks)
    return [r[0] for r in expired]


def _abort(ms: SqlMetastore, txn_id: int, reason: str) -> None:
    write_ids = _write_ids_of(ms, txn_id)
    ms.sql.execute("UPDATE TXNS SET TXN_STATE = ? WHERE TXN_ID = ?", (ABORTED, txn_id))
    ms.sql.execute("DELETE FROM HIVE_LOCKS WHERE HL_TXNID = ?", (txn_id,))
    append_event(
        ms,
        "ABORT_TXN",
        txn_id=txn_id,
        message={"txnId": txn_id, "writeIds": write_ids, "reason": reason},
    )


def _write_ids_of(ms: SqlMetastore, txn_id: int) -> list[dict]:
    return [
        {"db": db, "table": tbl, "writeId": wid}
        for db, tbl, wid in ms.sql.execute(
            "SELECT T2W_DATABASE, T2W_TABLE, T2W_WRITEID FROM TXN_TO_WRITE_ID WHERE T2W_TXNID = ? "
            "ORDER BY T2W_DATABASE, T2W_TABLE",
            (txn_id,),
        ).fetchall()
    ]


def _state(ms: SqlMetastore, txn_id: int) -> str | None:
    row = ms.sql.execute("SELECT TXN_STATE FROM TXNS WHERE TXN_ID = ?", (txn_id,)).fetchone()
    return None if row is None else row[0]


def state_error(txn_id: int, state: str | None, action: str) -> TxnError:
    """The error for doing ``action`` on a transaction that is not open."""
    if state is None:
        return NoSuchTxnError(f"{txn_label(txn_id)} does not exist; cannot {action}")
    if state == ABORTED:
        return TxnAbortedError(f"{txn_label(txn_id)} is aborted; cannot {action}")
    return TxnError(f"{txn_label(txn_id)} is already {STATE_NAMES[state]}; cannot {action}")


def require_open(ms: SqlMetastore, txn_id: int, action: str) -> TxnError | None:
    """Inside a write transaction: ``None`` when ``txn_id`` is open, else the error to raise
    *after* the write transaction commits (so an expiry done in it is kept). An aborted
    transaction's error says who aborted it and why (its ABORT_TXN event)."""
    state = _state(ms, txn_id)
    if state == OPEN:
        return None
    if state == ABORTED:
        reason = abort_reason(ms, txn_id)
        if reason:
            return TxnAbortedError(f"{txn_label(txn_id)} is aborted ({reason}); cannot {action}")
    return state_error(txn_id, state, action)


def abort_reason(ms: SqlMetastore, txn_id: int) -> str | None:
    """Why ``txn_id`` was aborted, as its ABORT_TXN event recorded it."""
    row = ms.sql.execute(
        "SELECT MESSAGE FROM NOTIFICATION_LOG WHERE EVENT_TYPE = 'ABORT_TXN' "
        "AND TXN_ID = ? ORDER BY EVENT_ID DESC LIMIT 1",
        (txn_id,),
    ).fetchone()
    try:
        return json.loads(row[0]).get("reason") if row else None
    except ValueError:
        return None


# -- the transaction lifecycle ---------------------------------------------------------------
def open_transaction(
    ms: SqlMetastore,
    user: str | None = None,
    host: str | None = None,
    agent_info: str | None = None,
) -> int:
    user = default_user() if user is None else user
    host = default_host() if host is None else host
    with ms.sql.transaction():
        expire_timed_out(ms)
        now = ms.sql.now_ms()
        txn_id = ms.sql.insert(
            "INSERT INTO TXNS (TXN_STATE, TXN_STARTED, TXN_LAST_HEARTBEAT, TXN_USER, TXN_HOST, "
            "TXN_AGENT_INFO) VALUES (?, ?, ?, ?, ?, ?)",
            (OPEN, now, now, user, host, agent_info),
            "TXN_ID",
        )
        ms.sql.execute(
            "INSERT INTO TXN_TIMEOUTS (TT_TXNID, TT_TIMEOUT_MS) VALUES (?, ?)",
            (txn_id, int(ms.txn_timeout * 1000)),
        )
        append_event(
            ms, "OPEN_TXN", txn_id=txn_id, message={"txnId": txn_id, "user": user, "host": host}
        )
    return txn_id


def commit_transaction(ms: SqlMetastore, txn_id: int) -> None:
    """Commit: its write ids become visible to snapshots taken from now on; its locks go."""
    with ms.sql.transaction():
        expire_timed_out(ms)
        error = require_open(ms, txn_id, "commit")
        if error is None:
            write_ids = _write_ids_of(ms, txn_id)
            ms.sql.execute("UPDATE TXNS SET TXN_STATE = ? WHERE TXN_ID = ?", (COMMITTED, txn_id))
            ms.sql.execute("DELETE FROM HIVE_LOCKS WHERE HL_TXNID = ?", (txn_id,))
            append_event(
                ms, "COMMIT_TXN", txn_id=txn_id, message={"txnId": txn_id, "writeIds": write_ids}
            )
    if error is not None:
        raise error


def abort_transaction(ms: SqlMetastore, txn_id: int, reason: str = "aborted by its client") -> None:
    """Abort: its write ids stay invisible forever; its locks go. Aborting an aborted
    transaction does nothing (so ``except: abort`` after a failed commit is safe)."""
    with ms.sql.transaction():
        expire_timed_out(ms)
        state = _state(ms, txn_id)
        error = None
        if state == OPEN:
            _abort(ms, txn_id, reason)
        elif state != ABORTED:
            error = state_error(txn_id, state, "abort")
    if error is not None:
        raise error


def heartbeat(ms: SqlMetastore, txn_id: int | None = None, lock_id: int | None = None) -> None:
    """Tell the metastore the client of ``txn_id`` (and its locks) and/or of the lock
    request ``lock_id`` is alive. Fails for a transaction that is no longer open (it may
    have just been expired) and for a lock that no longer exists."""
    if txn_id is None and lock_id is None:
        raise ValueError("heartbeat needs a txn_id or a lock_id")
    with ms.sql.transaction():
        expire_timed_out(ms)
        now = ms.sql.now_ms()
        error: MetastoreError | None = None
        if txn_id is not None:
            error = require_open(ms, txn_id, "heartbeat")
            if error is None:
                ms.sql.execute(
                    "UPDATE TXNS SET TXN_LAST_HEARTBEAT = ? WHERE TXN_ID = ?", (now, txn_id)
                )
                ms.sql.execute(
                    "UPDATE HIVE_LOCKS SET HL_LAST_HEARTBEAT = ? WHERE HL_TXNID = ?", (now, txn_id)
                )
        if lock_id is not None and error is None:
            found = ms.sql.execute(
                "UPDATE HIVE_LOCKS SET HL_LAST_HEARTBEAT = ? WHERE HL_LOCK_EXT_ID = ? "
                "RETURNING HL_LOCK_INT_ID",
                (now, lock_id),
            ).fetchall()
            if not found:
                error = NoSuchLockError(
                    f"lock {lock_id} does not exist (released, or expired "
                    f"after no heartbeat for its own timeout)"
                )
    if error is not None:
        raise error


def get_transaction(ms: SqlMetastore, txn_id: int) -> TxnInfo:
    with ms.sql.lock:
        row = ms.sql.execute(
            "SELECT TXN_ID, TXN_STATE, TXN_STARTED, TXN_LAST_HEARTBEAT, TXN_USER, TXN_HOST, "
            "TXN_AGENT_INFO, o.TT_TIMEOUT_MS FROM TXNS LEFT JOIN TXN_TIMEOUTS o "
            "ON o.TT_TXNID = TXN_ID WHERE TXN_ID = ?",
            (txn_id,),
        ).fetchone()
    if row is None:
        raise NoSuchTxnError(f"{txn_label(txn_id)} does not exist")
    return TxnInfo(row[0], STATE_NAMES[row[1]], *row[2:])


# -- write ids ---------------------------------------------------------------------------
def allocate_write_id(ms: SqlMetastore, txn_id: int, database: str, table: str) -> int:
    """The write id of ``database.table`` for ``txn_id``: a new one (the table's next), or
    the one this transaction already has for that table."""
    with ms.sql.transaction():
        expire_timed_out(ms)
        error = require_open(ms, txn_id, f"allocate a write id for {database}.{table}")
        if error is None:
            return _allocate(ms, txn_id, database, table)
    raise error


def _allocate(ms: SqlMetastore, txn_id: int, database: str, table: str) -> int:
    row = ms.sql.execute(
        "SELECT t.TBL_ID, t.TBL_TYPE FROM TBLS t JOIN DBS d ON d.DB_ID = t.DB_ID "
        "WHERE d.NAME = ? AND t.TBL_NAME = ?",
        (database, table),
    ).fetchone()
    if row is None:
        ms.get_table(database, table)  # raises NoSuchObjectError naming what exists
    tbl_id, tbl_type = row
    if tbl_type == EXTERNAL_TABLE:
        raise MetastoreError(
            f"{database}.{table} is an EXTERNAL table: write ids exist for managed tables only"
        )
    row = ms.sql.execute(
        "SELECT T2W_WRITEID FROM TXN_TO_WRITE_ID WHERE T2W_TXNID = ? AND T2W_DATABASE = ? "
        "AND T2W_TABLE = ?",
        (txn_id, database, table),
    ).fetchone()
    if row is not None:
        return row[0]
    (write_id,) = ms.sql.execute(
        "INSERT INTO NEXT_WRITE_ID (NWI_DATABASE, NWI_TABLE, NWI_NEXT) VALUES (?, ?, 2) "
        "ON CONFLICT (NWI_DATABASE, NWI_TABLE) DO UPDATE SET NWI_NEXT = NEXT_WRITE_ID.NWI_NEXT + 1 "
        "RETURNING NWI_NEXT - 1",
        (database, table),
    ).fetchone()
    ms.sql.execute(
        "INSERT INTO TXN_TO_WRITE_ID (T2W_TXNID, T2W_DATABASE, T2W_TABLE, T2W_WRITEID) "
        "VALUES (?, ?, ?, ?)",
        (txn_id, database, table, write_id),
    )
    append_event(
        ms,
        "ALLOC_WRITE_ID",
        db=database,
        table=table,
        txn_id=txn_id,
        write_id=write_id,
        message={"txnId": txn_id, "writeId": write_id, "tableId": tbl_id},
    )
    return write_id


def txn_of_write_id(ms: SqlMetastore, database: str, table: str, write_id: int) -> int:
    """Inside a write transaction: the open transaction that owns ``write_id`` of the table;
    raises ``TxnError`` when the write id was not allocated or its transaction has ended
    (writing metadata under a finished transaction's write id is a bug)."""
    row = ms.sql.execute(
        "SELECT w.T2W_TXNID, x.TXN_STATE FROM TXN_TO_WRITE_ID w JOIN TXNS x "
        "ON x.TXN_ID = w.T2W_TXNID WHERE w.T2W_DATABASE = ? AND w.T2W_TABLE = ? "
        "AND w.T2W_WRITEID = ?",
        (database, table, write_id),
    ).fetchone()
    if row is None:
        raise TxnError(f"write id {write_id} was never allocated for {database}.{table}")
    if row[1] != OPEN:
        raise state_error(row[0], row[1], f"write {database}.{table} under write id {write_id}")
    return row[0]


def check_write_id(ms: SqlMetastore, table: Table, write_id: int | None) -> int | None:
    """Inside a write transaction: the open transaction owning ``write_id`` of ``table``
    (None without a write id). An EXTERNAL table has no write ids; see ``txn_of_write_id``
    for the rest."""
    if write_id is None:
        return None
    if table.table_type == EXTERNAL_TABLE:
        raise MetastoreError(
            f"{table.qualified_name} is an EXTERNAL table: it has no "
            f"write ids (got write id {write_id})"
        )
    return txn_of_write_id(ms, table.database, table.name, write_id)


# -- snapshots ---------------------------------------------------------------------------
def get_table_snapshots(
    ms: SqlMetastore, names: Iterable[str], txn_id: int | None = None
) -> dict[str, TableSnapshot]:
    """Id, type and ValidWriteIdList of each ``db.table`` in ``names``, in one round trip.

    With ``txn_id``, that transaction's own write ids count as committed (read your own
    writes, as the synchronized-cache document requires). Raises ``NoSuchObjectError``
    for a name that does not exist (after the round trip, naming what does).
    """
    # A snapshot names its tables in full: a bare name is an error, not the default database
    # (a ValidWriteIdList is keyed by ``db.table``, as in Hive).
    wanted = {name: parse_table_name(name, default_database=None) for name in dict.fromkeys(names)}
    if not wanted:
        return {}
    where = " OR ".join(["(d.NAME = ? AND t.TBL_NAME = ?)"] * len(wanted))
    params: list = [txn_id if txn_id is not None else -1]
    for db, tbl in wanted.values():
        params += [db, tbl]
    sql = (
        "SELECT d.NAME, t.TBL_NAME, t.TBL_ID, t.TBL_TYPE, n.NWI_NEXT, e.T2W_WRITEID, "
        "e.TXN_STATE FROM TBLS t JOIN DBS d ON d.DB_ID = t.DB_ID "
        "LEFT JOIN NEXT_WRITE_ID n ON n.NWI_DATABASE = d.NAME AND n.NWI_TABLE = t.TBL_NAME "
        "LEFT JOIN (SELECT w.T2W_DATABASE, w.T2W_TABLE, w.T2W_WRITEID, x.TXN_STATE "
        "FROM TXN_TO_WRITE_ID w JOIN TXNS x ON x.TXN_ID = w.T2W_TXNID "
        "WHERE x.TXN_STATE <> 'c' AND x.TXN_ID <> ?) e "
        "ON e.T2W_DATABASE = d.NAME AND e.T2W_TABLE = t.TBL_NAME "
        f"WHERE {where}"
    )
    with ms.sql.lock:
        rows = ms.sql.execute(sql, params).fetchall()
    found: dict[tuple[str, str], tuple[int, str, int]] = {}
    exceptions: dict[tuple[str, str], dict[str, set[int]]] = defaultdict(
        lambda: {OPEN: set(), ABORTED: set()}
    )
    for db, tbl, tbl_id, tbl_type, next_wid, wid, state in rows:
        found[(db, tbl)] = (tbl_id, tbl_type, (next_wid or 1) - 1)
        if wid is not None:
            exceptions[(db, tbl)][state].add(wid)
    out = {}
    for name, key in wanted.items():
        if key not in found:
            ms.get_table(*key)  # raises NoSuchObjectError naming the existing tables
            raise MetastoreError(f"table {name} disappeared while its snapshot was read")
        tbl_id, tbl_type, hwm = found[key]
        write_ids = None
        if tbl_type != EXTERNAL_TABLE:
            exc = exceptions[key]
            write_ids = ValidWriteIdList(name, hwm, frozenset(exc[OPEN]), frozenset(exc[ABORTED]))
        out[name] = TableSnapshot(name, tbl_id, tbl_type, write_ids)
    return out
