"""The on-disk half of the block cache: block files under one directory, a process-safe
SQLite index of them, checksums, LRU eviction by bytes and start-up recovery.

Layout of ``directory``::

    index.sqlite              the index (WAL mode): one row per block file
    cache.secret              the key of every block's MAC (``cache_files``)
    capacity                  ``max_size`` in bytes and the bytes the index held (two text
                              lines), written when a store opens and when it adopts
    tmp/<pid>.<random>.part   blocks being written (published by os.replace)
    data/<kk>/<key>-<index>   one file per block, fanned out by the key's first two hex digits
    adopt/<pid>.<random>.names  blocks a JVM published, for the index (one name a line)

A block file (format version 3) is the payload followed by a 48-byte trailer, little-endian
``<4sB3xQ32s``: magic ``RXBC``, version 3, three zero bytes, the payload's length (u64) and
HMAC-SHA256 keyed with the cache's secret over u32 len(name) || name (ASCII) || payload
(``cache_files.keyed_mac``: a block rewritten with a recomputed plain checksum, or a valid
block copied under another name, fails verification; versions 1 and 2 fail it too, a
counted corrupt block and a miss). The payload comes first so that it starts on a page
boundary: reads of it are page-aligned copies from the page cache, as fast as a plain
file's. Keys are opaque hex strings chosen by the caller (:mod:`raptorx_py.cache.block_cache`
hashes the file's identity into them).

The JVM reads and writes the same files (``native/src/main/scala/raptorx/cache/
BlockFiles.scala``, whose constants are spelled once there and once here). It has no SQLite
driver, so it cannot index what it publishes: it publishes (temp file + atomic rename, its
own pid in the temp name) an ``adopt/*.names`` file naming them, which a store folds into
the index (``adopt_published``), and it reads ``capacity`` to know how far it may fill:
the room the index left at its last adoption, or a tenth of the capacity when that is more.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import os
import re
import secrets
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterator

from raptorx_py.cache import cache_files
from raptorx_py.damaged_index import rebuild_index
from raptorx_py.metrics import counters
from raptorx_py.sqlite_wal import connect_read_only, connect_wal, is_damage

log = logging.getLogger(__name__)

#: The trailer: magic, format version, 3 pad bytes, payload length, HMAC-SHA256.
TRAILER = struct.Struct(f"<4sB3xQ{cache_files.MAC_BYTES}s")
MAGIC = b"RXBC"
#: 3: HMAC-SHA256, which the JVM can verify (version 2's keyed 64-bit BLAKE2b blocks and
#: version 1's plain xxh3-64 ones fail verification and go).
FORMAT_VERSION = 3

INDEX_FILE = "index.sqlite"
TMP_DIR = "tmp"
DATA_DIR = "data"
ADOPT_DIR = "adopt"
ADOPT_SUFFIX = ".names"
CAPACITY_FILE = "capacity"

#: Most block files whose verification a store remembers before it forgets them all.
VERIFIED_MEMO_SIZE = 1 << 18

#: Temp files of a live process younger than this are left alone by start-up recovery.
ORPHAN_AGE = 3600.0

_BLOCK_NAME = re.compile(r"^[0-9a-f]{8,64}-\d+$")
_TEMP_NAME = re.compile(r"^(\d+)\.[0-9a-f]+\.part$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS blocks (
    name  TEXT PRIMARY KEY,   -- '<key>-<index>', also the file name
    size  INTEGER NOT NULL,   -- bytes of the file on disk (trailer included)
    atime REAL NOT NULL       -- last access, the store's clock
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blocks_by_atime ON blocks (atime);
CREATE TABLE IF NOT EXISTS totals (
    id    INTEGER PRIMARY KEY CHECK (id = 0),
    bytes INTEGER NOT NULL    -- SUM(blocks.size), kept in step by every writer
);
INSERT OR IGNORE INTO totals VALUES (0, 0);
"""


def block_name(key: str, index: int) -> str:
    return f"{key}-{index}"


def encode_trailer(secret: bytes, name: str, payload) -> bytes:
    return TRAILER.pack(
        MAGIC,
        FORMAT_VERSION,
        len(payload),
        cache_files.keyed_mac(secret, name.encode(), payload),
    )


