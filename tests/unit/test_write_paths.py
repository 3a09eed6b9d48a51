"""The records of what managed writes created (``metastore/write_paths.py``) on every
metastore backend: recorded once, listed with their transaction's state, forgotten by kind,
and kept across a reopen of a version 3 database upgraded in place."""

from __future__ import annotations

from raptorx_py.metastore.write_paths import (
    DIRECTORY,
    FILE,
    STAGING,
    WritePath,
    forget_write_paths,
    record_write_paths,
    write_paths_of_table,
)
from tests.unit.txn_helpers import open_ms


def test_record_list_and_forget(metastore_url):
    with open_ms(metastore_url) as ms:
        live, dead = ms.open_transaction(), ms.open_transaction()
        record_write_paths(ms, live, "db", "t", STAGING, ["file:///w/t/.raptorx-staging-1-a"])
        record_write_paths(ms, dead, "db", "t", DIRECTORY, ["file:///w/t/k=1/delta_1"])
        record_write_paths(ms, dead, "db", "t", FILE, ["file:///w/t/k=1/delta_1/p.parquet"] * 2)
        record_write_paths(ms, dead, "db", "t", FILE, ["file:///w/t/k=1/delta_1/p.parquet"])
        record_write_paths(ms, dead, "db", "other", FILE, ["file:///w/o/x.parquet"])
        ms.abort_transaction(dead)
        assert write_paths_of_table(ms, "db", "t") == [
            WritePath(live, "open", STAGING, "file:///w/t/.raptorx-staging-1-a"),
            WritePath(dead, "aborted", DIRECTORY, "file:///w/t/k=1/delta_1"),
            WritePath(dead, "aborted", FILE, "file:///w/t/k=1/delta_1/p.parquet"),
        ]
        forget_write_paths(ms, "db", "t", [dead], (FILE,))
        assert [r.kind for r in write_paths_of_table(ms, "db", "t")] == [STAGING, DIRECTORY]
        forget_write_paths(ms, "db", "t", [live, dead])
        assert write_paths_of_table(ms, "db", "t") == []
        assert len(write_paths_of_table(ms, "db", "other")) == 1
