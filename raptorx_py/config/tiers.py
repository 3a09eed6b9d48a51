"""Each cache tier's own settings: a small frozen slice of ``Settings`` per tier, so that a
tier's factory (``block_cache_for``, ``footer_cache_for``, ``fragment_cache_for``,
``listing_cache_for``) depends on the properties it reads and nothing else.

``Settings.block_cache`` (and ``footer_cache``, ``fragment_cache``, ``listing_cache``) make
them; ``<Slice>.of(x)`` takes a slice or a whole ``Settings`` (sliced then), for callers that
hold only the latter. A slice is hashable: it is part of the key a tier's one instance per
process is kept under (``cache.process_registry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Self


class _Slice:
    """What every slice shares: ``of``."""

    #: The ``Settings`` property that makes this slice.
    _property: ClassVar[str]

    @classmethod
    def of(cls, settings: Any) -> Self:
        """``settings`` itself when it is this slice, else a ``Settings``' slice."""
        return settings if isinstance(settings, cls) else getattr(settings, cls._property)


@dataclass(frozen=True)
class BlockCacheSettings(_Slice):
    """``cache.enabled``, ``cache.base-directory``, ``cache.block-size``,
    ``cache.alluxio.max-cache-size``, ``cache.group-shared``."""

    _property: ClassVar[str] = "block_cache"
    enabled: bool
    base_directory: str
    block_size: int
    max_size: int
    group_shared: bool


@dataclass(frozen=True)
class FooterCacheSettings(_Slice):
    """``hive.parquet.metadata-cache-enabled``, ``-size``, ``-ttl-since-last-access``; its
    disk copy under ``cache.base-directory`` (where the node's invalidation journal is too),
    bounded by ``cache.alluxio.max-cache-size``; ``cache.group-shared``."""

    _property: ClassVar[str] = "footer_cache"
    enabled: bool
    base_directory: str
    size: int
    ttl: float
    max_disk_size: int
    group_shared: bool


@dataclass(frozen=True)
class FragmentCacheSettings(_Slice):
    """``fragment-result-cache.enabled``, ``.base-directory``, ``.max-cache-size``,
    ``.max-cached-entries``, ``.max-single-cached-entry-size``, ``.cache-ttl``;
    ``cache.group-shared``."""

    _property: ClassVar[str] = "fragment_cache"
    enabled: bool
    base_directory: str
    max_size: int
    max_entries: int
    max_entry_size: int
    ttl: float
    group_shared: bool


@dataclass(frozen=True)
class ListingCacheSettings(_Slice):
    """``hive.file-status-cache-tables``, ``-size``, ``-expire-time``; the node's
    invalidation journal under ``cache.base-directory``."""

    _property: ClassVar[str] = "listing_cache"
    tables: str
    size: int
    expire_time: float
    journal_directory: str
