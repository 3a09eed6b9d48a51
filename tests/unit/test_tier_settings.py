"""Each cache tier's own settings (``config/tiers.py``): a slice of ``Settings`` with exactly
the properties the tier reads, and the tier's factory taking that slice alone (one instance
per equal slice, however it was cut)."""

from __future__ import annotations

import dataclasses
from typing import get_type_hints

import pytest

from raptorx_py.cache.block_cache import block_cache_for
from raptorx_py.cache.footer_cache import footer_cache_for
from raptorx_py.cache.fragment_cache import fragment_cache_for
from raptorx_py.cache.listing_cache import listing_cache_for
from raptorx_py.config.tiers import (
    BlockCacheSettings,
    FooterCacheSettings,
    FragmentCacheSettings,
    ListingCacheSettings,
    MetastoreCacheSettings,
    MetastoreConnectionSettings,
)
from raptorx_py.metastore import cached_store
from raptorx_py.metastore.cached_store import (
    CachedMetastore,
    cached_metastore_for,
    close_cached_metastores,
    with_cached_metastore,
)
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.metastore.store import open_metastore
from tests.unit.test_cache_management import tier_settings

TIER_SLICES = (
    BlockCacheSettings,
    FooterCacheSettings,
    FragmentCacheSettings,
    ListingCacheSettings,
    MetastoreCacheSettings,
)


def settings(tmp_path):
    return tier_settings(
        tmp_path,
        **{
            "hive.parquet.metadata-cache-size": "3MB",
            "fragment-result-cache.max-cached-entries": "77",
            "hive.file-status-cache-tables": "shop.*",
            "hive.file-status-cache-expire-time": "13m",
            "hive.metastore-cache-scope": "PARTITION",
            "hive.metastore-cache-maximum-size": "321",
            "hive.metastore-refresh-interval": "7s",
            "hive.metastore-timeout": "42s",
            "hive.metastore.partition-batch-size.max": "9",
            "hive.txn.timeout": "11m",
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
    assert s.metastore_connection == MetastoreConnectionSettings(
        f"sqlite:///{tmp_path}/metastore.db",
        "",
        42.0,
        s.metastore_max_retries,
        s.metastore_min_backoff,
        s.metastore_max_backoff,
        9,
        660.0,
    )
    assert s.metastore_cache == MetastoreCacheSettings(
        3600.0,
        "PARTITION",
        321,
        s.partition_versioning_enabled,
        7.0,
        s.metastore_cache_prewarm,
        s.metastore_connection,
        str(tmp_path / "cache"),
    )
    assert s.metastore_cache.txn_timeout == 660.0
    again = settings(tmp_path)
    for cls, name in (
        (BlockCacheSettings, "block_cache"),
        (FooterCacheSettings, "footer_cache"),
        (FragmentCacheSettings, "fragment_cache"),
        (ListingCacheSettings, "listing_cache"),
        (MetastoreCacheSettings, "metastore_cache"),
        (MetastoreConnectionSettings, "metastore_connection"),
    ):
        cut = getattr(s, name)
        assert type(cut) is cls
        assert cut == getattr(again, name) and hash(cut) == hash(getattr(again, name))


def test_a_factory_gives_one_cache_for_equal_slices(tmp_path):
    s, again = settings(tmp_path), settings(tmp_path)
    assert footer_cache_for(s.footer_cache) is footer_cache_for(again.footer_cache)
    assert fragment_cache_for(s.fragment_cache) is fragment_cache_for(again.fragment_cache)
    assert listing_cache_for(s.listing_cache) is listing_cache_for(again.listing_cache)
    with open_metastore(s.metastore_connection, create=True):
        pass
    try:
        cache = cached_metastore_for(s.metastore_cache, start=False)
        assert cached_metastore_for(again.metastore_cache, start=False) is cache
        assert with_cached_metastore(again.metastore_cache, lambda held: held) is cache
    finally:
        close_cached_metastores()


def other_value(name: str, value):
    """A value of the same type as ``value``, different from it."""
    if name == "scope":
        return "ALL" if value == "PARTITION" else "PARTITION"
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return f"{value}-other"
    return value + 1


def one_field_changed(tier: MetastoreCacheSettings):
    """``tier`` with each of its fields, and each of its connection's, changed alone."""
    for field in dataclasses.fields(MetastoreCacheSettings):
        if field.name != "connection":
            changed = other_value(field.name, getattr(tier, field.name))
            yield field.name, dataclasses.replace(tier, **{field.name: changed})
    for field in dataclasses.fields(MetastoreConnectionSettings):
        changed = other_value(field.name, getattr(tier.connection, field.name))
        connection = dataclasses.replace(tier.connection, **{field.name: changed})
        yield f"connection.{field.name}", dataclasses.replace(tier, connection=connection)


def test_a_metastore_slice_differing_in_one_field_gets_another_cache(tmp_path, monkeypatch):
    """The metastore cache's process registry is keyed by the whole slice: a configuration
    differing in any field the cache or its connection reads gets a cache of its own."""
    s = settings(tmp_path)
    with open_metastore(s.metastore_connection, create=True):
        pass
    # Every changed connection opens the same SQLite file: what is compared is the key.
    monkeypatch.setattr(
        cached_store, "open_catalog", lambda _: open_catalog(s.metastore_connection)
    )
    try:
        base = cached_metastore_for(s.metastore_cache, start=False)
        seen = {id(base)}
        changed = list(one_field_changed(s.metastore_cache))
        assert {name for name, _ in changed} >= {"ttl", "journal_directory", "connection.uri"}
        for name, tier in changed:
            assert tier != s.metastore_cache, name
            cache = cached_metastore_for(tier, start=False)
            assert id(cache) not in seen, name
            assert cached_metastore_for(tier, start=False) is cache, name
            seen.add(id(cache))
        assert cached_metastore_for(settings(tmp_path).metastore_cache, start=False) is base
    finally:
        close_cached_metastores()


def test_no_factory_takes_the_whole_settings():
    """Each tier's factory is typed with its slice alone (issue 51: no factory depends on
    the whole ``Settings``)."""
    for factory in (
        footer_cache_for,
        fragment_cache_for,
        listing_cache_for,
        block_cache_for,
        cached_metastore_for,
        with_cached_metastore,
        CachedMetastore.__init__,
    ):
        hint = get_type_hints(factory)["tier"]
        assert hint in TIER_SLICES, (factory.__name__, hint)
    assert get_type_hints(cached_metastore_for)["tier"] is MetastoreCacheSettings
    assert get_type_hints(CachedMetastore.__init__)["tier"] is MetastoreCacheSettings


@pytest.mark.parametrize("opener", [open_catalog, open_metastore])
def test_opening_the_metastore_takes_the_connection_slice(opener):
    assert get_type_hints(opener)["connection"] is MetastoreConnectionSettings
