"""The storage under the versioned metastore cache: per key ("db.table"), a few versions of one
kind of entry (a table, or a table's partition list), each tagged with what it is valid for;
LRU-bounded by weight.

Contract (the caller, ``CachedMetastore``, holds its lock around every call; nothing here
reads the database or the clock):
- A key holds at most ``versions_per_key`` versions, newest first. Keeping the previous
  version lets a query whose snapshot is one commit behind still be served from the cache
  after the cache has moved on (see ``cached_store``).
- ``install`` is for database reads: it refuses a version that is not newer than the current
  one of the same table (the cache only moves forward: monotonic reads), and a read that
  started before an invalidation of its key (``since``, from ``generation()``) so a read that
  raced an invalidating event can never reinstate what the event removed.
- ``push`` is for versions built from the notification log, which are newer by construction.
- Weight: a table entry weighs 1, a partition list its number of partitions. The total of all
  held versions stays <= ``max_weight``: older versions of the key just written are dropped
  first, then least recently used keys. A version heavier than ``max_weight`` alone is not
  held.

Limits: the per-key invalidation marks (``_invalidated_at``) are kept for every key ever
invalidated (one int per table name); they are dropped by ``clear``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from raptorx_py.hive.write_ids import ValidWriteIdList


@dataclass(frozen=True)
class CachedVersion:
    """One cached value. ``write_ids`` is the ValidWriteIdList it was read under (or built
    for); ``None`` for an unversioned entry (external table, or partitions with versioning
    off), which is served by age (``loaded_at``, the cache's clock) instead."""

    value: Any
    table_id: int
    write_ids: ValidWriteIdList | None
    loaded_at: float
    weight: int = 1


class VersionedEntries:
    """Versions by key, newest first, with LRU eviction by weight (see the module docstring).
    Not thread-safe on its own."""

    def __init__(self, max_weight: int, versions_per_key: int = 2):
        self.max_weight = max_weight
        self.versions_per_key = versions_per_key
        self._entries: OrderedDict[str, list[CachedVersion]] = OrderedDict()
        self._weight = 0
        self._generation = 0
        self._invalidated_at: dict[str, int] = {}
        self._cleared_at = 0
        self.evictions = 0

    # -- reading --------------------------------------------------------------------------
    def lookup(self, key: str, serves: Callable[[CachedVersion], bool]) -> CachedVersion | None:
        """The newest version of ``key`` that ``serves`` accepts (marking the key used)."""
        for version in self._entries.get(key, ()):
            if serves(version):
                self._entries.move_to_end(key)
                return version
        return None

    def current(self, key: str) -> CachedVersion | None:
        versions = self._entries.get(key)
        return versions[0] if versions else None

    def keys(self) -> list[str]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        return self._weight

    # -- writing --------------------------------------------------------------------------
    def generation(self) -> int:
        """A mark to pass to ``install``: taken before a database read starts."""
        return self._generation

    def install(self, key: str, version: CachedVersion, since: int) -> bool:
        """Hold ``version`` (read from the database) unless an invalidation of ``key`` came
        after ``since`` or the current version of the same table is as new or newer."""
        if self._invalidated_at.get(key, 0) > since or self._cleared_at > since:
            return False
        current = self.current(key)
        if (
            current is not None
            and current.table_id == version.table_id
            and current.write_ids is not None
            and version.write_ids is not None
            and version.write_ids.compare(current.write_ids) <= 0
        ):
            return False
        if current is not None and current.table_id != version.table_id:
            self._drop(key)  # another table under the same name: its versions are useless
        return self.push(key, version)

    def push(self, key: str, version: CachedVersion) -> bool:
        """Make ``version`` the newest of ``key``; False when it is too heavy to hold."""
        if version.weight > self.max_weight:
            self._drop(key)
            return False
        old = self._entries.get(key, [])
        unversioned = version.write_ids is None
        # An unversioned entry is served by age: an older copy is of no use to anyone.
        versions = [version] if unversioned else [version] + old[: self.versions_per_key - 1]
        self._weight += sum(v.weight for v in versions) - sum(v.weight for v in old)
        self._entries[key] = versions
        self._entries.move_to_end(key)
        self._shrink(key)
        return True

    def invalidate(self, key: str) -> bool:
        """Forget ``key``; reads already under way will not reinstate it."""
        self._generation += 1
        self._invalidated_at[key] = self._generation
        return self._drop(key)

    def clear(self) -> None:
        self._generation += 1
        self._cleared_at = self._generation
        self._invalidated_at.clear()
        self._entries.clear()
        self._weight = 0

    # -- plumbing -------------------------------------------------------------------------
    def _drop(self, key: str) -> bool:
        versions = self._entries.pop(key, None)
        if versions is None:
            return False
        self._weight -= sum(v.weight for v in versions)
        return True

    def _shrink(self, key: str) -> None:
        versions = self._entries[key]
        while self._weight > self.max_weight and len(versions) > 1:
            self._weight -= versions.pop().weight
        while self._weight > self.max_weight:
            lru = next(iter(self._entries))
            if lru == key:  # cannot happen: key alone fits (checked in push)
                break
            self._drop(lru)
            self.evictions += 1
