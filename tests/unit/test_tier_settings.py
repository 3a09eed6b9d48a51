"""Each cache tier's own settings (``config/tiers.py``): a slice of ``Settings`` with exactly
the properties the tier reads, and the tier's factory giving the same instance for the slice
as for the whole ``Settings`` it was cut from."""

from __future__ import annotations

from raptorx_py.cache.footer_cache import footer_cache_for
from raptorx_py.cache.fragment_cache import fragment_cache_for
from raptorx_py.cache.listing_cache import listing_cache_for
from raptorx_py.config.tiers import (
    BlockCacheSettings,
    FooterCacheSettings,
    FragmentCacheSettings,
    ListingCacheSettings,
)
from tests.unit.test_cache_management import tier_settings


def settings(tmp_path):
    return tier_settings(
        tmp_path,
        **{
            "hive.parquet.metadata-cache-size": "3MB",
            "fragment-result-cache.max-cached-entries": "77",
            "hive.file-status-cache-tables": "shop.*",
            "hive.file-status-cache-expire-time": "13m",
        },
    )


def test_each_slice_holds_the_properties_of_its_tier(tmp_path):
    s = settings(tmp_path)
    assert s.block_cache == BlockCacheSettings(
        True, str(tmp_path / "cache"), 4096, s.cache_max_size, s.cache_group_shared
    )
    assert (s.footer_cache.size, s.footer_cache.base_directory) == (3 << 20, s.cache_base_directory)
    assert s.fragment_cache.max_entries == 77 and s.fragment_cache.enabled
    assert s.listing_cache == ListingCacheSettings(
        "shop.*", s.file_status_cache_size, 780.0, str(tmp_path / "cache")
    )
    for cls in (
        BlockCacheSettings,
        FooterCacheSettings,
        FragmentCacheSettings,
        ListingCacheSettings,
    ):
        cut = cls.of(s)
        assert cls.of(cut) is cut and hash(cut) == hash(cls.of(s))


def test_a_factory_gives_the_same_cache_for_the_slice_and_the_whole_settings(tmp_path):
    s = settings(tmp_path)
    assert footer_cache_for(s.footer_cache) is footer_cache_for(s)
    assert fragment_cache_for(s.fragment_cache) is fragment_cache_for(s)
    assert listing_cache_for(s.listing_cache) is listing_cache_for(s)
