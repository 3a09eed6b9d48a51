"""The fragment result cache: a split's result (its rows after filters, or its partial
aggregation) kept on the node's local disk as Arrow IPC, so a query that reads the same
piece of the same file version in the same way is answered without reading or decoding it.

Contract:
- Entries are found by a key the caller builds (``datasource.fragment_keys``): its bytes
  name everything the result depends on (the file's identity and the piece read, columns,
  residual predicates, the pushed aggregation, output types, the computing code's
  identity). The cache never interprets a key: an entry is served only for the very same
  key, so a file that changes (a new size or version) or a new write (a new ACID directory)
  is a new key.
- An entry is the result's Arrow IPC stream preceded by a BLAKE2b checksum keyed with the
  cache's secret (``cache_files``) over the key and the stream: a torn, truncated or forged
  entry is a miss; it is deleted and counted (``fragment_cache.corrupt``).
- Storage is ``diskcache``: its SQLite index is process-safe and crash-safe (a value is
  visible only once its row commits; a value file without a row is never served), its
  total size is bounded (``fragment-result-cache.max-cache-size``) with least-recently-used
  eviction (one entry per store: a store larger than the entry it evicts can leave the cache
  above the bound until the next stores), entries expire after
  ``fragment-result-cache.cache-ttl``. A result bigger than
  ``fragment-result-cache.max-single-cached-entry-size`` is computed and not stored
  (``fragment_cache.too_large``); when ``fragment-result-cache.max-cached-entries`` entries
  are held, new results are not stored until eviction or expiry makes room
  (``fragment_cache.full``): diskcache bounds bytes, not entries, and evicting by count would
  need its private tables.
- A cache fault never fails a query: a directory that cannot be used turns the tier off for
  the process (``fragment_cache.unavailable``, logged once); a failed read is a miss and a
  failed write stores nothing (``fragment_cache.errors``), the result being computed anyway.

Limits: the directory is created 0700 (``cache.group-shared``: 2770); diskcache creates its
own subdirectories and value files with the process umask, inside that directory, so the
directory's mode is what keeps other users out. Usable without Spark.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING

import diskcache
import pyarrow as pa

from raptorx_py.cache.cache_files import keyed_digest, load_secret, make_dirs, modes, touch
from raptorx_py.cache.process_registry import ProcessRegistry
from raptorx_py.metrics import counters

if TYPE_CHECKING:
    from raptorx_py.config.settings import Settings

log = logging.getLogger(__name__)

DIGEST_BYTES = 8
#: Values above this are stored as files by diskcache, below in its SQLite index.
FILE_VALUE_BYTES = 32 * 1024

_FAULTS = (OSError, sqlite3.Error, diskcache.Timeout)


class FragmentCache:
    """Split results on local disk, keyed by the caller's key bytes (see the module's
    docstring for the contract)."""

    def __init__(
        self,
        directory: str,
        *,
        max_bytes: int,
        max_entries: int,
        max_entry_bytes: int,
        ttl: float | None,
        group_shared: bool = False,
    ) -> None:
        self.directory = directory
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.max_entry_bytes, self.ttl = max_entry_bytes, ttl or None
        self.group_shared = group_shared
        dir_mode, file_mode = modes(group_shared)
        make_dirs(directory, dir_mode)
        touch(os.path.join(directory, "cache.db"), file_mode)
        self._secret = load_secret(directory, file_mode)
        self._cache = diskcache.Cache(
            directory,
            size_limit=max_bytes,
            eviction_policy="least-recently-used",
            disk_min_file_size=FILE_VALUE_BYTES,
            # Each store evicts at most the one least recently used entry when over the size
            # limit: diskcache's default (10) would also drop the entry just stored when
            # fewer than 10 are held.
            cull_limit=1,
            timeout=30,
        )

    def get(self, key: bytes) -> list[pa.RecordBatch] | None:
        """The batches stored under ``key``, or None (a miss: absent, expired, corrupt or
        unreadable)."""
        name = key.hex()
        try:
            value = self._cache.get(name, default=None)
        except _FAULTS as e:
            counters.add("fragment_cache.errors")
            log.warning("fragment cache %s: read failed (%s); computing", self.directory, e)
            return None
        if value is None:
            counters.add("fragment_cache.misses")
            return None
        batches = self._decode(key, value)
        if batches is None:
            counters.add("fragment_cache.corrupt")
            counters.add("fragment_cache.misses")
            log.warning("fragment cache %s: entry %s is corrupt; deleted", self.directory, name)
            try:
                self._cache.delete(name)
            except _FAULTS:
                counters.add("fragment_cache.errors")
            return None
        counters.add("fragment_cache.hits")
        return batches

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
        try:
            if len(self._cache) >= self.max_entries:
                counters.add("fragment_cache.full")
                return False
            digest = keyed_digest(self._secret, key, stream)
            value = digest.to_bytes(DIGEST_BYTES, "little") + stream.to_pybytes()
            self._cache.set(key.hex(), value, expire=self.ttl)
        except _FAULTS as e:
            counters.add("fragment_cache.errors")
            log.warning("fragment cache %s: store failed (%s)", self.directory, e)
            return False
        counters.add("fragment_cache.stores")
        counters.add("fragment_cache.bytes_stored", stream.size)
        return True

    def _decode(self, key: bytes, value) -> list[pa.RecordBatch] | None:
        if not isinstance(value, bytes) or len(value) < DIGEST_BYTES:
            return None
        stream = memoryview(value)[DIGEST_BYTES:]
        expected = int.from_bytes(value[:DIGEST_BYTES], "little")
        if keyed_digest(self._secret, key, stream) != expected:
            return None
        try:
            with pa.ipc.open_stream(pa.py_buffer(stream)) as reader:
                return list(reader)
        except (pa.ArrowInvalid, OSError):
            return None

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        self._cache.close()


_caches: ProcessRegistry[FragmentCache] = ProcessRegistry()
#: The directories whose failure to open was logged (once each); guarded by the registry,
#: which opens one cache at a time.
_unavailable: set[str] = set()


def fragment_cache_directory(settings: Settings) -> str:
    return os.path.abspath(os.path.expanduser(settings.fragment_cache_base_directory))


def fragment_cache_for(settings: Settings) -> FragmentCache | None:
    """This process's fragment cache for ``settings``: None when the tier is off or its
    directory cannot be used (counted and logged once per directory: the query goes on
    without it)."""
    if not settings.fragment_cache_enabled:
        return None
    directory = fragment_cache_directory(settings)
    key = (
        os.getpid(),  # a forked Python worker opens its own SQLite connections
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
