"""The Parquet footer cache (executors): ``FileMetaData`` kept in memory per process and on
the node's local disk, shared by the node's worker processes.

A footer is the schema and the row-group statistics of one file. Reading it costs two
ranged requests per file (the 8-byte tail, then the footer itself); a warm query needs it
for every split, so it is the first thing worth keeping next to the executors.

Usage (what the reader does per split)::

    cache = footer_cache_for(settings.footer_cache)  # None when the tier is off
    ident = FileIdentity(split.url, split.size, split.version)
    metadata = cache.get_or_load(ident, lambda: read_footer_somehow())
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import struct
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from raptorx_py.cache import cache_files
from raptorx_py.cache.process_registry import ProcessRegistry
from raptorx_py.cache_invalidations import FOOTER, JournalReader, journal_path
from raptorx_py.config.tiers import FooterCacheSettings
from raptorx_py.errors import RaptorxError, translate_storage_error
from raptorx_py.metrics import counters
from raptorx_py.storage.parquet_files import parquet_read_error

log = logging.getLogger(__name__)

#: What pyarrow raises for bytes that are not a Parquet footer.
_PARSE_ERRORS = (pa.ArrowInvalid, pa.ArrowIOError, OSError, EOFError, ValueError)


@dataclass(frozen=True)
class FileIdentity:
    """Which bytes a footer belongs to: the file's URL, size and version as planning listed
    them (``storage.file_versions``: a local file's inode, change and modification
    times; an object's ETag), the same identity the block cache keys by.

    A file without a version has no identity beyond its path, and a path alone is not a
    safe key (an overwrite keeps the path): such files are read but never cached.
    """

    url: str
    size: int
    version: str | None

    @property
    def cacheable(self) -> bool:
        return self.version is not None

    def encoded(self) -> bytes:
        """Canonical bytes of the identity, stored in each disk entry and checked on read."""
        return json.dumps([self.url, self.size, self.version], separators=(",", ":")).encode()

    def digest(self) -> str:
        """The disk entry's name: a digest of the URL alone, then of the whole identity,
        so every version of one file shares a prefix (``FooterCache.invalidate``)."""
        return url_prefix(self.url) + hashlib.sha256(self.encoded()).hexdigest()[:48]


def url_prefix(url: str) -> str:
    """What the names of every footer entry of the file at ``url`` start with."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


# -- the disk entry format ----------------------------------------------------------------
# header | identity | payload | MAC(header + identity + payload)
# The MAC is ``cache_files.keyed_mac`` (HMAC-SHA256 keyed with the cache's secret, name
# ``_MAGIC``), 32 bytes, so an entry rewritten with a recomputed plain checksum is a corrupt
# entry, not a footer, and a JVM holding the secret can verify it. RXFOOT03: HMAC-SHA256
# (RXFOOT02's 64-bit BLAKE2b entries are misses: corrupt, deleted, read again).
# header = magic, identity length (u32), payload length (u64). The payload is the footer as
# a Parquet metadata-only file (``FileMetaData.write_metadata_file``: "PAR1", thrift, length,
# "PAR1"), which pyarrow parses with its public ``read_metadata``. The checksum is verified
# before pyarrow sees a byte, so a torn or scribbled entry is a miss, never a parse of garbage.
_MAGIC = b"RXFOOT03"
_HEADER = struct.Struct("<8sIQ")
_TRAILER = struct.Struct(f"<{cache_files.MAC_BYTES}s")
_SUFFIX = ".footer"
_TMP_PREFIX = ".tmp-"
#: A temp file older than this was left by a process that died while publishing.
_STALE_TMP_SECONDS = 3600.0
#: A process rescans the shared directory after this many of its own puts (or when its
#: estimate passes the bound), so other processes' writes are noticed.
_SWEEP_EVERY_PUTS = 128
#: A sweep evicts down to this fraction of the bound, so sweeps are not back to back.
_LOW_WATER = 0.9


def serialize_footer(metadata: pq.FileMetaData) -> bytes:
    """The footer as a Parquet metadata-only file (what ``parse_footer`` reads back)."""
    out = pa.BufferOutputStream()
    metadata.write_metadata_file(out)
    return out.getvalue().to_pybytes()


def parse_footer(payload: bytes) -> pq.FileMetaData:
    return pq.read_metadata(pa.BufferReader(payload))


def _encode_entry(identity: FileIdentity, payload: bytes, secret: bytes) -> bytes:
    ident = identity.encoded()
    body = _HEADER.pack(_MAGIC, len(ident), len(payload)) + ident + payload
    return body + _TRAILER.pack(cache_files.keyed_mac(secret, _MAGIC, body))


def _decode_entry(identity: FileIdentity, data: bytes, secret: bytes) -> bytes | None:
    """The payload of a disk entry written for ``identity``, or None if the entry is torn,
    scribbled over or belongs to another identity."""
    if len(data) < _HEADER.size + _TRAILER.size:
        return None
    magic, ident_len, payload_len = _HEADER.unpack_from(data)
    if magic != _MAGIC or len(data) != _HEADER.size + ident_len + payload_len + _TRAILER.size:
        return None
    body = data[: -_TRAILER.size]
    (mac,) = _TRAILER.unpack_from(data, len(body))
    if not hmac.compare_digest(mac, cache_files.keyed_mac(secret, _MAGIC, body)):
        return None
    ident = body[_HEADER.size : _HEADER.size + ident_len]
    if ident != identity.encoded():
        return None
    return body[_HEADER.size + ident_len :]


@dataclass
class _MemoryEntry:
    metadata: pq.FileMetaData
    nbytes: int
    last_access: float


class FooterCache:
    """Parquet footers by file identity: an in-memory LRU per process in front of a
    directory on the node's local disk shared by the node's processes.

    Contract:
    - ``get_or_load(identity, loader)`` returns the footer of exactly the bytes ``identity``
      names: memory, else disk, else ``loader()``. Only a valid footer is cached; one that
      does not parse fails with ``CorruptFileError`` naming the file, and nothing is stored.
    - Memory: at most ``max_bytes`` (measured as the footer's serialized size, a stable proxy
      for pyarrow's in-memory copy), least recently read evicted first; an entry not read for
      ``ttl`` seconds (by ``clock``) is dropped.
    - Disk: one file per identity, published by temp file + ``os.replace`` so a reader sees a
      whole entry or none; a checksum and the stored identity are verified on every read, so
      a torn or garbage entry is a miss (deleted, counted), never an error for the query.
      Total size is kept near ``max_disk_bytes`` by sweeps that drop the least recently used
      files (a disk hit touches its file's mtime).
    - The disk is an optimisation only: a directory that cannot be written makes the cache
      memory-only with one warning; any later disk fault is counted and never fails a read.

    Limits:
    - The disk bound is approximate across processes: it may be exceeded by what other
      processes wrote since this one's last sweep (at most ``_SWEEP_EVERY_PUTS`` puts each).
    - Two callers missing the same footer at once both load it (no single flight): the
      result is the same and the second publish replaces the first.
    - A sweep or a corrupt-entry deletion racing another process's fresh publish may delete
      that fresh entry: it costs a later miss, never a wrong answer.
    """

    def __init__(
        self,
        directory: str | None,
        *,
        max_bytes: int,
        ttl: float,
        max_disk_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        group_shared: bool = False,
    ):
        self.max_bytes = int(max_bytes)
        self.ttl = float(ttl)
        self.max_disk_bytes = None if max_disk_bytes is None else int(max_disk_bytes)
        self._clock = clock
        self._lock = threading.Lock()
        self._memory: OrderedDict[FileIdentity, _MemoryEntry] = OrderedDict()
        self._memory_bytes = 0
        self._put_error_warned = False
        # Private by default (cache_files): footers are copies of table files' bytes.
        self.dir_mode, self.file_mode = cache_files.modes(group_shared)
        self._secret = b""
        self.directory = self._prepare_directory(directory)
        # The disk-size estimate: set by each sweep, grown by this process's puts.
        self._disk_estimate = 0
        self._puts_since_sweep = 0
        if self.directory and self.max_disk_bytes is not None:
            self._sweep()

    # -- public API ----------------------------------------------------------------------
    @property
    def disk_enabled(self) -> bool:
        return self.directory is not None

    def get_or_load(
        self, identity: FileIdentity, loader: Callable[[], pq.FileMetaData]
    ) -> pq.FileMetaData:
        """The footer of ``identity``; ``loader()`` reads it from the file on a miss.

        Raises ``CorruptFileError`` (naming ``identity.url``) if the loaded footer does not
        parse; errors the loader raises on purpose (``RaptorxError``) pass through unchanged,
        and library errors are translated (``parquet_files.parquet_read_error``).
        """
        if not identity.cacheable:
            counters.add("footer_cache.uncacheable")
            return self._load(identity, loader)[0]
        metadata = self._get_memory(identity)
        if metadata is not None:
            counters.add("footer_cache.hits_memory")
            return metadata
        found = self._get_disk(identity)
        if found is not None:
            metadata, payload = found
            counters.add("footer_cache.hits_disk")
            self._put_memory(identity, metadata, len(payload))
            return metadata
        counters.add("footer_cache.misses")
        metadata, loaded_payload = self._load(identity, loader)
        if loaded_payload is not None:
            self._put_memory(identity, metadata, len(loaded_payload))
            self._put_disk(identity, loaded_payload)
        return metadata

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()
            self._memory_bytes = 0

    # -- managing it (raptorx cache stats / clear / invalidate) ------------------------------
    def disk_usage(self) -> tuple[int, int]:
        """``(entries, bytes)`` on disk (a scan of the directory; (0, 0) without one)."""
        entries = total = 0
        for path in self._disk_entries(""):
            try:
                total += os.stat(path).st_size
            except FileNotFoundError:
                continue  # removed by another process meanwhile
            entries += 1
        return entries, total

    def clear(self) -> int:
        """Drop every footer, in this process's memory and on disk; returns the disk entries
        removed. A reader in another process holding an entry open reads it whole."""
        self.clear_memory()
        return sum(self._unlink(path) for path in self._disk_entries(""))

    def invalidate(self, urls) -> int:
        """Drop the footers of the files at ``urls`` (every version of each), in memory and
        on disk; returns the disk entries removed."""
        urls = set(urls)
        with self._lock:
            for identity in [i for i in self._memory if i.url in urls]:
                self._memory_bytes -= self._memory.pop(identity).nbytes
        return sum(
            self._unlink(path)
            for url in sorted(urls)
            for path in self._disk_entries(url_prefix(url))
        )

    def apply(self, invalidations) -> None:
        """Apply to the memory tier what ``raptorx cache invalidate`` / ``clear`` posted to
        the node's journal (``cache_invalidations``); their disk entries are the command's."""
        for inv in invalidations:
            if not inv.covers(FOOTER):
                continue
            if inv.table is None or not inv.files:
                self.clear_memory()
                continue
            files = set(inv.files)
            with self._lock:
                for identity in [i for i in self._memory if i.url in files]:
                    self._memory_bytes -= self._memory.pop(identity).nbytes

    def _disk_entries(self, prefix: str) -> list[str]:
        """Paths of the disk entries whose names start with ``prefix`` ("" : all)."""
        if self.directory is None:
            return []
        subdirs = [prefix[:2]] if len(prefix) >= 2 else None
        found = []
        try:
            names = subdirs if subdirs is not None else sorted(os.listdir(self.directory))
        except OSError:
            return []
        for sub in names:
            path = os.path.join(self.directory, sub)
            try:
                entries = os.listdir(path)
            except (NotADirectoryError, FileNotFoundError):
                continue
            found += [
                os.path.join(path, n)
                for n in entries
                if n.endswith(_SUFFIX) and n.startswith(prefix)
            ]
        return found

    @property
    def memory_bytes(self) -> int:
        return self._memory_bytes

    def __len__(self) -> int:
        return len(self._memory)

    # -- loading -------------------------------------------------------------------------
    def _load(
        self, identity: FileIdentity, loader: Callable[[], pq.FileMetaData]
    ) -> tuple[pq.FileMetaData, bytes | None]:
        """``(footer, its serialized bytes or None if it cannot be cached)``."""
        try:
            metadata = loader()
        except RaptorxError:
            raise
        except (FileNotFoundError, PermissionError) as e:  # the file, not its bytes
            raise translate_storage_error(e, identity.url) from e
        except _PARSE_ERRORS as e:
            raise parquet_read_error(e, identity.url) from e
        if not isinstance(metadata, pq.FileMetaData):
            raise TypeError(
                f"footer loader for {identity.url} returned "
                f"{type(metadata).__name__}, not pyarrow.parquet.FileMetaData"
            )
        try:
            payload = serialize_footer(metadata)
        except _PARSE_ERRORS:
            counters.add("footer_cache.put_errors")
            log.warning(
                "footer of %s cannot be serialized; it is not cached", identity.url, exc_info=True
            )
            return metadata, None
        # The smallest file holding this footer is "PAR1" + footer + length + "PAR1", the
        # payload's size. A larger footer did not come from the listed bytes (the file changed
        # between listing and reading): serve it, but do not file it under this identity.
        if identity.size < len(payload):
            counters.add("footer_cache.rejected")
            log.warning(
                "footer of %s (%d bytes) does not fit in the listed size of %d bytes; not cached",
                identity.url,
                len(payload),
                identity.size,
            )
            return metadata, None
        return metadata, payload

    # -- memory tier ---------------------------------------------------------------------
    def _get_memory(self, identity: FileIdentity) -> pq.FileMetaData | None:
        now = self._clock()
        with self._lock:
            entry = self._memory.get(identity)
            if entry is None:
                return None
            if now - entry.last_access >= self.ttl:
                self._drop_locked(identity)
                return None
            entry.last_access = now
            self._memory.move_to_end(identity)
            return entry.metadata

    def _put_memory(self, identity: FileIdentity, metadata: pq.FileMetaData, nbytes: int) -> None:
        if nbytes > self.max_bytes:
            return  # would evict everything and still not fit
        now = self._clock()
        with self._lock:
            if identity in self._memory:
                self._memory_bytes -= self._memory.pop(identity).nbytes
            self._memory[identity] = _MemoryEntry(metadata, nbytes, now)
            self._memory_bytes += nbytes
            # The dict is in last-access order: expired entries sit at the front.
            while self._memory:
                oldest_id, oldest = next(iter(self._memory.items()))
                if self._memory_bytes <= self.max_bytes and now - oldest.last_access < self.ttl:
                    break
                self._drop_locked(oldest_id)

    def _drop_locked(self, identity: FileIdentity) -> None:
        self._memory_bytes -= self._memory.pop(identity).nbytes
        counters.add("footer_cache.evictions")

    # -- disk tier -----------------------------------------------------------------------
    def _prepare_directory(self, directory: str | None) -> str | None:
        if not directory:
            return None
        directory = os.path.abspath(os.path.expanduser(directory))
        try:
            cache_files.make_dirs(directory, self.dir_mode)
            # A probe write: a directory can exist and still refuse files (read-only mount,
            # permissions), and finding out on the first put would cost a fault per footer.
            fd, probe = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=directory)
            os.close(fd)
            os.unlink(probe)
            self._secret = cache_files.load_secret(directory, self.file_mode)
        except OSError as e:
            log.warning(
                "footer cache directory %s is not writable (%s); footers are cached in memory only",
                directory,
                e,
            )
            return None
        return directory

    def path_of(self, identity: FileIdentity) -> str:
        """The disk entry of ``identity``'s footer (whether or not it exists)."""
        if self.directory is None:
            raise ValueError("this footer cache keeps no directory: its entries have no path")
        digest = identity.digest()
        return os.path.join(self.directory, digest[:2], digest + _SUFFIX)

    def _get_disk(self, identity: FileIdentity) -> tuple[pq.FileMetaData, bytes] | None:
        if self.directory is None:
            return None
        path = self.path_of(identity)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            counters.add("footer_cache.disk_read_errors")
            log.debug("cannot read footer cache entry %s: %s", path, e)
            return None
        payload = _decode_entry(identity, data, self._secret)
        metadata = None
        if payload is not None:
            try:
                metadata = parse_footer(payload)
            except _PARSE_ERRORS:
                metadata = None
        if payload is None or metadata is None:
            counters.add("footer_cache.corrupt_entries")
            log.warning("footer cache entry %s for %s is corrupt; deleted", path, identity.url)
            self._unlink(path)
            return None
        try:
            os.utime(path)  # recency for the cross-process LRU sweep
        except OSError:
            pass  # swept by another process meanwhile: the footer in hand is still right
        return metadata, payload

    def _put_disk(self, identity: FileIdentity, payload: bytes) -> None:
        if self.directory is None:
            return
        entry = _encode_entry(identity, payload, self._secret)
        if self.max_disk_bytes is not None and len(entry) > self.max_disk_bytes:
            return
        path = self.path_of(identity)
        tmp = os.path.join(os.path.dirname(path), f"{_TMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}")
        try:
            cache_files.make_dirs(os.path.dirname(path), self.dir_mode)
            with open(tmp, "wb", opener=cache_files.opener(self.file_mode)) as f:
                f.write(entry)
            os.replace(tmp, path)
        except OSError as e:
            counters.add("footer_cache.put_errors")
            self._unlink(tmp, quiet=True)
            if not self._put_error_warned:
                self._put_error_warned = True
                log.warning(
                    "cannot write footer cache entry %s (%s); continuing without it "
                    "(further failures are only counted)",
                    path,
                    e,
                )
            return
        if self.max_disk_bytes is not None:
            with self._lock:
                self._disk_estimate += len(entry)
                self._puts_since_sweep += 1
                due = (
                    self._disk_estimate > self.max_disk_bytes
                    or self._puts_since_sweep >= _SWEEP_EVERY_PUTS
                )
            if due:
                self._sweep()

    def _sweep(self) -> None:
        """Scan the shared directory, delete stale temp files, and evict least recently used
        entries down to the low-water mark if the total exceeds ``max_disk_bytes``."""
        directory, max_disk_bytes = self.directory, self.max_disk_bytes
        if directory is None or max_disk_bytes is None:
            return  # no directory, or no bound on it: nothing to sweep
        entries, total, now = [], 0, time.time()
        try:
            for sub in os.scandir(directory):
                if not sub.is_dir(follow_symlinks=False):
                    continue
                for f in os.scandir(sub.path):
                    try:
                        st = f.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # deleted by another process meanwhile
                    if f.name.startswith(_TMP_PREFIX):
                        if now - st.st_mtime > _STALE_TMP_SECONDS:
                            self._unlink(f.path)
                    elif f.name.endswith(_SUFFIX):
                        entries.append((st.st_mtime, st.st_size, f.path))
                        total += st.st_size
        except OSError as e:
            counters.add("footer_cache.disk_read_errors")
            log.debug("cannot scan footer cache directory %s: %s", directory, e)
            return
        if total > max_disk_bytes:
            target = max_disk_bytes * _LOW_WATER
            for _, size, path in sorted(entries):
                if total <= target:
                    break
                if self._unlink(path):
                    counters.add("footer_cache.disk_evictions")
                total -= size
        with self._lock:
            self._disk_estimate = total
            self._puts_since_sweep = 0

    @staticmethod
    def _unlink(path: str, quiet: bool = False) -> bool:
        """Delete a cache file; a failure is counted (unless ``quiet``: cleanup after a
        fault already counted) and never raised."""
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            if not quiet:
                counters.add("footer_cache.put_errors")
            log.debug("cannot delete footer cache file %s: %s", path, e)
            return False


