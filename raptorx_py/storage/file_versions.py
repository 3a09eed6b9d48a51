"""How a file's version is spelled and compared.

A file is identified by its path, size and version: its ETag where the store gives one,
else the exact ``repr`` of its mtime. Planning lists the version (``listed_version``); a
reader later asks the store what it holds now (``observed_version``, an ETag prefixed
``etag:``) and treats a different, comparable version (``comparable``) as another file.
The block cache keys blocks by this version and the Parquet opener checks an open file
against it, so both take the rule from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def listed_version(etag: str | None, mtime: float | None) -> str | None:
    """The version of a listed file: its ETag, else ``repr`` of its mtime (exact, so a 1 ns
    change is a new version), else None (unknown: ask the store)."""
    if etag:
        return etag
    return repr(float(mtime)) if mtime is not None else None


def reported_etag(info: Mapping[str, Any]) -> str | None:
    """The ETag in a store's ``info`` for a file, without its quotes."""
    etag = info.get("ETag") or info.get("etag")
    return etag.strip('"') if isinstance(etag, str) and etag else None


def reported_mtime(info: Mapping[str, Any], *keys: str) -> float | None:
    """The modification time in ``info`` (``mtime`` or S3's ``LastModified``, then
    ``keys``), as seconds."""
    for key in ("mtime", "LastModified", *keys):
        value = info.get(key)
        if value:
            return value.timestamp() if hasattr(value, "timestamp") else float(value)
    return None


def observed_version(info: Mapping[str, Any]) -> str | None:
    """The version the store reports now: ``etag:<ETag>``, else ``repr`` of the mtime."""
    etag = reported_etag(info)
    if etag:
        return "etag:" + etag
    mtime = reported_mtime(info)
    return None if mtime is None else repr(float(mtime))


def comparable(version: str, found: str) -> bool:
    """Whether a listed ``version`` is of the kind ``found`` is (an mtime literal or an
    ETag), so that inequality means another version of the file."""
    if found.startswith("etag:"):
        return True
    try:
        float(version)
    except ValueError:
        return False
    return True


def is_another_version(version: str, found: str | None) -> bool:
    """Whether the store's ``found`` (``observed_version``) says the file is no longer the
    listed ``version``: a version of the same kind that differs. Unknown (None) or of
    another kind, it says nothing."""
    return (
        found is not None and comparable(version, found) and found.removeprefix("etag:") != version
    )
