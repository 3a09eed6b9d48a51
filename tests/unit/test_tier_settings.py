"""Each cache tier's own settings (``config/tiers.py``): a slice of ``Settings`` with exactly
the properties the tier reads, and the tier's factory taking that slice alone (one instance
per equal slice, however it was cut)."""

from __future__ import annotations

from typing import get_type_hints

from raptorx_py.cache.block_cache import block_cache_for
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

TIER_SLICES = (BlockCacheSettings, FooterCacheSettings, FragmentCacheSettings, ListingCacheSettings)


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
    again = settings(tmp_path)
    for cls, name in (
        (BlockCacheSettings, "block_cache"),
        (FooterCacheSettings, "footer_cache"),
        (FragmentCacheSettings, "fragment_cache"),
        (ListingCacheSettings, "listing_cache"),
    ):
        cut = getattr(s, name)
        assert type(cut) is cls
        assert cut == getattr(again, name) and hash(cut) == hash(getattr(again, name))


def test_a_factory_gives_one_cache_for_equal_slices(tmp_path):
    s, again = settings(tmp_path), settings(tmp_path)
    assert footer_cache_for(s.footer_cache) is footer_cache_for(again.footer_cache)
    assert fragment_cache_for(s.fragment_cache) is fragment_cache_for(again.fragment_cache)
    assert listing_cache_for(s.listing_cache) is listing_cache_for(again.listing_cache)


def test_no_factory_takes_the_whole_settings():
    """Each tier's factory is typed with its slice alone (issue 51: no factory depends on
    the whole ``Settings``)."""
    for factory in (footer_cache_for, fragment_cache_for, listing_cache_for, block_cache_for):
        hint = get_type_hints(factory)["tier"]
        assert hint in TIER_SLICES, (factory.__name__, hint)
