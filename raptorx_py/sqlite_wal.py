"""Open a SQLite file in WAL mode from many processes at once.

SQLite's busy timeout covers ordinary lock waits, but not the first opening of a fresh file:
switching it to WAL and creating its tables from several processes at the same moment can
fail at once with "database is locked" (a reader upgrading to a writer, or a connection
meeting another's half-built WAL index, is refused without waiting). Python workers of one
Spark application open the same block-cache index, metrics file or metastore together, so
that moment is common. ``connect_wal`` does the set-up under an exclusive ``flock`` on a
side file, so one process at a time does it; everything after is plain SQLite locking.

Limits: the side file (``<path>.init-lock``) is left in place, as SQLite leaves ``-wal`` and
``-shm``. Where it cannot be created (a read-only directory) the set-up runs unlocked and
SQLite reports whatever is wrong with the directory itself. ``flock`` is per node: the file
must not be shared over a network file system, which SQLite's WAL mode forbids anyway.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator

LOCK_SUFFIX = ".init-lock"


@contextlib.contextmanager
def set_up_lock(path: str) -> Iterator[None]:
    """Hold the exclusive set-up lock of the SQLite file ``path`` (for code that opens it
    through another library, e.g. diskcache, and must not race another process's set-up)."""
    try:
        fd = os.open(path + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        # Unwritable directory: SQLite will say so (or open read-only) on its own.
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def connect_wal(
    path: str,
    *,
    timeout: float,
    schema: str | None = None,
    pragmas: tuple[str, ...] = (),
    check_same_thread: bool = True,
) -> sqlite3.Connection:
    """A connection to ``path`` in WAL mode and autocommit (``isolation_level=None``), with
    ``pragmas`` run and the ``schema`` script (idempotent DDL) applied, set up by one process
    at a time. The connection is closed again if any step fails."""
    with set_up_lock(path):
        conn = sqlite3.connect(
            path, timeout=timeout, isolation_level=None, check_same_thread=check_same_thread
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            for pragma in pragmas:
                conn.execute(pragma)
            if schema:
                conn.executescript(schema)
        except BaseException:
            conn.close()
            raise
    return conn
