"""Building the next version of a cached entry from notification-log events (pure functions).

When a transaction's COMMIT_TXN is applied, the versioned cache publishes, for each table the
transaction wrote, a new version: the current one with that transaction's staged write events
applied (``apply_to_table`` / ``apply_to_partitions``), tagged with the current
ValidWriteIdList plus the transaction's write id (``mark_committed``).

What an event can and cannot rebuild (the log's messages, see ``notifications.EVENT_TYPES``):
- ALTER_TABLE: the parameters set or removed: exact.
- ADD_PARTITION / ALTER_PARTITION: values, location, partition id and write id. The message
  carries no other parameters (``numRows``) and no column statistics, so a partition rebuilt
  from an event has neither: the planner then cannot prune it by statistics (it is kept, never
  wrongly dropped). A partition the entry already holds with the same id, location and write id
  is kept as is (the entry was read from the database after that write), statistics included.
- ALTER_PARTITION of parameters only (no location): applied to the held partition.
- DROP_PARTITION: removes the partition with that id (never a newer one of the same values).
A ``None`` result means the events cannot be applied (e.g. a parameter change of a partition the
entry does not hold): the caller then invalidates the entry instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from raptorx_py.hive.model import Column, Partition, Table
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.hive.table_parameters import WRITE_ID_PARAM
from raptorx_py.hive.write_ids import ValidWriteIdList
from raptorx_py.metastore.catalog import NotificationEvent

#: Events that change a table or its partitions; with a TXN_ID they are staged until commit.
WRITE_EVENTS = frozenset({"ALTER_TABLE", "ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION"})
#: The events that open, commit and abort a transaction.
TXN_EVENTS = frozenset({"OPEN_TXN", "COMMIT_TXN", "ABORT_TXN"})


@dataclass(frozen=True)
class PartitionList:
    """A table's partitions as the cache holds them: in the metastore's order (partition
    name), with the partition keys needed to keep that order when events change the list."""

    keys: tuple[Column, ...]
    partitions: tuple[Partition, ...]


def mark_committed(write_ids: ValidWriteIdList, write_id: int) -> ValidWriteIdList:
    """``write_ids`` with ``write_id`` committed. Write ids between the old high-water mark
    and ``write_id`` were allocated after ``write_ids`` was taken and their fate is unknown
    here: they are marked open, the conservative choice (a query whose snapshot says one of
    them committed is then not served this version)."""
    hwm = write_ids.high_watermark
    opened = set(write_ids.open_write_ids)
    opened.discard(write_id)
    if write_id > hwm:
        opened.update(range(hwm + 1, write_id))
        hwm = write_id
    return ValidWriteIdList(
        write_ids.table_name, hwm, frozenset(opened), write_ids.aborted_write_ids
    )


def apply_to_table(table: Table, events: Sequence[NotificationEvent]) -> Table:
    """``table`` after the ALTER_TABLE events among ``events`` (other events leave it)."""
    parameters = dict(table.parameters)
    changed = False
    for e in events:
        if e.event_type == "ALTER_TABLE":
            for key, value in (e.message.get("parameters") or {}).items():
                changed = True
                if value is None:
                    parameters.pop(key, None)
                else:
                    parameters[key] = value
    return dataclasses.replace(table, parameters=parameters) if changed else table


def apply_to_partitions(
    current: PartitionList, events: Sequence[NotificationEvent]
) -> PartitionList | None:
    """``current`` after the partition events among ``events``; ``None`` when they cannot be
    applied (see the module docstring)."""
    by_values = {p.values: p for p in current.partitions}
    for e in events:
        if e.event_type not in ("ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION"):
            continue
        for pm in e.message.get("partitions") or ():
            values = tuple(pm["values"])
            held = by_values.get(values)
            if e.event_type == "DROP_PARTITION":
                if held is not None and held.id == pm.get("partId"):
                    del by_values[values]
            elif e.event_type == "ALTER_PARTITION" and pm.get("location") is None:
                if held is None:
                    return None
                params = dict(held.parameters)
                for key, value in (e.message.get("parameters") or {}).items():
                    if value is None:
                        params.pop(key, None)
                    else:
                        params[key] = value
                by_values[values] = dataclasses.replace(held, parameters=params)
            elif not _same_write(held, pm):
                by_values[values] = _partition_from_message(pm)
    ordered = sorted(by_values.values(), key=lambda p: partition_name(current.keys, p.values))
    return PartitionList(current.keys, tuple(ordered))


def _same_write(held: Partition | None, pm: dict) -> bool:
    write_id = pm.get("writeId")
    return (
        held is not None
        and held.id == pm.get("partId")
        and held.location == pm.get("location")
        and held.storage_format == pm.get("format")
        and held.parameters.get(WRITE_ID_PARAM) == (None if write_id is None else str(write_id))
    )


def _partition_from_message(pm: dict) -> Partition:
    write_id = pm.get("writeId")
    params = {} if write_id is None else {WRITE_ID_PARAM: str(write_id)}
    return Partition(
        tuple(pm["values"]), pm["location"], params, {}, pm.get("partId"), pm.get("format")
    )
