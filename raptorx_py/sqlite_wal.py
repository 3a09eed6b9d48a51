"""Open a SQLite file in WAL mode from many processes at once.

SQLite's busy timeout covers ordinary lock waits, but not the first opening of a fresh file:
switching it to WAL and creating its tables from several processes at the same moment can
fail at once with "database is locked" (a reader upgrading to a writer, or a connection
meeting another's half-built WAL index, is refused without waiting). Python workers of one
Spark application open the same block-cache index, metrics file or metastore together, so
that moment is common. ``connect_wal`` does the set-up under an exclusive ``flock`` on a
side file, so one process at a time does it; everything after is plain SQLite locking.

No mapping of a shared file. A process that touches a memory-mapped page of a file another
process truncated gets SIGBUS, which kills it (a Python worker: the query fails). SQLite maps
the database file when ``mmap_size`` is above 0 (diskcache sets 64 MiB) and, in WAL mode,
always maps the ``-shm`` index. So every connection opened here has ``mmap_size=0``, and the
cache tiers' own indexes, which other processes clear, replace or find damaged, open with
a rollback journal (``journal_mode="TRUNCATE"``): no ``-shm`` at all, every read a ``pread``
that a truncated file answers short, which SQLite reports as an error (a cache miss), not a
signal. The metastore and other files nobody clears keep WAL (readers never wait).

A damaged file (``is_damage``: SQLite's "file is not a database", "database disk image is
malformed") is set aside (``set_aside``: renamed, with its journals, never truncated, so a
process still holding it reads its old inode) for the caller to start a new one; the cache
tiers rebuild what they can from their entry files. Damage can also surface as undecodable
bytes: SQLite's message about a scribbled schema quotes the garbage, which Python fails to
decode (``UnicodeDecodeError`` instead of ``sqlite3.DatabaseError``). Connections opened
here turn that into the ``DatabaseError`` it is (``UndecodableIsDamage``).

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
import urllib.parse
from collections.abc import Iterator
from typing import Any

LOCK_SUFFIX = ".init-lock"
#: What a damaged file is renamed to (``<path>.damaged``; an older one is replaced).
DAMAGED_SUFFIX = ".damaged"
#: SQLite's primary result codes that mean the file's bytes are wrong (not locks or
#: permissions): SQLITE_CORRUPT and SQLITE_NOTADB.
_DAMAGE_CODES = (11, 26)
#: The files SQLite keeps beside a database.
_JOURNALS = ("-journal", "-wal", "-shm")


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


@contextlib.contextmanager
def undecodable_is_damage() -> Iterator[None]:
    """Raise a ``UnicodeDecodeError`` met inside the block as the ``sqlite3.DatabaseError``
    it stands for (one ``is_damage`` recognises): Python raises it where SQLite's error
    message, quoting a damaged file's bytes, is not UTF-8."""
    try:
        yield
    except UnicodeDecodeError as e:
        raise sqlite3.DatabaseError(f"database disk image is malformed ({e})") from e


class UndecodableCursor(sqlite3.Cursor):
    """A cursor whose every step raises damage as ``sqlite3.DatabaseError`` (see
    ``undecodable_is_damage``)."""

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        with undecodable_is_damage():
            return super().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        with undecodable_is_damage():
            return super().executemany(*args, **kwargs)

    def executescript(self, *args: Any, **kwargs: Any) -> Any:
        with undecodable_is_damage():
            return super().executescript(*args, **kwargs)

    def fetchone(self) -> Any:
        with undecodable_is_damage():
            return super().fetchone()

    def fetchmany(self, *args: Any, **kwargs: Any) -> Any:
        with undecodable_is_damage():
            return super().fetchmany(*args, **kwargs)

    def fetchall(self) -> Any:
        with undecodable_is_damage():
            return super().fetchall()

    def __next__(self) -> Any:
        with undecodable_is_damage():
            return super().__next__()


class UndecodableIsDamage(sqlite3.Connection):
    """A connection (``sqlite3.connect``'s ``factory``) whose statements and cursors raise
    damage as ``sqlite3.DatabaseError`` (see ``undecodable_is_damage``). Its ``execute``
    runs on such a cursor: sqlite3's own makes a plain ``sqlite3.Cursor`` in C."""

    def cursor(self, factory: Any = UndecodableCursor) -> Any:
        return super().cursor(factory)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self.cursor().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        return self.cursor().executemany(*args, **kwargs)

    def executescript(self, *args: Any, **kwargs: Any) -> Any:
        return self.cursor().executescript(*args, **kwargs)

    def commit(self) -> None:
        with undecodable_is_damage():
            super().commit()


def connect_wal(
    path: str,
    *,
    timeout: float,
    schema: str | None = None,
    pragmas: tuple[str, ...] = (),
    check_same_thread: bool = True,
    journal_mode: str = "WAL",
) -> sqlite3.Connection:
    """A connection to ``path`` in ``journal_mode`` (WAL unless told: see the module's
    docstring) and autocommit (``isolation_level=None``), never memory-mapped, with
    ``pragmas`` run and the ``schema`` script (idempotent DDL) applied, set up by one process
    at a time. The connection is closed again if any step fails."""
    with set_up_lock(path):
        conn = sqlite3.connect(
            path,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=check_same_thread,
            factory=UndecodableIsDamage,
        )
        try:
            conn.execute("PRAGMA mmap_size=0")
            conn.execute(f"PRAGMA journal_mode={journal_mode}")
            for pragma in pragmas:
                conn.execute(pragma)
            if schema:
                conn.executescript(schema)
        except BaseException:
            conn.close()
            raise
    return conn


def is_damage(error: BaseException) -> bool:
    """Whether ``error`` says a SQLite file's bytes are wrong (corrupt, not a database, or
    without the tables its owner created: truncated to nothing by another process), as
    opposed to a lock, a permission or a full disk, which a new file would not fix."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    if isinstance(error, sqlite3.OperationalError) and "no such table" in str(error):
        return True
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _DAMAGE_CODES
    text = str(error)
    return "not a database" in text or "malformed" in text or "Could not decode" in text


def set_aside(path: str, inode: int | None = None) -> str:
    """Rename the SQLite file ``path`` and its journals to ``<name>.damaged`` (replacing an
    older set-aside copy), so the next opening starts a new file; returns the new name.
    Renamed, never truncated or rewritten: a process that still has the old file open keeps
    reading its inode. Missing journals are skipped; a failure to rename raises OSError.
    With ``inode`` (the file the caller found damaged), a file at ``path`` that is another
    one already (another process set the damaged one aside and started anew) is left alone."""
    target = path + DAMAGED_SUFFIX
    with set_up_lock(path):
        if inode is not None:
            try:
                if os.stat(path).st_ino != inode:
                    return target
            except FileNotFoundError:
                return target
        for suffix in ("", *_JOURNALS):
            try:
                os.replace(path + suffix, target + suffix)
            except FileNotFoundError:
                continue
    return target


def connect_read_only(path: str, *, timeout: float = 5.0) -> sqlite3.Connection:
    """A connection that never writes ``path`` nor creates a file beside it (``mode=ro``, no
    mapping): for reading a file in a directory this process may not write. A file in WAL
    mode needs its ``-shm`` and fails here where that cannot be made; a hot rollback journal
    that needs rolling back fails too (SQLite's errors say so)."""
    conn = sqlite3.connect(
        f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro",
        uri=True,
        timeout=timeout,
        factory=UndecodableIsDamage,
    )
    try:
        conn.execute("PRAGMA mmap_size=0")
    except BaseException:
        conn.close()
        raise
    return conn
