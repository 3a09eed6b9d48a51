"""How a file's version is spelled and compared: the one home of the rule.

A file is identified by its URL, its size and its version, the strongest identity its
filesystem gives (``current_identity``):

- **local and POSIX files** (``file://``): ``posix:<st_ino>:<st_ctime_ns>:<st_mtime_ns>``,
  from one ``os.stat``. A user can put an mtime back (``cp -p``, ``rsync -t``, ``tar -x``,
  ``os.utime``), but not a change time: every write, rename over the path, ``utime``,
  ``chmod`` or link sets it to the kernel's clock; and a file renamed over the path is
  another inode. The device (``st_dev``) is left out on purpose: the path, in every key,
  already names the filesystem, and a shared filesystem's device number is the client's
  (each machine numbers its NFS mounts itself), so the executors' check of a version the
  driver listed would fail every read on a cluster.
- **S3** (``s3://``, ``s3a://``): ``etag:<ETag>``; any other store's ETag is taken as well.
- **a store that reports only a modification time**: ``mtime:<repr of seconds>``, exact (a
  1 ns change is a new version), but a restored mtime fools it.
- **nothing at all**: None, and such a file is read but never cached.

Planning lists each file's version (``storage.hive_layout`` through ``current_identity``);
every tier keys by it (block, footer and fragment caches), the listing cache keeps it with
the listing, and a reader later asks the store for the file's identity again (the block
cache after a fetch, the Parquet opener before it trusts a cached footer) and treats a
different version of the same kind (``is_another_version``) as another file.

Limits: a version is as strong as what it reads. A local file rewritten in place, keeping
its size and mtime, within the same tick of the kernel's clock as its previous change
(``ctime`` moves in ticks of a few ms on Linux) has the same version; so has a file whose
change time was set back by changing the system clock (root). A shared filesystem whose
inode numbers are the client's own (some FUSE mounts of object stores) gives each machine
another version of the same file: on a cluster, the executors' check then fails reads with
``FileChangedError``; read such data through ``s3://`` instead. An ETag is the store's
promise: S3 gives a new one to every upload of a key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fsspec.implementations.local import LocalFileSystem

#: The kinds of version, by prefix: only versions of one kind compare.
POSIX, ETAG, MTIME = "posix", "etag", "mtime"
_KINDS = (POSIX, ETAG, MTIME)


def stat_version(st: os.stat_result) -> str:
    """The version of a local file from its ``os.stat``: inode, change time and modification
    time (nanoseconds)."""
    return f"{POSIX}:{st.st_ino}:{st.st_ctime_ns}:{st.st_mtime_ns}"


def reported_etag(info: Mapping[str, Any]) -> str | None:
    """The ETag in a store's ``info`` for a file, without its quotes."""
    etag = info.get("ETag") or info.get("etag")
    return etag.strip('"') if isinstance(etag, str) and etag else None


def reported_mtime(info: Mapping[str, Any]) -> float | None:
    """The modification time in ``info`` (``mtime``, S3's ``LastModified``, else
    ``created``), as seconds."""
    for key in ("mtime", "LastModified", "created"):
        value = info.get(key)
        if value:
            return value.timestamp() if hasattr(value, "timestamp") else float(value)
    return None


def info_version(info: Mapping[str, Any]) -> str | None:
    """The version a store's ``info`` of a file gives: ``etag:<ETag>``, else
    ``mtime:<seconds>``, else None. Not for local files (``current_identity`` stats them)."""
    etag = reported_etag(info)
    if etag:
        return f"{ETAG}:{etag}"
    mtime = reported_mtime(info)
    return None if mtime is None else f"{MTIME}:{float(mtime)!r}"


def etag_of(version: str | None) -> str | None:
    """The ETag a version names (for the store to check ranged reads against), or None."""
    if version is not None and version.startswith(ETAG + ":"):
        return version[len(ETAG) + 1 :]
    return None


def is_local(fs) -> bool:
    """Whether ``fs`` is the local (POSIX) filesystem, whose files ``os.stat`` describes."""
    return isinstance(fs, LocalFileSystem)


def current_identity(
    fs, path: str, info: Mapping[str, Any] | None = None
) -> tuple[int | None, str | None]:
    """``(size, version)`` of the file at ``path`` as ``fs`` holds it now: one ``os.stat``
    (following links, as a read does) for a local file, else ``info`` when the caller has
    it (a listing's entry), else ``fs.info(path)``. Raises ``FileNotFoundError`` for a file
    that is gone."""
    if is_local(fs):
        st = os.stat(fs._strip_protocol(path))
        return st.st_size, stat_version(st)
    found = fs.info(path) if info is None else info
    size = found.get("size")
    return (None if size is None else int(size)), info_version(found)


def kind(version: str) -> str | None:
    """The kind of ``version`` (``posix``, ``etag``, ``mtime``), None for a caller's own label."""
    prefix = version.partition(":")[0]
    return prefix if prefix in _KINDS and ":" in version else None


def is_another_version(version: str, found: str | None) -> bool:
    """Whether the store's ``found`` (``current_identity``) says the file is no longer the
    listed ``version``: a version of the same kind that differs. Unknown (None), or of
    another kind (a caller's own label), it says nothing."""
    listed = kind(version)
    return found is not None and listed is not None and listed == kind(found) and found != version
