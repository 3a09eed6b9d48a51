"""The block (data) cache tier: an fsspec filesystem that reads a target filesystem's files
through block-aligned copies on local disk (:class:`~raptorx_py.cache.block_store.BlockStore`).

Executors use it through ``block_cache_for(settings.block_cache, fs)``, then
``fs.open(path, "rb", size=size, version=version, etag=etag)`` with the identity the
planner listed (``storage.file_versions``), and hand the file to pyarrow.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import io
import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

import fsspec
from fsspec.spec import AbstractBufferedFile

from raptorx_py.cache.block_store import BlockStore
from raptorx_py.cache.process_registry import ProcessRegistry
from raptorx_py.config.tiers import BlockCacheSettings
from raptorx_py.errors import FileChangedError, translate_storage_error
from raptorx_py.metrics import counters, node_gauge
from raptorx_py.storage.file_versions import current_identity, etag_of, is_another_version
from raptorx_py.storage.fs import local_fs

log = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 1 << 20
DEFAULT_MAX_SIZE = 2 << 30


class BlockCacheFileSystem(fsspec.AbstractFileSystem):
    """A read-through, block-aligned local-disk cache in front of any fsspec filesystem.

    Contract:
    - ``open(path, "rb", size=None, version=None, etag=None)`` returns a
      :class:`BlockCacheFile`. ``size`` and ``version`` (``storage.file_versions``: a local
      file's inode, change and modification times, an object's ETag) are the
      file's identity as the caller listed it; when either is missing the target is asked
      once (``file_versions.current_identity``). Cached blocks are keyed by a hash of
      (target protocol, path, size, version, block size) and the block index, so a file
      listed with another size or version never meets the blocks of the old one.
    - ``etag`` (optional, an ETag without quotes) is handed to the target's file so an
      object store checks it on every ranged GET (s3fs with ``local_expiry_check``, as
      ``raptorx_py.storage.fs`` configures it): bytes of an object overwritten after listing
      fail the read instead of being cached under the old identity. A fetch that returns
      fewer bytes than the listed size promises raises ``FileChangedError``.
    - Other modes than ``"rb"``, and ``compression=``, go to the target uncached.
    - Every other attribute and method is the target's: ``ls``, ``info``, ``cat_file``,
      ``protocol`` ... (see ``__getattribute__``). Only ``open`` reads through the cache.
    - ``verify_every_read`` is handed to the store (see :class:`BlockStore`: by default a
      block's checksum is checked on the first read of each block file by a process).
    - A cache directory that cannot be used turns caching off with one warning; ``open``
      then returns the target's own file. Cache faults never fail a read the target can
      answer (see :class:`BlockStore`).

    - A fetch from a target that checks no ETag (local files) is followed by a look at the
      file's identity (size and version, as ``file_versions.current_identity`` reads it);
      bytes of another version than the key's
      fail the read with ``FileChangedError`` and are not cached, and every cached block of
      the key is dropped (so is it when s3fs refuses an ETag): a cached block is never
      combined with bytes of another version (``block_cache.version_mismatches``).

    Limits: a version label of no known kind (a caller's own) cannot be compared; what a
    version cannot tell apart (``storage.file_versions``' limits: a local file rewritten in
    place keeping its size and mtime within one tick of the kernel's clock) is not seen as
    changed; a read served wholly from cached blocks reads the listed version
    without asking the target.
    Instances are not put in fsspec's instance cache (``block_cache_for`` keeps its
    own registry); ``AbstractFileSystem.__init__`` is not called on purpose, because its
    listing cache and transaction state would shadow the target's.
    """

    cachable = False
    # Ours, not the target's: fsspec's metaclass would otherwise mirror an async target's
    # coroutines onto this synchronous wrapper.
    async_impl = False
    mirror_sync_methods = False

    def __init__(
        self,
        target: fsspec.AbstractFileSystem,
        directory: str,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_size: int = DEFAULT_MAX_SIZE,
        clock: Callable[[], float] = time.time,
        verify_every_read: bool = False,
        group_shared: bool = False,
    ):
        if block_size <= 0:
            raise ValueError(f"block cache block_size must be positive, got {block_size}")
        self.target = target
        self.directory = directory
        self.block_size = int(block_size)
        self.store = BlockStore(
            directory,
            max_size=max_size,
            clock=clock,
            verify_every_read=verify_every_read,
            group_shared=group_shared,
        )

    def __getattribute__(self, name: str):
        # AbstractFileSystem implements (or stubs) every filesystem method, so a __getattr__
        # fallback would never fire for ls/info/cat_file...: they would run against this
        # wrapper instead of the target. Instead, names defined by this class (derived from
        # its body, not listed by hand) and its instance attributes are ours; the rest is
        # the target's.
        # Typed as a plain ``type``: mypy checks ``type[BlockCacheFileSystem]`` against
        # Hashable with the instances' ``__hash__`` and rejects it; any class is hashable.
        cls: type = type(self)
        if name.startswith("__") or name in _own_names(cls):
            return object.__getattribute__(self, name)
        attrs = object.__getattribute__(self, "__dict__")
        if name in attrs:
            return attrs[name]
        if "target" in attrs:
            return getattr(attrs["target"], name)
        return object.__getattribute__(self, name)

    # Identity, not the target's token: two caches of one target are two filesystems.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"BlockCacheFileSystem({self.target!r}, {self.directory!r})"

    @property
    def enabled(self) -> bool:
        return self.store.enabled

    def open(
        self,
        path: str,
        mode: str = "rb",
        *,
        size: int | None = None,
        version: str | None = None,
        etag: str | None = None,
        **kwargs,
    ):
        if mode != "rb" or kwargs.get("compression"):
            return self.target.open(path, mode, **kwargs)
        path = self.target._strip_protocol(path)
        if size is None or version is None:
            size, version, etag = self._identity(path, size, version, etag)
        if not self.store.enabled:
            return open_remote(self.target, path, size, etag, **kwargs)
        return BlockCacheFile(self, path, size, str(version), etag=etag, remote_kwargs=kwargs)

    def open_listed(self, path: str, *, size: int | None, version: str | None, etag: str | None):
        """``open`` of the version planning listed (``storage.parquet_files`` opens a file
        through any filesystem that has this method, without knowing this class)."""
        return self.open(path, "rb", size=size, version=version, etag=etag)

    def _identity(self, path, size, version, etag):
        """The identity a caller left out, as the target holds the file now
        (``file_versions.current_identity``)."""
        found_size, found_version = current_identity(self.target, path)
        if version is None:
            version = found_version or ""
        if etag is None:
            etag = etag_of(version)
        return int(found_size or 0) if size is None else int(size), str(version), etag

    def block_key(self, path: str, size: int, version: str) -> str:
        """The key of a file version's blocks (``block_key``)."""
        return block_key(self._protocol(), path, size, version, self.block_size)

    def path_prefix(self, path: str) -> str:
        """What the keys of every version of the file at ``path`` start with."""
        return path_prefix(self._protocol(), path)

    def _protocol(self) -> str:
        protocol = self.target.protocol
        return str(protocol[0] if isinstance(protocol, (tuple, list)) else protocol)

    def invalidate(self, urls) -> int:
        """Drop the cached blocks of the files at ``urls`` (every version of each, whatever
        process stored them); returns how many blocks."""
        return sum(
            self.store.drop_prefix(self.path_prefix(self.target._strip_protocol(url)))
            for url in urls
        )


def block_key(protocol: str, path: str, size: int, version: str, block_size: int) -> str:
    """The key of a file version's blocks: a digest of the file's path (``path_prefix``),
    then one of its whole identity, so every version of a file shares a prefix. A function
    of the identity alone, so the planner names a split's blocks for the JVM's reader
    (``jvm_contract.jvm_read_handoff``) as the executor's Python reader names them."""
    identity = "\0".join((protocol, path, str(size), version, str(block_size)))
    return path_prefix(protocol, path) + hashlib.sha256(identity.encode()).hexdigest()[:24]


def path_prefix(protocol: str, path: str) -> str:
    """What the keys of every version of the file at ``path`` (of ``protocol``: ``file``,
    ``s3``) start with."""
    return hashlib.sha256(f"{protocol}\0{path}".encode()).hexdigest()[:16]


@functools.cache
def _own_names(cls: type) -> frozenset[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass in fsspec.AbstractFileSystem.__mro__:
            break
        names.update(vars(klass))
    return frozenset(names)


def open_remote(target, path: str, size: int, etag: str | None, **kwargs) -> BinaryIO:
    """The target's own file for ``path``, with the listed size, no read-ahead of its own,
    and (for fsspec buffered files such as s3fs's) the listed ETag to check ranged reads
    against."""
    kwargs.setdefault("cache_type", "none")
    f = target.open(path, "rb", size=size, **kwargs)
    if isinstance(f, AbstractBufferedFile):
        f.details = {"name": path, "size": size, **({"ETag": f'"{etag}"'} if etag else {})}
    return f


class BlockCacheFile(io.RawIOBase):
    """A read-only, seekable file whose bytes come from the block cache.

    A read is served block by block: blocks on disk are read (and verified, as
    :class:`BlockStore` describes) straight into the result; runs of adjacent missing
    blocks are fetched with ONE ranged read of the target each, stored, and copied out.
    Reads past the end return what exists (b"" at or past EOF). The target's file is opened on
    the first miss only, so a warm read makes no
    request at all.

    Thread safety: a lock serializes seek/read/readinto/tell of one file object, so pyarrow
    may call it from several threads (it also serializes Python files itself). Separate file
    objects share nothing but the store.
    """

    def __init__(
        self,
        fs: BlockCacheFileSystem,
        path: str,
        size: int,
        version: str,
        *,
        etag: str | None = None,
        remote_kwargs: dict | None = None,
    ):
        super().__init__()
        self.fs = fs
        self.path = path
        self.size = int(size)
        self.version = version
        self.etag = etag
        self._remote_kwargs = dict(remote_kwargs or {})
        self._store = fs.store
        self._block_size = fs.block_size
        self._key = fs.block_key(path, self.size, version)
        self._loc = 0
        self._lock = threading.RLock()
        self._remote: BinaryIO | None = None  # the target's file, opened at the first miss

    def __repr__(self) -> str:
        return f"<BlockCacheFile {self.path} size={self.size} version={self.version}>"

    # --- io.RawIOBase -----------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._checkClosed()
        return self._loc

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        with self._lock:
            if whence == io.SEEK_SET:
                loc = offset
            elif whence == io.SEEK_CUR:
                loc = self._loc + offset
            elif whence == io.SEEK_END:
                loc = self.size + offset
            else:
                raise ValueError(f"invalid whence ({whence}) seeking {self.path}")
            if loc < 0:
                raise ValueError(f"negative seek position {loc} in {self.path}")
            self._loc = loc
            return loc

    def read(self, size: int = -1) -> bytes:
        self._checkClosed()
        with self._lock:
            n = self._available(size)
            if n == 0:
                return b""
            start, bs = self._loc, self._block_size
            data = None
            if start // bs == (start + n - 1) // bs:
                # Within one block: the store hands out new bytes read at the right offset,
                # one copy from the page cache, as a plain file read makes.
                data = self._read_one_block(start, n)
            if data is None:
                data = _assembled(n, functools.partial(self._fill, start))
            self._loc += n
            return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer) -> int:
        self._checkClosed()
        with self._lock, memoryview(buffer) as raw, raw.cast("B") as view:
            n = self._available(len(view))
            if n:
                self._fill(self._loc, view[:n])
                self._loc += n
            return n

    def close(self) -> None:
        with self._lock:
            remote, self._remote = self._remote, None
        try:
            if remote is not None:
                remote.close()
        finally:
            super().close()

    # --- blocks -----------------------------------------------------------------------------

    def _available(self, size: int | None) -> int:
        left = max(0, self.size - self._loc)
        return left if size is None or size < 0 else min(size, left)

    def _read_one_block(self, start: int, n: int) -> bytes | None:
        index = start // self._block_size
        lo, hi, block_start, block_end = self._span(index, start, start + n)
        data = self._store.read(self._key, index, block_end - block_start, lo - block_start, n)
        if data is not None:
            counters.add("block_cache.hits")
            counters.add("block_cache.bytes_from_cache", n)
        return data

    def _fill(self, start: int, dest: memoryview) -> None:
        """Fill ``dest`` with bytes ``[start, start + len(dest))``, all within the file."""
        bs, end = self._block_size, start + len(dest)
        missing: list[int] = []
        from_cache = 0
        for index in range(start // bs, (end - 1) // bs + 1):
            lo, hi, block_start, block_end = self._span(index, start, end)
            if self._store.read_into(
                self._key,
                index,
                block_end - block_start,
                lo - block_start,
                dest[lo - start : hi - start],
            ):
                from_cache += hi - lo
            else:
                missing.append(index)
        served = (end - 1) // bs - start // bs + 1 - len(missing)
        if served:
            counters.add("block_cache.hits", served)
            counters.add("block_cache.bytes_from_cache", from_cache)
        for first, last in _runs(missing):
            self._fetch(first, last, start, dest)

    def _span(self, index: int, start: int, end: int) -> tuple[int, int, int, int]:
        """(lo, hi) of the request within block ``index``, and the block's own bounds."""
        block_start = index * self._block_size
        block_end = min(block_start + self._block_size, self.size)
        return max(start, block_start), min(end, block_end), block_start, block_end

    def _fetch(self, first: int, last: int, start: int, dest: memoryview) -> None:
        """Fetch blocks ``first..last`` with one ranged read, store them, copy them out."""
        bs = self._block_size
        run_start, run_end = first * bs, min((last + 1) * bs, self.size)
        data = memoryview(self._read_remote(run_start, run_end))
        counters.add("block_cache.misses", last - first + 1)
        counters.add("block_cache.remote_requests")
        counters.add("block_cache.bytes_from_remote", len(data))
        counters.add("storage.remote_requests")
        counters.add("storage.remote_bytes", len(data))
        end = start + len(dest)
        for index in range(first, last + 1):
            lo, hi, block_start, block_end = self._span(index, start, end)
            block = data[block_start - run_start : block_end - run_start]
            self._store.put(self._key, index, block)
            dest[lo - start : hi - start] = block[lo - block_start : hi - block_start]

    def _read_remote(self, start: int, end: int) -> bytes:
        remote = self._remote
        if remote is None:
            remote = self._remote = open_remote(
                self.fs.target, self.path, self.size, self.etag, **self._remote_kwargs
            )
        remote.seek(start)
        want = end - start
        try:
            data = remote.read(want)
        except Exception as e:
            # An object store that checks the ETag (s3fs) refuses another version's bytes;
            # the cached blocks of the listed version are then of a version that is gone.
            if isinstance(translate_storage_error(e, self.path), FileChangedError):
                self._store.drop_key(self._key)
                counters.add("block_cache.version_mismatches")
            raise
        if len(data) < want:  # a short read from a stream: keep reading until EOF
            chunks = [data]
            got = len(data)
            while got < want:
                chunk = remote.read(want - got)
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            data = b"".join(chunks)
        if len(data) == want and self.etag is None:
            self._check_fetched_version(start)
        if len(data) != want:
            raise FileChangedError(
                f"{self.path}: the target returned {len(data)} bytes at offset {start} where "
                f"{want} were expected (listed size {self.size}, version {self.version}); the "
                f"file changed after it was listed"
            )
        return data

    def _check_fetched_version(self, start: int) -> None:
        """Refuse bytes the target returned for another version of the file than the key's.

        A target that checks no ETag on ranged reads (local files; an object store file
        opened without one) would hand out whatever the file holds now, and those bytes
        would be cached and served beside blocks of the listed version: a torn read. So
        after each fetch the file's identity is asked of the target (a ``stat`` locally:
        inode, change and modification times; its ETag on an object store;
        ``storage.file_versions``) and compared with the key's; a version of no known kind
        (a caller's own label) cannot be compared. On a
        mismatch every cached block of the key is dropped too: they belong to a version
        the store no longer holds."""
        try:
            size, found = current_identity(self.fs.target, self.path)
        except FileNotFoundError as e:
            self._drop_version(f"it no longer exists ({e})", start)
            return
        changed = None
        if size is not None and size != self.size:
            changed = f"its size is now {size}"
        elif is_another_version(self.version, found):
            changed = f"its version is now {found}"
        if changed:
            self._drop_version(changed, start)

    def _drop_version(self, why: str, start: int) -> None:
        dropped = self._store.drop_key(self._key)
        counters.add("block_cache.version_mismatches")
        raise FileChangedError(
            f"{self.path}: read at offset {start} for version {self.version} (size "
            f"{self.size}) as listed, but {why}; the file changed after it was listed, its "
            f"{dropped} cached block(s) were dropped and nothing read was cached"
        )


def _assembled(n: int, fill: Callable[[memoryview], None]) -> bytes:
    """A new ``bytes`` of length ``n`` whose contents ``fill`` writes through a view: the
    read of a range spanning several block files, copied once from each, as a plain file
    read copies once.

    Python offers no writable, uninitialised ``bytes``: every portable way (a bytearray
    copied out, a BytesIO grown by seeking) first zeroes or copies all ``n`` bytes, which
    cost reads spanning blocks a fifth of their throughput. CPython builds its own read
    results the same way (``PyBytes_FromStringAndSize(NULL, n)``, then filled in place); the
    object is ours alone until returned, so nothing can see it change or have hashed it.
    Elsewhere than CPython: the zero-filled BytesIO way.
    """
    if _new_bytes is None:
        out = io.BytesIO()
        out.seek(n - 1)
        out.write(b"\0")
        with out.getbuffer() as view:
            fill(view)
        return out.getvalue()  # no copy: the BytesIO's own, exactly-filled object
    data = _new_bytes(None, n)
    with (
        memoryview((ctypes.c_char * n).from_address(id(data) + _BYTES_DATA_OFFSET)) as raw,
        raw.cast("B") as view,
    ):
        fill(view)
    return data


#: ``PyBytes_FromStringAndSize(NULL, n)``: a new, unfilled ``bytes`` of length n (CPython only).
_new_bytes: Callable[[None, int], bytes] | None
if sys.implementation.name == "cpython":
    _bytes_from_string_and_size = ctypes.pythonapi.PyBytes_FromStringAndSize
    _bytes_from_string_and_size.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    _bytes_from_string_and_size.restype = ctypes.py_object
    _new_bytes = _bytes_from_string_and_size
    # ob_sval, the contents, ends the object; its one byte counted in the basic size is
    # the terminating NUL.
    _BYTES_DATA_OFFSET = bytes.__basicsize__ - 1
else:
    _new_bytes = None


def _runs(indexes: list[int]) -> list[tuple[int, int]]:
    """Ascending block indexes as (first, last) runs of adjacent ones."""
    runs: list[tuple[int, int]] = []
    for i in indexes:
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


_registry: ProcessRegistry[BlockCacheFileSystem] = ProcessRegistry()


def block_cache_for(tier: BlockCacheSettings, target: fsspec.AbstractFileSystem):
    """The block cache of this node in front of ``target``, or ``target`` itself when
    ``cache.enabled`` is false. ``tier``: the tier's settings (``Settings.block_cache``).

    One instance per (directory, block size, capacity, target object) per process: an
    executor calls this for every split, and recovery, the index connection and the
    pending last-access times belong to the process, not the split.
    """
    if not tier.enabled:
        return target
    directory = os.path.join(os.path.abspath(os.path.expanduser(tier.base_directory)), "blocks")
    key = (directory, tier.block_size, tier.max_size, id(target), tier.group_shared)

    def open_cache() -> BlockCacheFileSystem:
        fs = BlockCacheFileSystem(
            target,
            directory,
            block_size=tier.block_size,
            max_size=tier.max_size,
            group_shared=tier.group_shared,
        )
        # The node's size of this tier, published for Spark's metrics system (metrics.py).
        node_gauge("block_cache.size_bytes", fs.store.total_bytes)
        return fs

    return _registry.get(
        key,
        open_cache,
        # The registry holds the target, so its id cannot be reused while the entry exists.
        reuse=lambda fs: fs.target is target,
    )


def adopt_jvm_blocks(tier: BlockCacheSettings) -> int:
    """Fold the blocks the JVM's reader published on this node into the store's index
    (``BlockStore.adopt_published``), so they count towards its capacity and are evicted
    by it; returns how many. The planner calls this once per scan it hands to the JVM.
    Never raises: a store that cannot be opened adopts nothing."""
    if not tier.enabled:
        return 0
    try:
        fs = block_cache_for(tier, local_fs())
        return int(fs.store.adopt_published()) if fs.store.enabled else 0
    except (OSError, sqlite3.Error) as e:
        log.warning("block cache: could not adopt the JVM's blocks: %s", e)
        return 0
