"""The notification log: every metastore change as an event, in one total order.

Contract:
- ``append_event`` is called *inside* the write transaction that makes the change, so the
  event commits with it or not at all.
- Event ids are strictly increasing and have no gaps among committed events: the id is taken
  from the one-row NOTIFICATION_SEQUENCE by an UPDATE in that same transaction. The UPDATE
  holds the row (and the metastore's writers are serialised anyway: SQLite's
  ``BEGIN IMMEDIATE``, PostgreSQL's advisory write lock), so ids are handed out in commit
  order: a reader that has seen event *n* never later finds a new event below *n*. A rolled
  back change rolls its sequence update back too, so it leaves no gap.
- Event types and messages follow HMS's (``CREATE_TABLE``, ``ADD_PARTITION``,
  ``COMMIT_TXN``, ``ALLOC_WRITE_ID`` ...). The message is JSON; what each type carries is
  listed in ``EVENT_TYPES``. Table events carry the table id, so a consumer can tell a table
  from a dropped-and-recreated one of the same name. Partition and table writes made under a
  write id carry TXN_ID and WRITE_ID: the synchronized-cache document's "a write event stages
  the new entry, the commit event makes it readable".

Limits: the log is never trimmed (HMS expires events after ``hive.metastore.event.db.listener
.timetolive``); a consumer that falls far behind reads everything since its last id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from raptorx_py.hive.model import Table
from raptorx_py.metastore.catalog import NotificationEvent
from raptorx_py.metastore.sql_session import SqlMetastore

MESSAGE_FORMAT = "json-0.1"

#: Every event type and the keys of its JSON message.
EVENT_TYPES = {
    "CREATE_DATABASE": "dbId, location",
    "ALTER_DATABASE": "dbId, location (the new one)",
    "DROP_DATABASE": "dbId",
    "CREATE_TABLE": "tableId, tableType, location",
    "ALTER_TABLE": "tableId, tableType, location, parameters (the keys set; null = removed)",
    "DROP_TABLE": "tableId, tableType, location",
    "ADD_PARTITION": "tableId, partitions: [{partId, values, location, writeId, format?}]",
    "ALTER_PARTITION": "tableId, partitions: [{partId, values, location, writeId, format?}]; when "
    "only parameters changed, location is null and parameters holds the "
    "keys set (null = removed)",
    "DROP_PARTITION": "tableId, partitions: [{partId, values, location}]",
    "OPEN_TXN": "txnId, user, host",
    "COMMIT_TXN": "txnId, writeIds: [{db, table, writeId}] (the tables the txn wrote)",
    "ABORT_TXN": "txnId, writeIds: [{db, table, writeId}], reason",
    "ALLOC_WRITE_ID": "txnId, writeId, tableId",
}


def append_event(
    ms: SqlMetastore,
    event_type: str,
    *,
    db: str | None = None,
    table: str | None = None,
    txn_id: int | None = None,
    write_id: int | None = None,
    message: dict[str, Any] | None = None,
) -> int:
    """Append one event inside the caller's open write transaction; returns its id.

    ``ms`` is the ``Metastore`` whose ``sql.transaction()`` is open (two round trips: the
    sequence update and the insert).
    """
    if event_type not in EVENT_TYPES:
        raise ValueError(
            f"unknown notification event type '{event_type}' "
            f"(known: {', '.join(sorted(EVENT_TYPES))})"
        )
    (event_id,) = ms.sql.execute(
        "UPDATE NOTIFICATION_SEQUENCE SET NEXT_EVENT_ID = NEXT_EVENT_ID + 1 "
        "WHERE NNI_ID = 1 RETURNING NEXT_EVENT_ID - 1"
    ).fetchone()
    ms.sql.execute(
        "INSERT INTO NOTIFICATION_LOG (EVENT_ID, EVENT_TIME, EVENT_TYPE, DB_NAME, TBL_NAME, "
        "TXN_ID, WRITE_ID, MESSAGE, MESSAGE_FORMAT) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event_id,
            int(ms.sql.clock()),
            event_type,
            db,
            table,
            txn_id,
            write_id,
            json.dumps(message or {}, sort_keys=True, default=str),
            MESSAGE_FORMAT,
        ),
    )
    return event_id


def get_notifications(
    ms: SqlMetastore, after_event_id: int = 0, limit: int | None = None
) -> list[NotificationEvent]:
    """Events with ``EVENT_ID > after_event_id``, oldest first, at most ``limit`` (one
    round trip)."""
    sql = (
        "SELECT EVENT_ID, EVENT_TIME, EVENT_TYPE, DB_NAME, TBL_NAME, TXN_ID, WRITE_ID, "
        "MESSAGE FROM NOTIFICATION_LOG WHERE EVENT_ID > ? ORDER BY EVENT_ID"
    )
    params: list[Any] = [after_event_id]
    if limit is not None:
        if limit < 0:
            raise ValueError(f"negative notification limit {limit}")
        sql += " LIMIT ?"
        params.append(limit)
    with ms.sql.lock:
        rows = ms.sql.execute(sql, params).fetchall()
    return [
        NotificationEvent(eid, etime, etype, db, tbl, txn, wid, json.loads(msg))
        for eid, etime, etype, db, tbl, txn, wid, msg in rows
    ]


def current_notification_id(ms: SqlMetastore) -> int:
    """The id of the last committed event, 0 when there is none (one round trip)."""
    with ms.sql.lock:
        (next_id,) = ms.sql.execute(
            "SELECT NEXT_EVENT_ID FROM NOTIFICATION_SEQUENCE WHERE NNI_ID = 1"
        ).fetchone()
    return next_id - 1


def append_partition_event(
    ms: SqlMetastore,
    event_type: str,
    table: Table,
    partitions: list[dict[str, Any]],
    *,
    txn_id: int | None,
    write_id: int | None,
) -> int:
    """``append_event`` for ADD_, ALTER_ and DROP_PARTITION: the table's message with the
    ``partitions`` (``partition_message``) the event is about."""
    return append_event(
        ms,
        event_type,
        db=table.database,
        table=table.name,
        txn_id=txn_id,
        write_id=write_id,
        message=table_message(table, partitions=partitions),
    )


def table_message(table: Table, **extra: Any) -> dict[str, Any]:
    """The common part of a table event's message."""
    return {"tableId": table.id, "tableType": table.table_type, "location": table.location, **extra}


def partition_message(
    part_id: int | None,
    values: Sequence[str | None],
    location: str | None,
    write_id: int | None = None,
    storage_format: str | None = None,
) -> dict[str, Any]:
    """A partition in an event's message; ``format`` only for a partition whose files are
    not in its table's format."""
    message = {"partId": part_id, "values": list(values), "location": location, "writeId": write_id}
    if storage_format is not None:
        message["format"] = storage_format
    return message
