"""The fragment result cache: a split's result (its rows after filters, or its partial
aggregation) kept on the node's local disk as Arrow IPC, so a query that reads the same
piece of the same file version in the same way is answered without reading or decoding it.

Contract:
- Entries are found by a key the caller builds (``datasource.planning.fragment_keys``, computed at
  planning from the split's ``datasource.planning.read_spec.ReadSpec``): its bytes name everything
  the result depends on, the computing code's identity among them. The cache never
  interprets a key: an entry is served only for the very same key, so a file that changes,
  a new write or new code is a new key.
- **One file per entry**, ``entries/<first two hex digits>/<key in hex>.arrow``, published
  whole (temporary file + ``os.replace``): a reader opens the file its key names, with no
  index to read, which is how the JVM serves hits (``native/.../FragmentHits.scala``). The
  file is a 48-byte header (``ENTRY_MAGIC``, a format byte, the expiry time in epoch
  milliseconds or 0, an HMAC-SHA256 keyed with the cache's secret (``cache_files``) over
  the header's first 16 bytes, the key and the stream) and the result's Arrow IPC stream,
  its buffers compressed with ZSTD (``ENTRY_COMPRESSION``, Arrow IPC's own buffer
  compression, which the JVM decodes with pyspark's arrow-compression and zstd-jni): fewer
  bytes than the uncompressed stream, at about the same cost per hit (BENCHMARKS.md, "Other
  measurements"). An entry of another format byte (1: uncompressed) is a miss, removed, not
  counted corrupt.
  A torn, truncated, forged (written without the secret) or moved entry fails the MAC: a
  miss, deleted and counted (``fragment_cache.corrupt``). HMAC-SHA256 rather than keyed
  BLAKE2b because the JDK has it (``javax.crypto.Mac``, hardware SHA where the CPU has it):
  measured in BENCHMARKS.md ("Other measurements").
- **diskcache is the index** (``index/cache.db``, a ``diskcache.Cache`` whose ``Disk``,
  ``_EntryFiles``, keeps each row's value in the entry file its key names) and does the
  accounting only: the total size bound (``fragment-result-cache.max-cache-size``, over the
  entries and the index itself: diskcache's ``volume()``), the entry bound
  (``fragment-result-cache.max-cached-entries``: when reached, new results are not stored
  until eviction or expiry makes room, ``fragment_cache.full``) and expiry
  (``fragment-result-cache.cache-ttl``: the row's expiry, and in each entry's header, so a
  reader without the index honours it). A hit reads no index and writes nothing to it: it
  touches the entry file's mtime (the JVM does the same). So on a full disk hits are still
  served (a failed touch is counted, ``fragment_cache.touch_failed``); only stores fail. A
  result bigger than ``fragment-result-cache.max-single-cached-entry-size`` is computed and
  not stored (``fragment_cache.too_large``).
- **Eviction is a second chance (CLOCK) over diskcache's rows**, oldest row first
  (``peekitem``): each row's tag is the entry file's mtime when the row was written; a file
  touched since (a hit, in Python or the JVM) gets a new row at the back instead of being
  removed (``fragment_cache.second_chances``), any other is removed with its file
  (``fragment_cache.evicted``), until the volume is within the bound. diskcache's own
  culling is off (``cull_limit=0``, ``eviction_policy="none"``): its policies order by
  columns a hit would have to write.
- A cache fault never fails a query: a directory that cannot be used turns the tier off for
  the process (``fragment_cache.unavailable``, logged once); a failed read is a miss and a
  failed write stores nothing (``fragment_cache.errors``), the result being computed anyway.
- **A damaged index heals**: an index that is not a database, is malformed or was emptied
  (met when opening it or by a store) is set aside (``index/cache.db.damaged``, renamed,
  never truncated) and a new one is built from the entry files whose MAC verifies under the
  cache's secret (the others are deleted as corrupt): ``fragment_cache.index_rebuilt``,
  logged once per directory. A damaged ``cache.secret`` is replaced
  (``cache_files.load_secret``); the entries keyed with the old one then fail their MAC. A
  process whose index another process set aside opens the new one at its next store.
- **No memory mapping** (``sqlite_wal``): diskcache's SQLite runs with ``mmap_size=0`` and
  a rollback journal (diskcache's defaults are a 64 MiB mapping and WAL, whose ``-shm`` is
  always mapped): a store after another process cleared, truncated or replaced the index
  gets an error (counted, nothing stored), never SIGBUS.
- **Within its bound from the start**: opening a cache over its bound (the bound lowered
  since it was filled) evicts down to it; when that cannot be done (a read-only directory)
  a warning says so and why.

- **Entries the JVM stores** (``native/.../FragmentStores.scala``: Spark's reader read a split
  whose fragment the planner asked to be kept) are the same files, published the same way
  (a temporary file under ``tmp/``, then an atomic rename); the JVM has no SQLite driver,
  so it also publishes ``adopt/<random>.names`` (one ``<key hex> <bytes>`` line per
  entry), which a store, the cache's opening and the planner fold into the index
  (``adopt_published``: a row per named entry whose header reads as this format,
  ``fragment_cache.adopted``; then eviction as after a store). The JVM stops storing while
  the entries named by names files not yet folded exceed ``max_cache_size`` (a node whose
  Python never runs would otherwise grow without bound).

Limits: an entry is written to a temporary file, its row committed (``synchronous=FULL``),
then the file published (``os.replace``), so a crash between the two leaves a row without a
file (a miss, removed by eviction), never an unaccounted file; a process killed while
writing leaves its temporary file (``.*.tmp``) behind. A row's place in the eviction order
is its first store or its last second chance, not its last use (CLOCK's approximation of
least recently used); a result stored again under a key that has a row keeps that row's
place. The index's expiry is by the wall clock, the header's by the cache's ``clock`` (the
same outside tests). A directory written by the layout before diskcache came back
(``index.db``) keeps its entries unaccounted: they are served, never evicted; delete the
directory. Files are created 0600 in a 0700 directory (``cache.group-shared``: 0660 and
2770). Usable without Spark.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterable

import diskcache
import pyarrow as pa
from diskcache.core import DBNAME, MODE_BINARY, UNKNOWN

from raptorx_py.cache.cache_files import (
    load_secret,
    make_dirs,
    modes,
    opener,
    remove_if_present,
    touch,
)
from raptorx_py.cache.process_registry import ProcessRegistry
from raptorx_py.config.tiers import FragmentCacheSettings
from raptorx_py.damaged_index import rebuild_index
from raptorx_py.metrics import counters, node_gauge
from raptorx_py.sqlite_wal import (
    connect_read_only,
    is_damage,
    set_up_lock,
    undecodable_is_damage,
)

log = logging.getLogger(__name__)

#: What an entry file starts with; the JVM's reader checks the same (FragmentHits.scala).
ENTRY_MAGIC = b"RXF1"
#: 2: the stream's buffers compressed (``ENTRY_COMPRESSION``, Arrow IPC's own buffer
#: compression, which the JVM reads with arrow-compression); 1 (before): uncompressed. An
#: entry of another format is a miss on both sides (removed here, not counted corrupt).
ENTRY_FORMAT = 2
#: The codec of the entries' Arrow IPC buffers (``pa.ipc.IpcWriteOptions``; None: none):
#: chosen by ``benchmarks/fragment_compression.py`` (docs/design/fragment-cache-and-
#: statistics.md, "Fragment result cache").
ENTRY_COMPRESSION: str | None = "zstd"
#: magic, format, 3 reserved bytes, expiry (epoch ms, 0: none): the MAC's first input.
_PREFIX = struct.Struct("<4sB3xq")
MAC_BYTES = 32
HEADER_BYTES = _PREFIX.size + MAC_BYTES  # 48
ENTRIES_DIR = "entries"
ENTRY_SUFFIX = ".arrow"
#: Names files of the entries a JVM published (``adopt_published``), and their suffix.
ADOPT_DIR = "adopt"
ADOPT_SUFFIX = ".names"
#: diskcache's directory (its ``cache.db``) under the cache directory.
INDEX_DIR = "index"

#: UnicodeDecodeError: how damage shows through diskcache's own connections
#: (``sqlite_wal.undecodable_is_damage``).
_FAULTS = (OSError, sqlite3.Error, diskcache.Timeout, UnicodeDecodeError)
#: What an index row may name: an entry file under ``entries/`` (``_entry_name``).
_ENTRY_NAME = re.compile(r"^entries/[0-9a-f]{2}/[0-9a-f]+\.arrow$")
#: A line of a names file: the entry's key in hex and its file's size.
_ADOPT_LINE = re.compile(r"^([0-9a-f]{4,256}) ([0-9]+)$")


def entry_mac(secret: bytes, prefix: bytes, key: bytes, stream) -> bytes:
    """HMAC-SHA256 keyed with ``secret`` over an entry's header prefix, its key (length
    first) and its Arrow stream."""
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    mac.update(prefix)
    mac.update(len(key).to_bytes(4, "little"))
    mac.update(key)
    mac.update(stream)
    return mac.digest()


def file_prefix(url: str) -> bytes:
    """What the key of every entry computed from the file at ``url`` starts with (the
    caller's key puts it first: ``datasource.planning.fragment_keys``), so ``invalidate`` finds a
    file's entries by name."""
    return hashlib.sha256(url.encode()).digest()[:8]


def _entry_name(key: bytes) -> str:
    """The entry file of ``key``, relative to the cache directory."""
    name = key.hex()
    return os.path.join(ENTRIES_DIR, name[:2], name + ENTRY_SUFFIX)


def entry_path(directory: str, key: bytes) -> str:
    """Where the entry of ``key`` lives under the cache ``directory``."""
    return os.path.join(directory, _entry_name(key))


class _Written:
    """An index row's value: the entry file ``name`` (relative to the cache directory) of
    ``size`` bytes, already on disk (a temporary file about to be published, or a file in
    place being given a second chance)."""

    __slots__ = ("name", "size")

    def __init__(self, name: str, size: int) -> None:
        self.name, self.size = name, size


class _EntryFiles(diskcache.Disk):
    """diskcache's ``Disk`` for the fragment cache: a row's value is the entry file named by
    its key, outside diskcache's directory (the index's parent holds ``entries/``). The row
    stores the file's name (``filename``) and size; the file itself is written and published
    by ``FragmentCache.put``, so ``store`` does no I/O, and ``fetch`` returns the name
    without opening it (``peekitem`` would retry a row whose fetch fails for ever).
    ``remove``, called by diskcache after it deleted a row (expiry, ``delete``, a row
    replaced), unlinks the file, unless the name is in ``retained`` (a second chance moves
    a row, not its file)."""

    def __init__(self, directory, **kwargs) -> None:
        super().__init__(directory, **kwargs)
        self.root = os.path.dirname(os.path.abspath(directory))
        self.retained: set[str] = set()

    def filename(self, key=UNKNOWN, value=UNKNOWN):
        name = _entry_name(key)
        return name, os.path.join(self.root, name)

    def store(self, value, read, key=UNKNOWN):
        if not isinstance(value, _Written):
            raise TypeError(f"the fragment index stores entry files, not {type(value).__name__}")
        return value.size, MODE_BINARY, value.name, None

    def fetch(self, mode, filename, value, read):
        return filename

    def remove(self, file_path):
        if file_path in self.retained:
            return
        if not isinstance(file_path, str) or not _ENTRY_NAME.match(file_path):
            # A row damaged in a way SQLite did not notice: never unlink what it names.
            counters.add("fragment_cache.errors")
            return
        try:
            os.unlink(os.path.join(self.root, file_path))
        except FileNotFoundError:
            pass
        except OSError as e:
            # diskcache calls this after its commit: the row is gone whatever happens here.
            counters.add("fragment_cache.errors")
            log.warning("fragment cache %s: cannot remove %s (%s)", self.root, file_path, e)


class FragmentCache:
    """Split results on local disk, keyed by the caller's key bytes (see the module's
    docstring for the contract). ``clock``: seconds since the epoch (tests inject one)."""

    def __init__(
        self,
        directory: str,
        *,
        max_bytes: int,
        max_entries: int,
        max_entry_bytes: int,
        ttl: float | None,
        group_shared: bool = False,
        clock: Callable[[], float] = time.time,
        shrink: bool = True,
        compression: str | None = ENTRY_COMPRESSION,
    ) -> None:
        self.directory = directory
        self._write_options = pa.ipc.IpcWriteOptions(compression=compression)
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.max_entry_bytes, self.ttl = max_entry_bytes, ttl or None
        self.group_shared = group_shared
        self._clock = clock
        self._dir_mode, self._file_mode = modes(group_shared)
        make_dirs(os.path.join(directory, ENTRIES_DIR), self._dir_mode)
        index_dir = os.path.join(directory, INDEX_DIR)
        make_dirs(index_dir, self._dir_mode)
        self._secret = load_secret(directory, self._file_mode)
        self._index_path = os.path.join(index_dir, DBNAME)
        self._lock = threading.Lock()
        try:
            self._index, self._index_inode = self._open_index()
        except sqlite3.DatabaseError as e:
            if not is_damage(e):
                raise
            self._rebuild_index(e)
        self._files: _EntryFiles = self._index.disk
        self.adopt_published()
        if shrink:
            self._shrink_at_open()

    def _open_index(self) -> tuple[diskcache.Cache, int]:
        """diskcache over ``index/`` and the inode of its ``cache.db``."""
        touch(self._index_path, self._file_mode)
        # diskcache retries "database is locked" while it sets up, not every error a fresh
        # WAL file can give several processes opening it at once: one at a time, as
        # connect_wal does.
        with set_up_lock(self._index_path), undecodable_is_damage():
            index = diskcache.Cache(
                os.path.dirname(self._index_path),
                timeout=30,
                disk=_EntryFiles,
                eviction_policy="none",
                cull_limit=0,
                size_limit=self.max_bytes,
                # FULL, as the index before it: a committed row survives a power loss, so a
                # published entry file is never left unaccounted (diskcache's NORMAL, 1.5x
                # faster stores, may lose the last commits: BENCHMARKS.md).
                sqlite_synchronous=2,
                # No mapping of a file other processes clear or replace (sqlite_wal): no
                # 64 MiB mmap of the database, no WAL (its -shm is always mapped).
                sqlite_mmap_size=0,
                sqlite_journal_mode="truncate",
            )  # its set-up ends by opening this thread's connection, under the lock
        try:
            return index, os.stat(self._index_path).st_ino
        except OSError:
            index.close()
            raise

    def _rebuild_index(self, error: BaseException) -> None:
        """Set the damaged index aside, open a new one and give it a row for every entry
        file that verifies (the others are deleted): the rule of
        ``damaged_index.rebuild_index``."""
        old = getattr(self, "_index", None)
        damaged = getattr(self, "_index_inode", None)
        if old is not None:
            old.close()

        def rebuild() -> str:
            self._index, self._index_inode = self._open_index()
            self._files = self._index.disk
            kept = dropped = 0
            for name in self._entry_names(""):
                key = bytes.fromhex(name)
                path = entry_path(self.directory, key)
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                checked = self._check(key, data)
                if checked is None or checked is _EXPIRED or checked is _OTHER_FORMAT:
                    remove_if_present(path)
                    dropped += 1
                    if checked is None:
                        counters.add("fragment_cache.corrupt")
                    continue
                expires_ms = _PREFIX.unpack(data[: _PREFIX.size])[2]
                self._index.set(
                    key,
                    _Written(_entry_name(key), st.st_size),
                    expire=_index_expiry(expires_ms),
                    tag=st.st_mtime_ns,
                )
                kept += 1
            return f"from the entry files ({kept} kept, {dropped} that did not verify dropped)"

        # Only the file this cache found damaged (None at opening: the file there now).
        counters.add("fragment_cache.index_rebuilt")
        rebuild_index(
            self._index_path,
            inode=damaged,
            error=error,
            what=f"fragment cache {self.directory}",
            rebuild=rebuild,
        )

    def _current_index(self) -> None:
        """Reopen the index when another process set it aside (or removed it) since this
        one opened it (caller holds ``_lock``)."""
        try:
            inode: int | None = os.stat(self._index_path).st_ino
        except FileNotFoundError:
            inode = None
        if inode != self._index_inode:
            self._index.close()
            self._index, self._index_inode = self._open_index()
            self._files = self._index.disk

    def _shrink_at_open(self) -> None:
        """Evict down to the bound now (it may have been lowered since the cache was
        filled), or say why that cannot be done."""
        try:
            with self._lock:
                volume = self._index.volume()
                if volume <= self.max_bytes:
                    return
                self._evict(stored=None)
                log.info(
                    "fragment cache %s: %d bytes over its bound of %d at opening; evicted to %d",
                    self.directory,
                    volume,
                    self.max_bytes,
                    self._index.volume(),
                )
        except _FAULTS as e:
            counters.add("fragment_cache.errors")
            log.warning(
                "fragment cache %s is over its bound of %d bytes and cannot shrink to it now "
                "(%s: %s); nothing more is stored until it can",
                self.directory,
                self.max_bytes,
                type(e).__name__,
                e,
            )

    # --- reading: files only, nothing written but the entry's mtime ----------------------

    def get(self, key: bytes) -> list[pa.RecordBatch] | None:
        """The batches stored under ``key``, or None (a miss: absent, expired, corrupt or
        unreadable)."""
        path = entry_path(self.directory, key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            counters.add("fragment_cache.misses")
            return None
        except OSError as e:
            counters.add("fragment_cache.errors")
            log.warning("fragment cache %s: read failed (%s); computing", self.directory, e)
            return None
        batches = self._decode(key, data)
        if batches is None:
            counters.add("fragment_cache.corrupt")
            counters.add("fragment_cache.misses")
            log.warning("fragment cache %s: entry %s is corrupt; deleted", self.directory, path)
            self._remove(key)
            return None
        if batches is _EXPIRED or batches is _OTHER_FORMAT:
            if batches is _EXPIRED:
                counters.add("fragment_cache.expired")
            counters.add("fragment_cache.misses")
            self._remove(key)
            return None
        try:
            os.utime(path)  # its last use, for eviction (nothing else is written on a hit)
        except OSError:
            counters.add("fragment_cache.touch_failed")
        counters.add("fragment_cache.hits")
        counters.add("fragment_cache.bytes_read", len(data))
        return batches

    def _decode(self, key: bytes, data: bytes):
        """The entry's batches, ``_EXPIRED``, ``_OTHER_FORMAT``, or None when it is not a
        valid entry of ``key`` under this cache's secret."""
        stream = self._check(key, data)
        if stream is None or stream is _EXPIRED or stream is _OTHER_FORMAT:
            return stream
        try:
            with pa.ipc.open_stream(pa.py_buffer(stream)) as reader:
                return list(reader)
        except (pa.ArrowInvalid, OSError):
            return None

    def _check(self, key: bytes, data: bytes):
        """The entry's Arrow stream (a view of ``data``), ``_EXPIRED``, ``_OTHER_FORMAT`` (an
        entry written by another version's layout: not verified, never read), or None when
        it is not a valid entry of ``key`` under this cache's secret."""
        if len(data) < HEADER_BYTES:
            return None
        view = memoryview(data)
        prefix = bytes(view[: _PREFIX.size])
        magic, fmt, expires_ms = _PREFIX.unpack(prefix)
        if magic != ENTRY_MAGIC:
            return None
        if fmt != ENTRY_FORMAT:
            return _OTHER_FORMAT
        stream = view[HEADER_BYTES:]
        mac = entry_mac(self._secret, prefix, key, stream)
        if not hmac.compare_digest(mac, bytes(view[_PREFIX.size : HEADER_BYTES])):
            return None
        if expires_ms and self._clock() * 1000 > expires_ms:
            return _EXPIRED
        return stream

    # --- storing ---------------------------------------------------------------------------

    def put(self, key: bytes, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> bool:
        """Store the complete result of ``key``; False when it is not stored (too large,
        full, or a fault)."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema, options=self._write_options) as writer:
            for b in batches:
                writer.write_batch(b)
        stream = sink.getvalue()
        if stream.size > self.max_entry_bytes:
            counters.add("fragment_cache.too_large")
            return False
        return self._store(key, stream, retry=True)

    def _store(self, key: bytes, stream: pa.Buffer, retry: bool) -> bool:
        """Store ``stream`` under ``key`` (see ``put``); once more (``retry``) after healing
        a damaged index that the first attempt met."""
        expires = self._clock() + self.ttl if self.ttl else None
        prefix = _PREFIX.pack(ENTRY_MAGIC, ENTRY_FORMAT, int(expires * 1000) if expires else 0)
        name = _entry_name(key)
        path = os.path.join(self.directory, name)
        try:
            with self._lock:
                self._current_index()
                expired = self._index.expire()
                if expired:
                    counters.add("fragment_cache.expired", expired)
                if len(self._index) >= self.max_entries:
                    counters.add("fragment_cache.full")
                    return False
                tmp = self._write_temporary(
                    path, prefix + entry_mac(self._secret, prefix, key, stream), stream
                )
                try:
                    written = os.stat(tmp)
                    # The row first, then the file: a crash between the two leaves a row
                    # without a file (a miss), never a file the size bound does not see.
                    # The tag is the file's mtime, which a hit moves on (os.utime).
                    self._index.set(
                        key,
                        _Written(name, written.st_size),
                        expire=self.ttl,
                        tag=written.st_mtime_ns,
                    )
                    os.replace(tmp, path)
                except BaseException:
                    remove_if_present(tmp)
                    raise
                self._adopt_locked()
                try:
                    self._evict(stored=key)
                except _FAULTS as e:
                    # Stored all the same; the next store evicts again.
                    counters.add("fragment_cache.errors")
                    log.warning("fragment cache %s: eviction failed (%s)", self.directory, e)
        except _FAULTS as e:
            if is_damage(e) and self._heal(e) and retry:
                return self._store(key, stream, retry=False)
            counters.add("fragment_cache.errors")
            log.warning("fragment cache %s: store failed (%s)", self.directory, e)
            return False
        counters.add("fragment_cache.stores")
        counters.add("fragment_cache.bytes_stored", stream.size)
        return True

    def _write_temporary(self, path: str, header: bytes, stream: pa.Buffer) -> str:
        """Write ``header`` and ``stream`` to a new temporary file beside ``path`` (removed
        again if the write fails); its name."""
        make_dirs(os.path.dirname(path), self._dir_mode)
        tmp = os.path.join(
            os.path.dirname(path), f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp"
        )
        try:
            with open(tmp, "xb", opener=opener(self._file_mode)) as f:
                f.write(header)
                f.write(memoryview(stream))
        except BaseException:
            remove_if_present(tmp)
            raise
        return tmp

    # --- accounting ------------------------------------------------------------------------

    def _evict(self, stored: bytes | None) -> None:
        """Second chance over the index's rows, oldest first, until its volume is within the
        bound: a row whose file was touched since the row was written (its tag) moves to the
        back; any other is deleted with its file. ``stored``, just written, is moved to the
        back once (what is behind it then is older use), and never evicted: alone over the
        bound, it stays."""
        stored_moved = False
        while self._index.volume() > self.max_bytes:
            try:
                (key, name), expire_at, last_use = self._index.peekitem(
                    last=False, expire_time=True, tag=True
                )
            except KeyError:
                return  # empty
            st: os.stat_result | None = None
            if isinstance(name, str) and _ENTRY_NAME.match(name):
                try:
                    st = os.stat(os.path.join(self.directory, name))
                except FileNotFoundError:
                    pass  # gone (a corrupt entry another process deleted): drop the row
            # else a row damaged in a way SQLite did not notice: dropped, names nothing
            if key == stored:
                if stored_moved or st is None:
                    return
                stored_moved = True
            elif st is None or st.st_mtime_ns <= (last_use or 0):
                self._index.delete(key)  # and, through _EntryFiles.remove, its file
                counters.add("fragment_cache.evicted")
                continue
            else:
                counters.add("fragment_cache.second_chances")
            self._move_to_back(key, name, expire_at, st)

    def adopt_published(self) -> int:
        """Fold the entries a JVM published (``adopt/*.names``) into the index, then evict
        to the bound; how many rows were added. Never raises: a fault is counted
        (``fragment_cache.errors``) and the names files stay for the next fold."""
        try:
            with self._lock:
                self._current_index()
                adopted = self._adopt_locked()
                if adopted:
                    self._evict(stored=None)
                return adopted
        except _FAULTS as e:
            counters.add("fragment_cache.errors")
            log.debug(
                "fragment cache %s: could not adopt published entries (%s)", self.directory, e
            )
            return 0

    def _adopt_locked(self) -> int:
        """For each names file: a row for each named entry that has none, whose file exists
        and whose header is this format's (its MAC is checked when it is read, as for any
        entry; an expired one is removed); past ``max_entries`` the file is removed instead
        (``fragment_cache.full``). Then the names file goes. The caller holds ``_lock``."""
        adopted = 0
        names_files = self._names_files()
        if not names_files:
            return 0
        # One transaction for all of them: a commit is an fsync (synchronous=FULL), and a
        # query's second run publishes an entry per split, and one commit each made a
        # planning slow.
        with self._index.transact():
            for names_path in names_files:
                try:
                    with open(names_path, "rb") as f:
                        text = f.read()
                except FileNotFoundError:
                    continue  # folded by another process meanwhile
                for line in text.decode("ascii", "replace").splitlines():
                    m = _ADOPT_LINE.match(line)
                    if m is None or len(m.group(1)) % 2:
                        continue
                    if self._adopt_entry(bytes.fromhex(m.group(1))):
                        adopted += 1
        # The names files go after the commit: a failed transaction leaves them for the
        # next fold.
        for names_path in names_files:
            remove_if_present(names_path)
        if adopted:
            counters.add("fragment_cache.adopted", adopted)
        return adopted

    def _names_files(self) -> list[str]:
        root = os.path.join(self.directory, ADOPT_DIR)
        try:
            with os.scandir(root) as it:
                return sorted(e.path for e in it if e.name.endswith(ADOPT_SUFFIX))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _adopt_entry(self, key: bytes) -> bool:
        """A row for the published entry of ``key`` (see ``_adopt_locked``); whether one
        was added."""
        if key in self._index:
            return False
        path = entry_path(self.directory, key)
        try:
            with open(path, "rb") as f:
                prefix = f.read(_PREFIX.size)
                st = os.fstat(f.fileno())
        except FileNotFoundError:
            return False
        if len(prefix) < _PREFIX.size:
            remove_if_present(path)
            counters.add("fragment_cache.corrupt")
            return False
        magic, fmt, expires_ms = _PREFIX.unpack(prefix)
        expired = expires_ms and self._clock() * 1000 > expires_ms
        if magic != ENTRY_MAGIC or fmt != ENTRY_FORMAT or expired:
            remove_if_present(path)
            return False
        if len(self._index) >= self.max_entries:
            remove_if_present(path)
            counters.add("fragment_cache.full")
            return False
        return bool(
            self._index.add(
                key,
                _Written(_entry_name(key), st.st_size),
                expire=_index_expiry(expires_ms),
                tag=st.st_mtime_ns,
            )
        )

    def _heal(self, error: BaseException) -> bool:
        """Rebuild a damaged index (``_rebuild_index``) after a store met it; False (logged)
        when that fails too (a read-only directory): the next store tries again."""
        try:
            with self._lock:
                self._rebuild_index(error)
            return True
        except _FAULTS as e:
            counters.add("fragment_cache.errors")
            log.warning("fragment cache %s: could not rebuild its index (%s)", self.directory, e)
            return False

    def _move_to_back(self, key: bytes, name: str, expire_at: float | None, st) -> None:
        """A new row for ``key``'s file in place (a new rowid: the back of the order), tagged
        with its mtime now; its expiry kept."""
        remaining = None if expire_at is None else max(expire_at - time.time(), 0.001)
        # Neither the deleted row's clean-up nor a replaced row's (should the row expire
        # in between, delete finds nothing and set updates it) may unlink the file.
        self._files.retained.add(name)
        try:
            with self._index.transact():
                self._index.delete(key)
                self._index.set(
                    key, _Written(name, st.st_size), expire=remaining, tag=st.st_mtime_ns
                )
        finally:
            self._files.retained.discard(name)

    def _remove(self, key: bytes) -> None:
        """Best effort: the entry's row and file (a fault is counted; the entry stays a miss
        for every reader, its MAC or expiry failing again). The file is unlinked by name
        too: the index may have no row for it (expired there already)."""
        try:
            with self._lock:
                self._current_index()
                self._index.delete(key)
        except _FAULTS as e:
            counters.add("fragment_cache.errors")
            if is_damage(e):
                self._heal(e)  # the rebuilt index has no row for a file removed below
        try:
            os.unlink(entry_path(self.directory, key))
        except FileNotFoundError:
            pass  # its row's removal unlinked it, or another process did
        except OSError:
            counters.add("fragment_cache.errors")

    def __len__(self) -> int:
        """Rows in the index (expired ones too, until a store removes them)."""
        return int(len(self._index))

    def volume(self) -> int:
        """What the size bound is checked against: the entries' bytes (headers included)
        and the index's own SQLite pages (diskcache's ``volume()``)."""
        return int(self._index.volume())

    # --- managing it (raptorx cache stats / clear / invalidate) ---------------------------

    def stats(self) -> dict[str, int]:
        """``entries`` and ``bytes`` the index accounts for, and the bounds."""
        return {
            "entries": len(self),
            "bytes": self.volume(),
            "max_bytes": self.max_bytes,
            "max_entries": self.max_entries,
        }

    def clear(self) -> int:
        """Remove every entry (its file, then its index row); returns how many. A reader in
        another process holding an entry open reads it whole; a store racing this one keeps
        its entry, row and file."""
        names = self._entry_names("")
        for name in names:
            self._remove(bytes.fromhex(name))
        return len(names)

    def invalidate(self, urls: Iterable[str]) -> int:
        """Remove every entry computed from the files at ``urls`` (any version, columns or
        predicates: their keys start with ``file_prefix``); returns how many."""
        removed = 0
        for url in urls:
            names = self._entry_names(file_prefix(url).hex())
            for name in names:
                self._remove(bytes.fromhex(name))
            removed += len(names)
        return removed

    def _entry_names(self, prefix: str) -> list[str]:
        """The keys (hex) of the entry files whose keys start with ``prefix`` ("": all)."""
        root = os.path.join(self.directory, ENTRIES_DIR)
        try:
            subdirs = [prefix[:2]] if len(prefix) >= 2 else os.listdir(root)
        except OSError:
            return []
        names = []
        for sub in subdirs:
            try:
                files = os.listdir(os.path.join(root, sub))
            except (NotADirectoryError, FileNotFoundError):
                continue
            names += [
                f[: -len(ENTRY_SUFFIX)]
                for f in files
                if f.endswith(ENTRY_SUFFIX) and not f.startswith(".") and f.startswith(prefix)
            ]
        return names

    def close(self) -> None:
        self._index.close()


def _index_expiry(expires_ms: int) -> float | None:
    """The seconds an index row keeps for an entry whose header expires at ``expires_ms``
    (0: never): the index's expiry runs on the wall clock (diskcache's ``time.time``)."""
    return max(expires_ms / 1000 - time.time(), 0.001) if expires_ms else None


#: ``FragmentCache._decode``'s answer for a valid entry past its expiry.
_EXPIRED = object()
#: ``FragmentCache._check``'s answer for an entry of another ``ENTRY_FORMAT``.
_OTHER_FORMAT = object()

_caches: ProcessRegistry[FragmentCache] = ProcessRegistry()
#: The directories whose failure to open was logged (once each); guarded by the registry,
#: which opens one cache at a time.
_unavailable: set[str] = set()


def read_only_stats(directory: str) -> dict[str, int]:
    """``entries`` and ``bytes`` (diskcache's ``volume()``: the index's pages and the sizes
    its rows account for) of the fragment cache in ``directory``, read without writing
    (``raptorx cache stats`` on a read-only directory); zeros without an index. Raises
    ``sqlite3.Error`` when the index cannot be read."""
    path = os.path.join(directory, INDEX_DIR, DBNAME)
    if not os.path.exists(path):
        return {"entries": 0, "bytes": 0}
    conn = connect_read_only(path)
    try:
        (entries,) = conn.execute("SELECT COUNT(*) FROM Cache").fetchone()
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        row = conn.execute("SELECT value FROM Settings WHERE key = 'size'").fetchone()
    finally:
        conn.close()
    accounted = int(row[0]) if row else 0
    return {"entries": int(entries), "bytes": int(pages) * int(page_size) + accounted}


def fragment_cache_directory(tier: FragmentCacheSettings) -> str:
    """The cache directory of this process: ``~`` expanded, relative to the working
    directory (on an executor, the executor's; the JVM resolves it the same way)."""
    return os.path.abspath(os.path.expanduser(tier.base_directory))


def open_fragment_cache(tier: FragmentCacheSettings) -> FragmentCache:
    """A ``FragmentCache`` over ``fragment_cache_directory(tier)`` with the tier's bounds
    (raises what opening its directory raises)."""
    return FragmentCache(
        fragment_cache_directory(tier),
        max_bytes=tier.max_size,
        max_entries=tier.max_entries,
        max_entry_bytes=tier.max_entry_size,
        ttl=tier.ttl,
        group_shared=tier.group_shared,
    )


def fragment_cache_for(tier: FragmentCacheSettings) -> FragmentCache | None:
    """This process's fragment cache for the tier's settings (``Settings.fragment_cache``):
    None when the tier is off or its directory cannot be
    used (counted and logged once per directory: the query goes on without it)."""
    if not tier.enabled:
        return None
    directory = fragment_cache_directory(tier)
    key = (
        os.getpid(),  # a forked Python worker opens its own SQLite connection
        directory,
        tier.max_size,
        tier.max_entries,
        tier.max_entry_size,
        tier.ttl,
        tier.group_shared,
    )

    def open_cache() -> FragmentCache | None:
        try:
            opened = open_fragment_cache(tier)
        except _FAULTS as e:
            counters.add("fragment_cache.unavailable")
            if directory not in _unavailable:
                _unavailable.add(directory)
                log.warning(
                    "fragment result cache off: cannot use %s (%s); results are computed",
                    directory,
                    e,
                )
            return None
        # The node's size of this tier, published for Spark's metrics system (metrics.py).
        node_gauge("fragment_cache.size_bytes", opened.volume)
        node_gauge("fragment_cache.entries", opened.__len__)
        return opened

    return _caches.get(key, open_cache)


def adopt_jvm_fragments(tier: FragmentCacheSettings) -> int:
    """Fold the entries the JVM stored on this node into the index (``FragmentCache.
    adopt_published``), so they count towards its bounds and are evicted by it; returns how
    many. The planner calls this once per scan it hands to the JVM. Never raises: a cache
    that cannot be opened adopts nothing."""
    cache = fragment_cache_for(tier)
    return cache.adopt_published() if cache is not None else 0
