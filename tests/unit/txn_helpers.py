"""Helpers of the transaction, notification and lock tests: a fake clock, tables, and the
worker that other processes run."""

from __future__ import annotations

from raptorx_py.hive.model import MANAGED_TABLE, Column, Partition, Table
from raptorx_py.metastore import Metastore
from raptorx_py.metastore.store import backend_for_url

#: The transaction timeout the transaction and lock tests open their metastore with.
TIMEOUT = 300.0


def open_ms(url: str, **kwargs) -> Metastore:
    return Metastore(backend_for_url(url), **kwargs)


def managed_table(db: str = "db", name: str = "t", keys=(Column("p", "string"),)) -> Table:
    return Table(
        db,
        name,
        MANAGED_TABLE,
        f"file:///warehouse/{db}.db/{name}",
        (Column("id", "bigint"),),
        tuple(keys),
    )


def partition(value: str, table: Table | None = None, rows: int = 1) -> Partition:
    base = table.location if table else "file:///warehouse/db.db/t"
    return Partition((value,), f"{base}/p={value}", {"numRows": str(rows)})


def allocate_in_process(url: str, table: str, count: int, start_event, results) -> None:
    """Run in another process: ``count`` times open a transaction, allocate a write id of
    ``table`` and commit; put the write ids on ``results``."""
    db, name = table.split(".")
    got = []
    with open_ms(url) as ms:
        start_event.wait(30)
        for _ in range(count):
            txn = ms.open_transaction(user="worker")
            got.append(ms.allocate_write_id(txn, db, name))
            ms.commit_transaction(txn)
    results.put(got)