class BlockStore:
    """Blocks of bytes on local disk, safe to share between the processes of one node.

    Contract:
    - ``read_into(key, index, block_len, offset, dest)`` / ``read(...)`` return bytes of
      a block only if the block verifies. A missing file is a plain miss. A file of the
      wrong size, or whose trailer or MAC does not match, is corrupt: it is
      deleted, counted in ``block_cache.corrupt_blocks``, and reported as a miss, so the
      caller fetches the block again.
    - Verification: the first read of a block file by a process reads the whole block and
      checks its checksum; the file's (inode, size, mtime, ctime) is remembered, and later
      reads of the same unchanged file check only its size and read just the bytes asked
      for. Published files are never written in place (a new version is a new inode), and a
      new process verifies afresh, so this catches torn writes after a crash and any
      replacement; it does not re-detect a file modified in place within one timestamp
      tick, nor media errors on re-reads. ``verify_every_read=True`` checks the whole block
      on every read, at about half the warm throughput.
    - ``put(key, index, payload)`` publishes a block by temp file + ``os.replace`` and
      records it in the index, both under the index's write lock, so index and disk agree
      whenever no process crashed. It never raises: a failure (unwritable, ENOSPC after an
      eviction attempt, index locked or full) is counted in ``block_cache.put_errors`` and
      returns False. Blocks are written without fsync: a block torn by a power loss fails
      its checksum later, which is a miss, not wrong bytes.
    - Capacity: the index keeps the bytes of every file (trailer included); a put evicts
      least recently used blocks until the total is within ``max_size``
      (``block_cache.evictions``). Last-access times of hits are buffered in memory and
      written in batches (``touch_batch`` hits or ``touch_interval`` seconds), so LRU order
      across processes is approximate by that much; a process's own pending touches are
      written before it evicts.
    - Concurrency: any number of processes may read and put the same block at once; the
      last publish wins and every published file is complete. Readers never lock: a file
      unlinked while being read stays readable through the open descriptor. Threads of one
      process share one SQLite connection behind a lock. After ``fork`` the child opens
      its own connection.
    - Start-up recovery (in the constructor, under the index's write lock): temp files of
      dead processes (or older than ``ORPHAN_AGE``) are removed; files whose size disagrees
      with the index, or with foreign names, are removed; index rows without files are
      dropped; files without rows are adopted if their checksum verifies, removed if not;
      then blocks past capacity are evicted. The directory's ``capacity`` file is set to
      ``max_size``.
    - Blocks a JVM published (``adopt/*.names``, module docstring) are folded into the
      index under its write lock, then blocks past capacity evicted: by
      ``adopt_published()``, by every put (before it evicts) and by start-up recovery
      (before its scan). Only a named file that exists, has no row and is as long as its
      trailer says gets a row (last access: the store's clock; ``block_cache.adopted``); its
      MAC is checked by its first read, as any block's.
    - A directory that cannot be created or written, or an index that cannot be opened,
      disables the store (``enabled`` False) with one warning: reads miss, puts do nothing.

    Limits: the index is the accounting, not the truth, for files another process deleted
    by hand; such gaps are fixed by the next start-up recovery. Keys are trusted to be
    lower-case hex.
    """

    def __init__(
        self,
        directory: str,
        *,
        max_size: int,
        clock: Callable[[], float] = time.time,
        verify_every_read: bool = False,
        touch_batch: int = 4096,
        touch_interval: float = 1.0,
        group_shared: bool = False,
    ):
        self.directory = os.path.abspath(os.path.expanduser(directory))
        # Private by default (cache_files): cached bytes are copies of table files.
        self.dir_mode, self.file_mode = cache_files.modes(group_shared)
        self._opener = cache_files.opener(self.file_mode)
        self._secret = b""
        self._fault_warned = False
        #: The last fault met, naming the cache file (for tools and tests).
        self.last_fault: str | None = None
        self.max_size = int(max_size)
        self.clock = clock
        self.verify_every_read = verify_every_read
        # name -> (inode, size, mtime, ctime) of the file this process last verified.
        self._verified: dict[str, tuple] = {}
        self.touch_batch = touch_batch
        self.touch_interval = touch_interval
        self.index_path = os.path.join(self.directory, INDEX_FILE)
        self.tmp_dir = os.path.join(self.directory, TMP_DIR)
        self.data_dir = os.path.join(self.directory, DATA_DIR)
        self.adopt_dir = os.path.join(self.directory, ADOPT_DIR)
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._conn: sqlite3.Connection | None = None
        #: The inode of the index file ``_conn`` opened (a replaced index is reopened).
        self._conn_inode: int | None = None
        self._pending: dict[str, float] = {}
        self._last_touch_flush = clock()
        self.enabled = False
        #: What start-up recovery fixed, by kind (empty when the store is disabled).
        self.last_recovery: dict[str, int] = {}
        try:
            self._prepare_directory()
            try:
                self.last_recovery = self.recover()
            except sqlite3.Error as e:
                if not is_damage(e):
                    raise
                self._rebuild_index(e)
        except (OSError, sqlite3.Error) as e:
            log.warning(
                "block cache disabled: cannot use directory %s (%s: %s); reading "
                "straight from the target",
                self.directory,
                type(e).__name__,
                e,
            )
            self._close_connection()
            return
        self.enabled = True

    # --- paths ------------------------------------------------------------------------------

    def path_of(self, name: str) -> str:
        return os.path.join(self.data_dir, name[:2], name)

    # --- reading ----------------------------------------------------------------------------

    def read_into(self, key: str, index: int, block_len: int, offset: int, dest) -> bool:
        """Fill ``dest`` with bytes ``[offset, offset + len(dest))`` of the block of
        ``block_len`` bytes; False if the block is absent or corrupt (then deleted)."""
        return self._read(key, index, block_len, offset, len(dest), dest) is not None

    def read(self, key: str, index: int, block_len: int, offset: int, length: int) -> bytes | None:
        """Bytes ``[offset, offset + length)`` of the block, or None (absent or corrupt)."""
        return self._read(key, index, block_len, offset, length, None)

    def _read(self, key, index, block_len, offset, length, dest):
        if not self.enabled:
            return None
        name = block_name(key, index)
        path = self.path_of(name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as e:
            log.debug("block cache: cannot open %s: %s", path, e)
            return None
        inode = None
        try:
            st = os.fstat(fd)
            inode = st.st_ino
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if st.st_size != block_len + TRAILER.size:
                result = None  # short (or long): corrupt
            elif self.verify_every_read or self._verified.get(name) != stamp:
                result = self._read_verifying(name, fd, block_len, offset, length, dest)
                if result is not None:
                    self._remember(name, stamp)
            else:
                result = _pread_exact(fd, offset, length, dest)
        except OSError as e:
            log.debug("block cache: cannot read %s: %s", path, e)
            result = None
        finally:
            os.close(fd)
        if result is None:
            self.discard_corrupt(name, inode)
            return None
        self._touch(name)
        return result

    def _read_verifying(self, name, fd, block_len, offset, length, dest):
        """Read the whole block, check trailer and checksum, return the requested part."""
        whole = (
            dest
            if dest is not None and offset == 0 and length == block_len
            else bytearray(block_len)
        )
        trailer = bytearray(TRAILER.size)
        # One more byte than expected detects a file that grew since fstat.
        got = os.preadv(fd, [whole, trailer, bytearray(1)], 0)
        if got != block_len + TRAILER.size or not self._trailer_matches(name, trailer, whole):
            return None
        if whole is dest:
            return True
        part = memoryview(whole)[offset : offset + length]
        if dest is None:
            return bytes(part)
        dest[:] = part
        return True

    def _remember(self, name: str, stamp: tuple) -> None:
        if len(self._verified) >= VERIFIED_MEMO_SIZE:
            self._verified.clear()  # simple bound; entries are re-verified on next read
        self._verified[name] = stamp

    def _trailer_matches(self, name: str, trailer, payload) -> bool:
        magic, version, length, mac = TRAILER.unpack(trailer)
        return (
            magic == MAGIC
            and version == FORMAT_VERSION
            and length == len(payload)
            and hmac.compare_digest(
                cache_files.keyed_mac(self._secret, name.encode(), payload), mac
            )
        )

    def discard_corrupt(self, name: str, inode: int | None = None) -> None:
        """Delete a block file that failed verification (only if it is still the file that
        was read, ``inode``, and not a good one published since), and its index row."""
        counters.add("block_cache.corrupt_blocks")
        self._verified.pop(name, None)
        path = self.path_of(name)
        log.debug("block cache: corrupt block %s removed", path)
        try:
            with self._write() as conn:
                try:
                    current = os.stat(path).st_ino
                except FileNotFoundError:
                    current = None
                if inode is None or current == inode:
                    self._drop_row(conn, name)
                    cache_files.remove_if_present(path)
        except (OSError, sqlite3.Error) as e:
            log.debug("block cache: could not remove corrupt block %s: %s", path, e)

    def drop_key(self, key: str) -> int:
        """Delete every block of ``key`` (a file version the store no longer holds); returns
        how many. Never raises: a failure is logged and the blocks stay until evicted."""
        return self._drop_names(f"{key}-", key + ".")

    def drop_prefix(self, prefix: str) -> int:
        """Delete every block whose key starts with ``prefix`` (hex; "": every block), as
        ``drop_key`` does: under the index's write lock, so no put of another process is
        half seen. A reader holding a block file open reads it whole."""
        return self._drop_names(prefix, prefix + "g")  # keys are lower-case hex: < "g"

    def _drop_names(self, low: str, high: str, healed: bool = False) -> int:
        if not self.enabled:
            return 0
        try:
            with self._write() as conn:
                self._adopt_locked(conn)  # a JVM's blocks not yet indexed go too
                names = [
                    n
                    for (n,) in conn.execute(
                        "SELECT name FROM blocks WHERE name >= ? AND name < ?", (low, high)
                    )
                ]
                for name in names:
                    self._verified.pop(name, None)
                    self._drop_row(conn, name)
                    if _BLOCK_NAME.match(name):  # else a damaged row: it names no file
                        cache_files.remove_if_present(self.path_of(name))
            return len(names)
        except (OSError, sqlite3.Error) as e:
            # A damaged index is rebuilt from the files, then the drop runs on it: a clear
            # always leaves a working, empty store.
            if not healed and is_damage(e) and self.heal(e):
                return self._drop_names(low, high, healed=True)
            log.warning(
                "block cache: could not drop the blocks of %s* in %s: %s", low, self.directory, e
            )
            return 0

    # --- writing ----------------------------------------------------------------------------

    def put(self, key: str, index: int, payload, *, retry: bool = True) -> bool:
        """Publish one block; False (counted) if it could not be stored. A damaged index
        met on the way is rebuilt and the put tried once more (``retry``)."""
        if not self.enabled:
            return False
        name = block_name(key, index)
        size = len(payload) + TRAILER.size
        if size > self.max_size:
            return False
        tmp = published = None
        try:
            try:
                tmp = self._write_temp(name, payload)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                # Disk full: make room from our own blocks, then try once more.
                self.evict_to(max(0, self.total_bytes() - size))
                tmp = self._write_temp(name, payload)
            final = self.path_of(name)
            # Publish and index under the index's write lock, so that an eviction in another
            # process never sees a published file without its row.
            with self._write() as conn:
                self._flush_touches(conn)
                cache_files.make_dirs(os.path.dirname(final), self.dir_mode)
                os.replace(tmp, final)
                tmp, published = None, final
                self._upsert_row(conn, name, size, self.clock())
                self._adopt_locked(conn)
                self._evict_locked(conn, self.max_size)
            return True
        except (OSError, sqlite3.Error) as e:
            if published:  # the index rolled back: a file without its row is not kept
                cache_files.remove_if_present(published)
            if is_damage(e) and self.heal(e) and retry:
                if tmp is not None:
                    cache_files.remove_if_present(tmp)
                    tmp = None
                return self.put(key, index, payload, retry=False)
            counters.add("block_cache.put_errors")
            self._fault(
                f"could not store block {name}",
                getattr(e, "filename", None) or (tmp if tmp is not None else self.path_of(name)),
                e,
            )
            return False
        finally:
            if tmp is not None:
                cache_files.remove_if_present(tmp)

    def _write_temp(self, name: str, payload) -> str:
        tmp = os.path.join(self.tmp_dir, f"{os.getpid()}.{secrets.token_hex(8)}.part")
        try:
            with open(tmp, "xb", opener=self._opener) as f:
                f.write(payload)
                f.write(encode_trailer(self._secret, name, payload))
        except OSError as e:
            cache_files.remove_if_present(tmp)
            if e.filename is None:  # a failed write ("No space left on device") names no file
                raise OSError(e.errno, e.strerror, tmp) from e
            raise
        except BaseException:
            cache_files.remove_if_present(tmp)
            raise
        return tmp

    def _fault(self, what: str, path: str, e: BaseException) -> None:
        """Log a cache fault naming the cache file it concerns: the first as a warning, the
        rest at debug level (each is counted by the caller). The read goes on from the
        store."""
        self.last_fault = f"{what}: {path}: {type(e).__name__}: {e}"
        if self._fault_warned:
            log.debug("block cache (%s): %s", self.directory, self.last_fault)
            return
        self._fault_warned = True
        log.warning(
            "block cache (%s): %s; reading from the store instead (further faults "
            "are counted in block_cache.put_errors and logged at debug level)",
            self.directory,
            self.last_fault,
        )

    # --- blocks the JVM published ------------------------------------------------------------

    def adopt_published(self) -> int:
        """Fold the blocks a JVM published (``adopt/*.names``) into the index, then evict past
        capacity as a put does; returns how many rows were added. Never raises: a failure is
        logged at debug level and the names files stay for the next fold."""
        if not self.enabled:
            return 0
        try:
            if not any(e.name.endswith(ADOPT_SUFFIX) for e in _scandir(self.adopt_dir)):
                # Nothing to fold: no write transaction (the planner asks once per scan it
                # hands to the JVM), only the capacity kept current.
                self._publish_capacity(self.total_bytes())
                return 0
            with self._write() as conn:
                adopted = self._adopt_locked(conn)
                if adopted:
                    self._flush_touches(conn)
                    self._evict_locked(conn, self.max_size)
                row = conn.execute("SELECT bytes FROM totals").fetchone()
            # After the commit: a JVM reading it may fill the room the index now leaves.
            self._publish_capacity(int(row[0]) if row else 0)
            return adopted
        except (OSError, sqlite3.Error) as e:
            log.debug("block cache: could not adopt published blocks in %s: %s", self.directory, e)
            if is_damage(e):
                self.heal(e)
            return 0

    def _adopt_locked(self, conn: sqlite3.Connection) -> int:
        """For each names file: each named block whose file exists, is the size its trailer
        says and has no row gets one (atime now); then the names file goes. A names file
        that is not one (not ASCII lines of block names) is removed. Counted in
        ``block_cache.adopted``. The caller holds the write lock and evicts."""
        adopted = 0
        for entry in _scandir(self.adopt_dir):
            if not entry.name.endswith(ADOPT_SUFFIX):
                continue
            try:
                with open(entry.path, "rb") as f:
                    text = f.read()
            except FileNotFoundError:
                continue  # folded by another process meanwhile
            names = _parse_names(text)
            if names is None:
                log.debug("block cache: unreadable names file %s removed", entry.path)
            else:
                now = self.clock()
                for name in names:
                    size = self._published_size(name)
                    if size is None:
                        continue
                    if conn.execute("SELECT 1 FROM blocks WHERE name = ?", (name,)).fetchone():
                        continue
                    self._upsert_row(conn, name, size, now)
                    adopted += 1
            cache_files.remove_if_present(entry.path)
        if adopted:
            counters.add("block_cache.adopted", adopted)
        return adopted

    def _published_size(self, name: str) -> int | None:
        """The size of block file ``name`` if it exists and is as long as its trailer says
        (its MAC is checked by the first read, as for any block); else None."""
        try:
            with open(self.path_of(name), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < TRAILER.size:
                    return None
                f.seek(size - TRAILER.size)
                magic, version, length, _ = TRAILER.unpack(f.read(TRAILER.size))
        except (FileNotFoundError, struct.error):
            return None
        if magic != MAGIC or version != FORMAT_VERSION or length + TRAILER.size != size:
            return None
        return size

    # --- capacity -------------------------------------------------------------------------

    def total_bytes(self) -> int:
        with self._locked():
            row = self._connection().execute("SELECT bytes FROM totals").fetchone()
        return int(row[0]) if row else 0

    def evict_to(self, limit: int) -> int:
        """Evict least recently used blocks until at most ``limit`` bytes remain."""
        try:
            with self._write() as conn:
                self._flush_touches(conn)
                return self._evict_locked(conn, limit)
        except (OSError, sqlite3.Error) as e:
            log.debug("block cache: eviction in %s failed: %s", self.directory, e)
            if is_damage(e):
                self.heal(e)
            return 0

    def _evict_locked(self, conn: sqlite3.Connection, limit: int) -> int:
        evicted = 0
        row = conn.execute("SELECT bytes FROM totals").fetchone()
        total = row[0] if row is not None and isinstance(row[0], int) else 0
        while total > limit:
            victims = conn.execute(
                "SELECT name, size FROM blocks ORDER BY atime, name LIMIT 64"
            ).fetchall()
            if not victims:
                break
            for name, size in victims:
                if total <= limit:
                    break
                self._drop_row(conn, name)
                # A row damaged in a way SQLite did not notice names no block file: its row
                # goes, and nothing is unlinked for it.
                if isinstance(name, str) and _BLOCK_NAME.match(name):
                    cache_files.remove_if_present(self.path_of(name))
                total -= size if isinstance(size, int) else 0
                evicted += 1
        if evicted:
            counters.add("block_cache.evictions", evicted)
        return evicted

    # --- last access --------------------------------------------------------------------------

    def _touch(self, name: str) -> None:
        with self._locked():
            now = self.clock()
            self._pending[name] = now
            due = (
                len(self._pending) >= self.touch_batch
                or now - self._last_touch_flush >= self.touch_interval
            )
        if due:
            self.flush_touches()

    def flush_touches(self) -> None:
        """Write buffered last-access times to the index (best effort)."""
        try:
            with self._write() as conn:
                self._flush_touches(conn)
        except (OSError, sqlite3.Error) as e:
            log.debug("block cache: could not record accesses in %s: %s", self.directory, e)
            if is_damage(e):
                self.heal(e)

    def _flush_touches(self, conn: sqlite3.Connection) -> None:
        with self._locked():
            pending, self._pending = self._pending, {}
            self._last_touch_flush = self.clock()
        if pending:
            conn.executemany(
                "UPDATE blocks SET atime = MAX(atime, ?) WHERE name = ?",
                [(t, n) for n, t in pending.items()],
            )

    # --- index ------------------------------------------------------------------------------

    @staticmethod
    def _upsert_row(conn: sqlite3.Connection, name: str, size: int, atime: float) -> None:
        old = conn.execute("SELECT size FROM blocks WHERE name = ?", (name,)).fetchone()
        conn.execute("INSERT OR REPLACE INTO blocks VALUES (?, ?, ?)", (name, size, atime))
        before = old[0] if old and isinstance(old[0], int) else 0  # a damaged row: nothing
        conn.execute("UPDATE totals SET bytes = bytes + ?", (size - before,))

    @staticmethod
    def _drop_row(conn: sqlite3.Connection, name: str) -> None:
        old = conn.execute("SELECT size FROM blocks WHERE name = ?", (name,)).fetchone()
        if old:
            conn.execute("DELETE FROM blocks WHERE name = ?", (name,))
            conn.execute("UPDATE totals SET bytes = bytes - ?", (old[0],))

    def count(self) -> int:
        """Blocks in the index."""
        with self._locked():
            return int(self._connection().execute("SELECT COUNT(*) FROM blocks").fetchone()[0])

    def entries(self) -> dict[str, int]:
        """``{name: size}`` of every indexed block (for tests and tools)."""
        with self._locked():
            return dict(self._connection().execute("SELECT name, size FROM blocks").fetchall())

    def _connection(self) -> sqlite3.Connection:
        # Caller holds self._locked().
        try:
            inode: int | None = os.stat(self.index_path).st_ino
        except FileNotFoundError:
            inode = None  # removed by hand: a new one is created
        if self._conn is not None and inode != self._conn_inode:
            # Set aside by another process's rebuild, or removed: the file this connection
            # has is no longer the node's index.
            self._close_connection()
        if self._conn is None:
            # The index is rebuilt from the files by recovery (a damaged one too), so it
            # need not survive a power loss: synchronous=OFF spares the fsyncs of a rollback
            # journal, which replaces WAL so that no process maps the index (sqlite_wal).
            self._conn = connect_wal(
                self.index_path,
                timeout=30,
                schema=_SCHEMA,
                pragmas=("PRAGMA synchronous=OFF",),
                check_same_thread=False,
                journal_mode="TRUNCATE",
            )
            self._conn_inode = os.stat(self.index_path).st_ino
        return self._conn

    def _rebuild_index(self, error: BaseException) -> None:
        """Set the damaged index aside and build a new one from the verified block files
        (recovery): the rule of ``damaged_index.rebuild_index``."""

        def rebuild() -> str:
            self.last_recovery = self.recover()
            return "from the block files (blocks that do not verify are dropped)"

        with self._locked():
            damaged = self._conn_inode
            self._close_connection()
            # Only the file this store found damaged: another process may have set it aside
            # and started a new index already.
            counters.add("block_cache.index_rebuilt")
            rebuild_index(
                self.index_path,
                inode=damaged,
                error=error,
                what=f"block cache {self.directory}",
                rebuild=rebuild,
            )

    def heal(self, error: BaseException) -> bool:
        """After ``error`` (a damaged index met by a transaction): set the index aside and
        rebuild it; False (logged) when that fails too, the store then missing and failing
        puts as before."""
        try:
            self._rebuild_index(error)
            return True
        except (OSError, sqlite3.Error) as e:
            log.warning("block cache %s: could not rebuild its index (%s)", self.directory, e)
            return False

    def _locked(self) -> threading.RLock:
        """The lock of this process. Neither a lock (another thread may have held it) nor a
        SQLite connection may cross a fork: the child starts with its own."""
        if self._pid != os.getpid():
            self._lock = threading.RLock()
            self._conn = None  # the parent's: abandoned, never used or closed here
            self._pending = {}
            self._pid = os.getpid()
        return self._lock

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: the node-wide write lock), rolled back on
        any error."""
        with self._locked():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _close_connection(self) -> None:
        with self._locked():
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
            self._conn_inode = None

    def close(self) -> None:
        if self.enabled:
            self.flush_touches()
        self._close_connection()

    # --- start-up -------------------------------------------------------------------------

    def _prepare_directory(self) -> None:
        cache_files.make_dirs(self.directory, self.dir_mode)
        cache_files.make_dirs(self.tmp_dir, self.dir_mode)
        cache_files.make_dirs(self.data_dir, self.dir_mode)
        cache_files.make_dirs(self.adopt_dir, self.dir_mode)
        self._secret = cache_files.load_secret(self.directory, self.file_mode)
        # SQLite gives -wal and -shm the database file's mode; the lock file is ours.
        cache_files.touch(self.index_path, self.file_mode)
        cache_files.touch(self.index_path + ".init-lock", self.file_mode)
        # Prove we can publish (write + rename) here before promising to cache anything.
        probe = os.path.join(self.tmp_dir, f"{os.getpid()}.{secrets.token_hex(8)}.part")
        with open(probe, "xb", opener=self._opener) as f:
            f.write(b"probe")
        try:
            os.replace(probe, probe + ".ok")
        finally:
            cache_files.remove_if_present(probe)
        cache_files.remove_if_present(probe + ".ok")
        self._publish_capacity()

    def _publish_capacity(self, held: int | None = None) -> None:
        """Write ``max_size`` and ``held``, the bytes the index holds, to ``capacity`` (temp
        file + ``os.replace``): how far a JVM may fill the directory before a store adopts
        and evicts its blocks (``BlockCachingFileSystem.scala``: the room left, at least a
        tenth of the capacity; the blocks Python stores after this count only at the next
        adoption, so the directory may pass the bound by those until then). The last store
        to write wins (stores of one node share their settings). ``held`` None: a store
        opening, which has not read the index yet: the JVM then keeps to the tenth. A file
        that says so already is left as it is (no write: a scan's planning asks each time)."""
        text = f"{self.max_size}\n" if held is None else f"{self.max_size}\n{held}\n"
        path = os.path.join(self.directory, CAPACITY_FILE)
        try:
            with open(path, "rb") as f:
                if f.read(64) == text.encode():
                    return
        except FileNotFoundError:
            pass
        tmp = os.path.join(self.tmp_dir, f"{os.getpid()}.{secrets.token_hex(8)}.part")
        try:
            with open(tmp, "xb", opener=self._opener) as f:
                f.write(text.encode())
            os.replace(tmp, path)
        finally:
            cache_files.remove_if_present(tmp)

    def recover(self) -> dict[str, int]:
        """Make index and disk agree after crashes; returns what was fixed, by kind."""
        fixed = {
            "orphan_temps": 0,
            "partial_files": 0,
            "missing_files": 0,
            "adopted": 0,
            "foreign_files": 0,
            "evicted": 0,
        }
        now = self.clock()
        with self._write() as conn:
            fixed["orphan_temps"] = self._remove_orphan_temps(now)
            # The JVM's blocks first, with atime now; the scan below verifies and adopts
            # whatever else has no row (a names file lost with a JVM that died).
            fixed["adopted"] = self._adopt_locked(conn)
            rows = dict(conn.execute("SELECT name, size FROM blocks").fetchall())
            on_disk: set[str] = set()
            torn = 0
            for path, name in self._data_files():
                if not _BLOCK_NAME.match(name) or os.path.dirname(path) != os.path.dirname(
                    self.path_of(name)
                ):
                    cache_files.remove_if_present(path)
                    fixed["foreign_files"] += 1
                    continue
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                if name in rows:
                    if st.st_size == rows[name]:
                        on_disk.add(name)
                    else:  # torn or truncated: its row goes with the rows of missing files
                        cache_files.remove_if_present(path)
                        fixed["partial_files"] += 1
                        torn += 1
                elif self.verify_file(path):
                    conn.execute(
                        "INSERT OR REPLACE INTO blocks VALUES (?, ?, ?)",
                        (name, st.st_size, min(st.st_mtime, now)),
                    )
                    on_disk.add(name)
                    fixed["adopted"] += 1
                else:
                    cache_files.remove_if_present(path)
                    fixed["partial_files"] += 1
            gone = [(name,) for name in rows if name not in on_disk]
            conn.executemany("DELETE FROM blocks WHERE name = ?", gone)
            fixed["missing_files"] = len(gone) - torn
            conn.execute("UPDATE totals SET bytes = (SELECT COALESCE(SUM(size), 0) FROM blocks)")
            fixed["evicted"] = self._evict_locked(conn, self.max_size)
        if any(fixed.values()):
            log.info("block cache %s recovered: %s", self.directory, fixed)
        return fixed

    def _remove_orphan_temps(self, now: float) -> int:
        removed = 0
        for entry in _scandir(self.tmp_dir):
            m = _TEMP_NAME.match(entry.name)
            try:
                age = now - entry.stat().st_mtime
            except FileNotFoundError:
                continue
            if m is None or not _pid_alive(int(m.group(1))) or age > ORPHAN_AGE:
                cache_files.remove_if_present(entry.path)
                removed += 1
        return removed

    def _data_files(self) -> Iterator[tuple[str, str]]:
        for sub in _scandir(self.data_dir):
            if not sub.is_dir(follow_symlinks=False):
                yield sub.path, sub.name
                continue
            for entry in _scandir(sub.path):
                yield entry.path, entry.name

    def verify_file(self, path: str) -> bool:
        """Whether the block file at ``path`` is whole: its keyed checksum matches."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return False
        if len(data) < TRAILER.size:
            return False
        view = memoryview(data)
        return self._trailer_matches(
            os.path.basename(path), view[-TRAILER.size :], view[: -TRAILER.size]
        )


def read_only_usage(directory: str) -> tuple[int, int]:
    """``(blocks, bytes)`` the index of the store in ``directory`` accounts for, read without
    writing anything (no recovery, no file created: ``raptorx cache stats`` on a read-only
    directory); (0, 0) without an index. Raises ``sqlite3.Error`` when it cannot be read."""
    path = os.path.join(directory, INDEX_FILE)
    if not os.path.exists(path):
        return 0, 0
    conn = connect_read_only(path)
    try:
        (count,) = conn.execute("SELECT COUNT(*) FROM blocks").fetchone()
        row = conn.execute("SELECT bytes FROM totals").fetchone()
    finally:
        conn.close()
    return int(count), int(row[0]) if row else 0


def _parse_names(text: bytes) -> list[str] | None:
    """The block names of a names file (``\n``-terminated lines), or None if it is not one."""
    try:
        decoded = text.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not decoded.endswith("\n"):
        return None
    names = decoded[:-1].split("\n")
    return names if all(_BLOCK_NAME.match(n) for n in names) else None


def _pread_exact(fd: int, offset: int, length: int, dest):
    """``length`` bytes at ``offset``: into ``dest`` (True) or as new bytes; None if short."""
    if dest is None:
        data = os.pread(fd, length, offset)
        return data if len(data) == length else None
    return True if os.preadv(fd, [dest], offset) == length else None


def _scandir(path: str) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except FileNotFoundError:
        return []


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True
