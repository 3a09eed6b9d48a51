"""Each cache tier's own settings: a small frozen slice of ``Settings`` per tier, so that a
tier's factory (``block_cache_for``, ``footer_cache_for``, ``fragment_cache_for``,
``listing_cache_for``, ``cached_metastore_for``) depends on the properties it reads and
nothing else. Opening the metastore (``open_catalog``, ``open_metastore``) takes a slice of
its own, ``MetastoreConnectionSettings``, which the metastore cache's slice carries.

``Settings.block_cache`` (and ``footer_cache``, ``fragment_cache``, ``listing_cache``,
``metastore_cache``, ``metastore_connection``) make them, and a factory takes only its
slice: a caller holding a whole ``Settings`` passes its property. A slice is hashable: it
is part of the key a tier's one instance per process is kept under
(``cache.process_registry``; the metastore cache's own registry in
``metastore.cached_store``).
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


@dataclass(frozen=True)
class MetastoreConnectionSettings:
    """What opening the metastore reads: ``hive.metastore.url`` (SQLite or PostgreSQL),
    ``hive.metastore.uri`` (a Hive Metastore over Thrift, tried first), its
    ``hive.metastore-timeout``, ``hive.metastore.thrift.client.max-retries``,
    ``hive.metastore.thrift.client.min-backoff-delay``,
    ``hive.metastore.thrift.client.max-backoff-delay`` and
    ``hive.metastore.partition-batch-size.max``; ``hive.txn.timeout`` (when the transactions
    the database's ``Metastore`` opens expire)."""

    url: str
    uri: str
    timeout: float
    max_retries: int
    min_backoff: float
    max_backoff: float
    partition_batch_size: int
    txn_timeout: float


@dataclass(frozen=True)
class MetastoreCacheSettings:
    """``hive.metastore-cache-ttl``, ``-scope``, ``-maximum-size``,
    ``hive.partition-versioning-enabled``, ``hive.metastore-refresh-interval``,
    ``hive.metastore-cache-prewarm``; the metastore it caches (``connection``, with
    ``hive.txn.timeout``); the node's invalidation journal under ``cache.base-directory``."""

    ttl: float
    scope: str  # "ALL" | "PARTITION"
    maximum_size: int
    partition_versioning_enabled: bool
    refresh_interval: float
    prewarm: bool
    connection: MetastoreConnectionSettings
    journal_directory: str

    @property
    def txn_timeout(self) -> float:
        """``hive.txn.timeout``: the connection's (one field, so the two cannot disagree)."""
        return self.connection.txn_timeout
