"""What a managed write created on storage, recorded in the metastore (TXN_WRITE_PATHS).

``begin_write`` records the write's staging directory, and a commit each ACID directory it
creates (after creating it: only a directory it created alone is recorded) and each file it
places (before moving it in), under its transaction (``tables/commit_files.py``). The
cleaner removes what the records of this metastore's aborted transactions name, and nothing
else: with two metastores over one location, the other's ``delta_<wid>`` of the same number
is in no record of this one (``tables/cleaner.py``), nor is its staging directory, though
named after a transaction number. Records of a transaction are forgotten once it is no
longer open and the cleaner has done with it.

Paths are URLs (``file:///...``, ``s3://bucket/...``), as ``storage.fs.join_url`` spells them.
Limit: a process that dies between creating a directory and recording it leaves a directory
no record names; the cleaner reports such directories and leaves them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from raptorx_py.metastore.sql_session import SqlMetastore
from raptorx_py.metastore.transactions import STATE_NAMES

#: TWP_KIND: a directory the write created, a file it placed, its staging directory.
DIRECTORY, FILE, STAGING = "d", "f", "s"


@dataclass(frozen=True)
class WritePath:
    txn_id: int
    state: str  # the transaction's: "open", "committed" or "aborted"
    kind: str  # DIRECTORY, FILE or STAGING
    url: str


def record_write_paths(
    ms: SqlMetastore, txn_id: int, database: str, table: str, kind: str, urls: Iterable[str]
) -> None:
    """Record ``urls`` (of one ``kind``) as created by ``txn_id``'s write to the table, in one
    database transaction. Recording a path twice is harmless."""
    rows = [(txn_id, database, table, kind, url) for url in dict.fromkeys(urls)]
    if not rows:
        return
    with ms.sql.transaction():
        known = {
            r[0]
            for r in ms.sql.execute(
                "SELECT TWP_PATH FROM TXN_WRITE_PATHS WHERE TWP_TXNID = ?", (txn_id,)
            ).fetchall()
        }
        rows = [r for r in rows if r[4] not in known]
        if rows:
            ms.sql.executemany(
                "INSERT INTO TXN_WRITE_PATHS (TWP_TXNID, TWP_DATABASE, TWP_TABLE, TWP_KIND, "
                "TWP_PATH) VALUES (?, ?, ?, ?, ?)",
                rows,
            )


def write_paths_of_table(ms: SqlMetastore, database: str, table: str) -> list[WritePath]:
    """Every recorded path of writes to the table, with its transaction's state, in one
    round trip (ordered by transaction, then path)."""
    rows = ms.sql.execute(
        "SELECT p.TWP_TXNID, t.TXN_STATE, p.TWP_KIND, p.TWP_PATH FROM TXN_WRITE_PATHS p "
        "JOIN TXNS t ON t.TXN_ID = p.TWP_TXNID WHERE p.TWP_DATABASE = ? AND p.TWP_TABLE = ? "
        "ORDER BY p.TWP_TXNID, p.TWP_PATH",
        (database, table),
    ).fetchall()
    return [WritePath(r[0], STATE_NAMES[r[1]], r[2], r[3]) for r in rows]


def forget_write_paths(
    ms: SqlMetastore,
    database: str,
    table: str,
    txn_ids: Sequence[int],
    kinds: Sequence[str] = (DIRECTORY, FILE, STAGING),
) -> None:
    """Drop the records (of ``kinds``) of ``txn_ids``' writes to the table: done with,
    nothing of theirs is left to remove. A commit drops its directories' and files' in the
    database transaction that commits it (they are its data now), so a table's records stay
    few: one staging directory per write until the cleaner runs."""
    if txn_ids:
        marks = ", ".join("?" * len(kinds))
        with ms.sql.transaction():
            ms.sql.executemany(
                "DELETE FROM TXN_WRITE_PATHS WHERE TWP_TXNID = ? AND TWP_DATABASE = ? "
                f"AND TWP_TABLE = ? AND TWP_KIND IN ({marks})",
                [(t, database, table, *kinds) for t in txn_ids],
            )
