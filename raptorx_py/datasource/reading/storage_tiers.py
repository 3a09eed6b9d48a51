"""The executor-side storage tiers one split is read through: the Parquet footer cache
(``hive.parquet.metadata-cache-enabled``) and the local-disk block cache (``cache.enabled``),
both keyed by the file identity the planner listed (URL, size and version:
``storage.file_versions``).

``scan.read_split`` asks ``StorageTiers.for_settings(settings)`` once per split for the
filesystem to open the file with (``filesystem``) and the footer source to hand to
``storage.parquet_files.open_parquet`` (``footer_source``). The caches themselves are one per
process and configuration (``block_cache_for``, ``footer_cache_for``), so this is cheap.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

from raptorx_py.cache.block_cache import block_cache_for
from raptorx_py.cache.footer_cache import FileIdentity, footer_cache_for
from raptorx_py.config.settings import Settings
from raptorx_py.metrics import counters

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StorageTiers:
    """Which executor-side caches a read goes through.

    Contract:
    - ``footer_cache`` is this process's footer cache, or None when the tier is off;
      ``block_cache`` says whether ``filesystem`` puts the block cache in front of a file's
      store.
    - Setting the tiers up never fails a read: a cache that cannot be made is left out,
      counted (``footer_cache.unavailable``, ``block_cache.unavailable``) and logged with
      its cause. A block cache whose directory is unusable (it warned once, and reads go
      straight to the store) is counted per file in ``block_cache.bypassed``.

    Limits: the cache modules handle their own faults (unusable directories, corrupt
    entries, failed writes); this is the last resort for what they did not foresee. Bytes
    that pass a cache's checksum but do not decode are ``scan.read_split``'s to handle.
    """

    settings: Any = None
    footer_cache: Any = None
    block_cache: bool = False

    @classmethod
    def for_settings(cls, settings: Settings) -> StorageTiers:
        footers = None
        if settings.parquet_metadata_cache_enabled:
            try:
                footers = footer_cache_for(settings.footer_cache)
            except Exception:  # noqa: BLE001 - a cache never fails a read (see the class)
                counters.add("footer_cache.unavailable")
                log.warning(
                    "footer cache unavailable; reading footers from the store", exc_info=True
                )
        return cls(settings, footers, bool(settings.cache_enabled))

    @property
    def caching(self) -> bool:
        return self.footer_cache is not None or self.block_cache

    def filesystem(self, target):
        """``target`` behind this node's block cache, or ``target`` itself when the tier is
        off or cannot be set up."""
        if not self.block_cache:
            return target
        try:
            fs = block_cache_for(self.settings.block_cache, target)
        except Exception:  # noqa: BLE001 - a cache never fails a read (see the class)
            counters.add("block_cache.unavailable")
            log.warning("block cache unavailable; reading from the store", exc_info=True)
            return target
        if not fs.enabled:
            counters.add("block_cache.bypassed")
        return fs

    def footer_source(self, split):
        """What ``open_parquet(footer=...)`` takes: the footer cache's ``get_or_load`` bound
        to the split's file identity, or None when the tier is off."""
        if self.footer_cache is None:
            return None
        identity = FileIdentity(split.url, split.size, split.version)
        return functools.partial(self.footer_cache.get_or_load, identity)


#: No cache at all: how a read goes straight to the store.
NO_TIERS = StorageTiers()
