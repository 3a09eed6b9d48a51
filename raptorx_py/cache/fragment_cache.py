"""The fragment result cache: a split's result (its rows after filters, or its partial
aggregation) kept on the node's local disk as Arrow IPC, so a query that reads the same
piece of the same file version in the same way is answered without reading or decoding it.

Contract:
- Entries are found by a key the caller builds (``datasource.fragment_keys``, computed at
  planning from the split's ``datasource.read_spec.ReadSpec``): its bytes name everything
  the result depends on, the computing code's identity among them. The cache never
  interprets a key: an entry is served only for the very same key, so a file that changes,
  a new write or new code is a new key.
- **One file per entry**, ``entries/<first two hex digits>/<key in hex>.arrow``, published
  whole (temporary file + ``os.replace``): a reader opens the file its key names, with no
  index to read, which is how the JVM serves hits (``native/.../FragmentHits.scala``). The
  file is a 48-byte header (``ENTRY_MAGIC``, a format byte, the expiry time in epoch
  milliseconds or 0, an HMAC-SHA256 keyed with the cache's secret (``cache_files``) over
  the header's first 16 bytes, the key and the stream) and the result's Arrow IPC stream.
  A torn, truncated, forged (written without the secret) or moved entry fails the MAC: a
  miss, deleted and counted (``fragment_cache.corrupt``). HMAC-SHA256 rather than keyed
  BLAKE2b because the JDK has it (``javax.crypto.Mac``, hardware SHA where the CPU has it):
  measured in BENCHMARKS.md ("The fragment entry's MAC").
- **A small SQLite index** (``index.db``: name, size, last use, expiry) does the accounting
  only: the total size bound (``fragment-result-cache.max-cache-size``) with
  least-recently-used eviction, the entry bound (``fragment-result-cache.max-cached-entries``:
  when reached, new results are not stored until eviction or expiry makes room,
  ``fragment_cache.full``) and expiry (``fragment-result-cache.cache-ttl``, also in each
  entry's header, so a reader without the index honours it). A hit writes nothing to the
  index: it touches the entry file's mtime (the JVM does the same), and eviction takes an
  entry's last use as the later of its row's and its file's mtime. So on a full disk hits
  are still served (a failed touch is counted, ``fragment_cache.touch_failed``); only
  stores fail. A result bigger than ``fragment-result-cache.max-single-cached-entry-size``
  is computed and not stored (``fragment_cache.too_large``).
- A cache fault never fails a query: a directory that cannot be used turns the tier off for
  the process (``fragment_cache.unavailable``, logged once); a failed read is a miss and a
  failed write stores nothing (``fragment_cache.errors``), the result being computed anyway.

Limits: the index row is written before the file is published, so a crash between the two
leaves a row without a file (a miss, removed by eviction), never an unaccounted file; a
process killed while writing leaves its temporary file (``.*.tmp``) behind. Files are
created 0600 in a 0700 directory (``cache.group-shared``: 0660 and 2770). Usable without
Spark.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from raptorx_py.cache.cache_files import load_secret, make_dirs, modes, opener, touch
from raptorx_py.cache.process_registry import ProcessRegistry
from raptorx_py.metrics import counters
from raptorx_py.sqlite_wal import connect_wal

if TYPE_CHECKING:
    from raptorx_py.config.settings import Settings

log = logging.getLogger(__name__)

#: What an entry file starts with; the JVM's reader checks the same (FragmentHits.scala).
ENTRY_MAGIC = b"RXF1"
ENTRY_FORMAT = 1
#: magic, format, 3 reserved bytes, expiry (epoch ms, 0: none): the MAC's first input.
_PREFIX = struct.Struct("<4sB3xq")
MAC_BYTES = 32
HEADER_BYTES = _PREFIX.size + MAC_BYTES  # 48
ENTRIES_DIR = "entries"
ENTRY_SUFFIX = ".arrow"
INDEX_FILE = "index.db"
#: Eviction looks at this many least recently used rows at a time.
_EVICTION_BATCH = 32

_FAULTS = (OSError, sqlite3.Error)


def entry_mac(secret: bytes, prefix: bytes, key: bytes, stream) -> bytes:
    """HMAC-SHA256 keyed with ``secret`` over an entry's header prefix, its key (length
    first) and its Arrow stream."""
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    mac.update(prefix)
    mac.update(len(key).to_bytes(4, "little"))
    mac.update(key)
    mac.update(stream)
    return mac.digest()


def entry_path(directory: str, key: bytes) -> str:
    """Where the entry of ``key`` lives under the cache ``directory``."""
    name = key.hex()
    return os.path.join(directory, ENTRIES_DIR, name[:2], name + ENTRY_SUFFIX)


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
    ) -> None:
        self.directory = directory
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.max_entry_bytes, self.ttl = max_entry_bytes, ttl or None
        self.group_shared = group_shared
        self._clock = clock
        self._dir_mode, self._file_mode = modes(group_shared)
        make_dirs(os.path.join(directory, ENTRIES_DIR), self._dir_mode)
        self._secret = load_secret(directory, self._file_mode)
        index = os.path.join(directory, INDEX_FILE)
        touch(index, self._file_mode)
        self._lock = threading.Lock()
        self._index = connect_wal(
            index,
            timeout=30,
            check_same_thread=False,
            schema="CREATE TABLE IF NOT EXISTS entries (name TEXT PRIMARY KEY, size INTEGER "
            "NOT NULL, used REAL NOT NULL, expires REAL)",
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
            self._remove(key.hex())
            return None
        if batches is _EXPIRED:
            counters.add("fragment_cache.expired")
            counters.add("fragment_cache.misses")
            self._remove(key.hex())
            return None
        try:
            os.utime(path)  # its last use, for eviction (nothing else is written on a hit)
        except OSError:
            counters.add("fragment_cache.touch_failed")
        counters.add("fragment_cache.hits")
        counters.add("fragment_cache.bytes_read", len(data))
        return batches

    def _decode(self, key: bytes, data: bytes):
        """The entry's batches, ``_EXPIRED``, or None when it is not a valid entry of
        ``key`` under this cache's secret."""
        if len(data) < HEADER_BYTES:
            return None
        view = memoryview(data)
        prefix = bytes(view[: _PREFIX.size])
        magic, fmt, expires_ms = _PREFIX.unpack(prefix)
        if magic != ENTRY_MAGIC or fmt != ENTRY_FORMAT:
            return None
        stream = view[HEADER_BYTES:]
        mac = entry_mac(self._secret, prefix, key, stream)
        if not hmac.compare_digest(mac, bytes(view[_PREFIX.size : HEADER_BYTES])):
            return None
        if expires_ms and self._clock() * 1000 > expires_ms:
            return _EXPIRED
        try:
            with pa.ipc.open_stream(pa.py_buffer(stream)) as reader:
                return list(reader)
        except (pa.ArrowInvalid, OSError):
            return None

    # --- storing ---------------------------------------------------------------------------

    def put(self, key: bytes, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> bool:
        """Store the complete result of ``key``; False when it is not stored (too large,
        full, or a fault)."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as writer:
            for b in batches:
                writer.write_batch(b)
        stream = sink.getvalue()
        if stream.size > self.max_entry_bytes:
            counters.add("fragment_cache.too_large")
            return False
        now = self._clock()
        expires = now + self.ttl if self.ttl else None
        prefix = _PREFIX.pack(ENTRY_MAGIC, ENTRY_FORMAT, int(expires * 1000) if expires else 0)
        name = key.hex()
        path = entry_path(self.directory, key)
        try:
            with self._lock:
                self._drop_expired(now)
                if self._count() >= self.max_entries:
                    counters.add("fragment_cache.full")
                    return False
                size = HEADER_BYTES + stream.size
                # The row first: a crash before the file is published leaves a row without a
                # file (a miss), never a file the size bound does not see.
                self._index.execute(
                    "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)", (name, size, now, expires)
                )
                try:
                    self._publish(
                        path, prefix + entry_mac(self._secret, prefix, key, stream), stream
                    )
                except OSError:
                    self._index.execute("DELETE FROM entries WHERE name = ?", (name,))
                    raise
                # Its last use in the file's clock, which hits move on (os.utime).
                self._index.execute(
                    "UPDATE entries SET used = ? WHERE name = ?", (os.stat(path).st_mtime, name)
                )
                self._evict(keep=name)
        except _FAULTS as e:
            counters.add("fragment_cache.errors")
            log.warning("fragment cache %s: store failed (%s)", self.directory, e)
            return False
        counters.add("fragment_cache.stores")
        counters.add("fragment_cache.bytes_stored", stream.size)
        return True

    def _publish(self, path: str, header: bytes, stream: pa.Buffer) -> None:
        """Write ``header`` and ``stream`` to a temporary file beside ``path`` and move it
        into place whole."""
        make_dirs(os.path.dirname(path), self._dir_mode)
        tmp = os.path.join(
            os.path.dirname(path), f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp"
        )
        try:
            with open(tmp, "xb", opener=opener(self._file_mode)) as f:
                f.write(header)
                f.write(memoryview(stream))
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    # --- accounting ------------------------------------------------------------------------

    def _count(self) -> int:
        return int(self._index.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def _drop_expired(self, now: float) -> None:
        expired = self._index.execute(
            "SELECT name FROM entries WHERE expires IS NOT NULL AND expires < ?", (now,)
        ).fetchall()
        for (name,) in expired:
            self._unlink(name)
            self._index.execute("DELETE FROM entries WHERE name = ?", (name,))
            counters.add("fragment_cache.expired")

    def _evict(self, keep: str) -> None:
        """Remove least recently used entries (other than ``keep``, just stored) until the
        total size is within the bound. A row's ``used`` is its store time; a hit since
        touched the file's mtime, so a candidate whose file is newer is moved up instead
        of removed."""
        total = int(self._index.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()[0])
        while total > self.max_bytes:
            rows = self._index.execute(
                "SELECT name, size, used FROM entries WHERE name != ? ORDER BY used LIMIT ?",
                (keep, _EVICTION_BATCH),
            ).fetchall()
            if not rows:
                return
            for name, size, used in rows:
                try:
                    mtime: float | None = os.stat(self._path_of(name)).st_mtime
                except FileNotFoundError:
                    mtime = None  # gone (removed by another process): drop its row
                if mtime is not None and mtime > used:
                    # Used since it was stored: its row moves up to that use, once per use,
                    # so the loop ends.
                    self._index.execute("UPDATE entries SET used = ? WHERE name = ?", (mtime, name))
                    continue
                self._unlink(name)
                self._index.execute("DELETE FROM entries WHERE name = ?", (name,))
                counters.add("fragment_cache.evicted")
                total -= size
                if total <= self.max_bytes:
                    return

    def _path_of(self, name: str) -> str:
        return os.path.join(self.directory, ENTRIES_DIR, name[:2], name + ENTRY_SUFFIX)

    def _unlink(self, name: str) -> None:
        try:
            os.unlink(self._path_of(name))
        except FileNotFoundError:
            pass

    def _remove(self, name: str) -> None:
        """Best effort: the entry's file and row (a fault is counted; the entry stays a miss
        for every reader, its MAC or expiry failing again)."""
        try:
            self._unlink(name)
            with self._lock:
                self._index.execute("DELETE FROM entries WHERE name = ?", (name,))
        except _FAULTS:
            counters.add("fragment_cache.errors")

    def __len__(self) -> int:
        with self._lock:
            return self._count()

    def volume(self) -> int:
        """Bytes the index accounts for (headers included)."""
        with self._lock:
            return int(
                self._index.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()[0]
            )

    def close(self) -> None:
        self._index.close()


#: ``FragmentCache._decode``'s answer for a valid entry past its expiry.
_EXPIRED = object()

_caches: ProcessRegistry[FragmentCache] = ProcessRegistry()
#: The directories whose failure to open was logged (once each); guarded by the registry,
#: which opens one cache at a time.
_unavailable: set[str] = set()


def fragment_cache_directory(settings: Settings) -> str:
    """The cache directory of this process: ``~`` expanded, relative to the working
    directory (on an executor, the executor's; the JVM resolves it the same way)."""
    return os.path.abspath(os.path.expanduser(settings.fragment_cache_base_directory))


def fragment_cache_for(settings: Settings) -> FragmentCache | None:
    """This process's fragment cache for ``settings``: None when the tier is off or its
    directory cannot be used (counted and logged once per directory: the query goes on
    without it)."""
    if not settings.fragment_cache_enabled:
        return None
    directory = fragment_cache_directory(settings)
    key = (
        os.getpid(),  # a forked Python worker opens its own SQLite connection
        directory,
        settings.fragment_cache_max_size,
        settings.fragment_cache_max_entries,
        settings.fragment_cache_max_entry_size,
        settings.fragment_cache_ttl,
        settings.cache_group_shared,
    )

    def open_cache() -> FragmentCache | None:
        try:
            return FragmentCache(
                directory,
                max_bytes=settings.fragment_cache_max_size,
                max_entries=settings.fragment_cache_max_entries,
                max_entry_bytes=settings.fragment_cache_max_entry_size,
                ttl=settings.fragment_cache_ttl,
                group_shared=settings.cache_group_shared,
            )
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

    return _caches.get(key, open_cache)
