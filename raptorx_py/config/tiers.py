"""Each cache tier's own settings: a small frozen slice of ``Settings`` per tier, so that a
tier's factory (``block_cache_for``, ``footer_cache_for``, ``fragment_cache_for``,
``listing_cache_for``) depends on the properties it reads and nothing else.

``Settings.block_cache`` (and ``footer_cache``, ``fragment_cache``, ``listing_cache``) make
them, and a factory takes only its slice: a caller holding a whole ``Settings`` passes its
property. A slice is hashable: it is part of the key a tier's one instance per process is
kept under (``cache.process_registry``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BlockCacheSettings:
    """``cache.enabled``, ``cache.base-directory``, ``cache.block-size``,
    ``cache.alluxio.max-cache-size``, ``cache.group-shared``."""

    enabled: bool
    base_directory: str
    block_size: int
    max_size: int
    group_shared: bool


@dataclass(frozen=True)
class FooterCacheSettings:
    """``hive.parquet.metadata-cache-enabled``, ``-size``, ``-ttl-since-last-access``; its
    disk copy under ``cache.base-directory`` (where the node's invalidation journal is too),
    bounded by ``cache.alluxio.max-cache-size``; ``cache.group-shared``."""

    enabled: bool
    base_directory: str
    size: int
    ttl: float
    max_disk_size: int
    group_shared: bool


@dataclass(frozen=True)
class FragmentCacheSettings:
    """``fragment-result-cache.enabled``, ``.base-directory``, ``.max-cache-size``,
    ``.max-cached-entries``, ``.max-single-cached-entry-size``, ``.cache-ttl``;
    ``cache.group-shared``."""

    enabled: bool
    base_directory: str
    max_size: int
    max_entries: int
    max_entry_size: int
    ttl: float
    group_shared: bool


@dataclass(frozen=True)
class ListingCacheSettings:
    """``hive.file-status-cache-tables``, ``-size``, ``-expire-time``; the node's
    invalidation journal under ``cache.base-directory``."""

    tables: str
    size: int
    expire_time: float
    journal_directory: str
