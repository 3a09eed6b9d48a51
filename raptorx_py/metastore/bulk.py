"""Adding many partitions to a table in a handful of round trips.

``Metastore.add_partitions`` sends four statements per partition (the row, its key values,
its parameters, its statistics), which is right for the few partitions a write adds but makes
a 10,000-partition table cost 40,000 round trips. ``add_partitions_bulk`` does the same
inserts with one ``executemany`` per metadata table, in one write transaction with one
ADD_PARTITION event, exactly as ``Metastore.add_partitions`` would record them (same rows, same
``writeId`` parameter, same event message). Used by the tests and the planning benchmark to
build large tables; nothing in the read path depends on it.

Limits: partitions are checked for the right number of values and for names already present
(one query); statistics columns must be data columns of the table.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from raptorx_py.errors import AlreadyExistsError, MetastoreError
from raptorx_py.metastore.model import Partition, Table
from raptorx_py.metastore.notifications import append_event, partition_message, table_message
from raptorx_py.metastore.partition_names import partition_name
from raptorx_py.metastore.store import Metastore, _encode_stats
from raptorx_py.metastore.table_parameters import WRITE_ID_PARAM


def add_partitions_bulk(
    ms: Metastore, table: Table, partitions: Sequence[Partition], write_id: int | None = None
) -> int:
    """Add ``partitions`` to the existing ``table`` in one transaction (about ten round trips
    whatever their number); ``write_id`` as for ``Metastore.add_partitions``. Returns how
    many were added."""
    if not partitions:
        return 0
    now = int(time.time())
    with ms._transaction():
        current = ms.get_table(table.database, table.name)
        txn_id = ms._check_write_id(current, write_id)
        for p in partitions:
            ms._check_values(current, p)
        names = [partition_name(current.partition_keys, p.values) for p in partitions]
        if len(set(names)) != len(names):
            raise MetastoreError(
                f"the partitions to add to {current.qualified_name} repeat a partition name"
            )
        existing = {
            n
            for (n,) in ms._execute(
                "SELECT PART_NAME FROM PARTITIONS WHERE TBL_ID = ?", (current.id,)
            )
        }
        clash = sorted(existing.intersection(names))
        if clash:
            raise AlreadyExistsError(
                f"partition(s) {', '.join(clash[:10])} of {current.qualified_name} already exist"
            )
        ms._executemany(
            "INSERT INTO PARTITIONS (TBL_ID, PART_NAME, LOCATION, CREATE_TIME) VALUES (?, ?, ?, ?)",
            [(current.id, n, p.location, now) for n, p in zip(names, partitions)],
        )
        wanted = set(names)
        ids = {
            n: pid
            for pid, n in ms._execute(
                "SELECT PART_ID, PART_NAME FROM PARTITIONS WHERE TBL_ID = ?", (current.id,)
            )
            if n in wanted
        }
        ms._executemany(
            "INSERT INTO PARTITION_KEY_VALS (PART_ID, PART_KEY_VAL, INTEGER_IDX) VALUES (?, ?, ?)",
            [(ids[n], v, i) for n, p in zip(names, partitions) for i, v in enumerate(p.values)],
        )
        params = []
        for n, p in zip(names, partitions):
            values = dict(p.parameters)
            if write_id is not None:
                values[WRITE_ID_PARAM] = str(write_id)
            params += [(ids[n], k, v) for k, v in values.items()]
        if params:
            ms._executemany(
                "INSERT INTO PARTITION_PARAMS (PART_ID, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?)",
                params,
            )
        types = {c.name: c.type for c in current.columns}
        stats = [
            (ids[n], col, types[col], *_encode_stats(s, types[col]), now)
            for n, p in zip(names, partitions)
            for col, s in p.stats.items()
        ]
        if stats:
            ms._executemany(
                "INSERT INTO PART_COL_STATS (PART_ID, COLUMN_NAME, COLUMN_TYPE, NUM_NULLS, "
                "LOW_VALUE, HIGH_VALUE, LAST_ANALYZED) VALUES (?, ?, ?, ?, ?, ?, ?)",
                stats,
            )
        append_event(
            ms,
            "ADD_PARTITION",
            db=current.database,
            table=current.name,
            txn_id=txn_id,
            write_id=write_id,
            message=table_message(
                current,
                partitions=[
                    partition_message(ids[n], p.values, p.location, write_id)
                    for n, p in zip(names, partitions)
                ],
            ),
        )
    return len(partitions)