# -- one cache per process ----------------------------------------------------------------
_caches: ProcessRegistry[FooterCache] = ProcessRegistry()


def read_only_disk_usage(directory: str) -> tuple[int, int]:
    """``(entries, bytes)`` of the footer entries in ``directory``, by a scan that writes
    nothing (``raptorx cache stats`` on a read-only directory); (0, 0) without it."""
    entries = total = 0
    try:
        subdirs = list(os.scandir(directory))
    except FileNotFoundError:
        return 0, 0
    for sub in subdirs:
        if not sub.is_dir(follow_symlinks=False):
            continue
        for f in os.scandir(sub.path):
            if f.name.endswith(_SUFFIX) and not f.name.startswith(_TMP_PREFIX):
                try:
                    total += f.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue  # removed by another process meanwhile
                entries += 1
    return entries, total


def footer_cache_directory(tier: FooterCacheSettings) -> str:
    base = tier.base_directory
    return os.path.join(os.path.abspath(os.path.expanduser(base)), "footers")


def footer_cache_for(tier: FooterCacheSettings) -> FooterCache | None:
    """This process's footer cache for the tier's settings (``Settings.footer_cache``), None
    when the tier is off.

    One cache per directory: Spark reuses a Python worker across queries, so the memory tier
    outlives a query. Settings that change the bounds replace the cache (memory dropped).
    The disk copy is bounded by ``cache.alluxio.max-cache-size``.
    """
    if not tier.enabled:
        return None
    directory = footer_cache_directory(tier)
    cache = _footer_cache_for(tier, directory)
    if cache is not None:
        journal = journal_path(tier.base_directory)
        reader = _journals.get((directory, journal), lambda: JournalReader(journal))
        if reader is not None:
            cache.apply(reader.poll())
    return cache


#: Each directory's position in its node's journal (``cache_invalidations``).
_journals: ProcessRegistry[JournalReader] = ProcessRegistry()


def _footer_cache_for(tier: FooterCacheSettings, directory: str) -> FooterCache | None:
    limits = (tier.size, tier.ttl, tier.max_disk_size, tier.group_shared)
    return _caches.get(
        directory,
        lambda: FooterCache(
            directory,
            max_bytes=limits[0],
            ttl=limits[1],
            max_disk_bytes=limits[2],
            group_shared=tier.group_shared,
        ),
        reuse=lambda cache: (
            (cache.max_bytes, cache.ttl, cache.max_disk_bytes, cache.file_mode == 0o660) == limits
        ),
    )
