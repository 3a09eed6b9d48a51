"""``raptorx cache`` as a Python API (``raptorx_py.cache_management``) and its journal
(``raptorx_py.cache_invalidations``), Spark-free: real files, real tier directories, and
another process reading while the tiers are cleared and invalidated."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py import cache_invalidations as journal
from raptorx_py.cache.block_store import BlockStore
from raptorx_py.cache.fragment_cache import FragmentCache, file_prefix
from raptorx_py.cache_management import (
    cache_stats,
    clear_caches,
    invalidate_table,
    warm_table,
)
from raptorx_py.config import load_settings
from raptorx_py.errors import ConfigError, NoSuchObjectError, SchemaError
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.tables.table_registration import register_external_table
from tests.support.counter_deltas import CounterDeltas

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
ROWS_PER_FILE = 2000


def tier_settings(tmp_path, **extra):
    """Every storage tier on, in directories of this test's own; the metastore and
    listing caches on; counts in a metrics sink of its own."""
    return load_settings(
        overrides={
            "hive.metastore.url": f"sqlite:///{tmp_path}/metastore.db",
            "metrics.directory": str(tmp_path / "metrics"),
            "cache.base-directory": str(tmp_path / "cache"),
            "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
            "cache.enabled": "true",
            "hive.parquet.metadata-cache-enabled": "true",
            "fragment-result-cache.enabled": "true",
            "hive.metastore-cache-ttl": "1h",
            "hive.file-status-cache-tables": "*",
            "cache.block-size": "4kB",
            **extra,
        }
    )


def make_table(tmp_path, settings, name="shop.events"):
    """A sealed external table ``shop.events`` partitioned by day: two files per day of
    ``ROWS_PER_FILE`` rows (id, qty, note), four row groups each."""
    root = tmp_path / "events"
    base = 0
    for day in DAYS:
        (root / f"day={day}").mkdir(parents=True)
        for f in range(2):
            ids = pa.array(range(base, base + ROWS_PER_FILE), pa.int64())
            base += ROWS_PER_FILE
            pq.write_table(
                pa.table(
                    {
                        "id": ids,
                        "qty": pa.array([i % 50 for i in range(ROWS_PER_FILE)], pa.int64()),
                        "note": pa.array([f"note {i}" * 3 for i in range(ROWS_PER_FILE)]),
                    }
                ),
                root / f"day={day}" / f"part-{f}.parquet",
                row_group_size=ROWS_PER_FILE // 4,
            )
    with open_catalog(settings.metastore_connection, create=True) as ms:
        register_external_table(ms, settings, name, f"file://{root}", sealed=True)
    return root


def files_of(root, day=None):
    days = [day] if day else DAYS
    return [f"file://{root}/day={d}/part-{f}.parquet" for d in days for f in range(2)]


def block_store(settings) -> BlockStore:
    return BlockStore(os.path.join(settings.cache_base_directory, "blocks"), max_size=1 << 30)


def footer_files(settings) -> list[str]:
    root = os.path.join(settings.cache_base_directory, "footers")
    return [n for _, _, names in os.walk(root) for n in names if n.endswith(".footer")]


def fragment_cache(settings) -> FragmentCache:
    return FragmentCache(
        settings.fragment_cache_base_directory,
        max_bytes=1 << 30,
        max_entries=10_000,
        max_entry_bytes=1 << 30,
        ttl=None,
    )


def plant_fragments(settings, urls) -> None:
    """One fragment entry per file, keyed as ``fragment_keys`` keys them (its prefix first)."""
    cache = fragment_cache(settings)
    schema = pa.schema([("x", pa.int64())])
    for i, url in enumerate(urls):
        key = file_prefix(url) + i.to_bytes(20, "big")
        assert cache.put(key, schema, [pa.record_batch([pa.array([i], pa.int64())], schema)])


# -- the journal ------------------------------------------------------------------------------


def test_journal_readers_see_what_was_posted_after_they_started(tmp_path):
    path = journal.journal_path(str(tmp_path / "cache"))
    before = journal.JournalReader(path)  # no journal yet
    first = journal.Invalidation(("listing",), "db.t", ("file:///x/k=1",), ())
    journal.post(path, first)
    after = journal.JournalReader(path)  # starts at the end: its tier holds nothing older
    assert before.poll() == (first,)
    assert before.poll() == () and after.poll() == ()
    second = journal.Invalidation(journal.MEMORY_TIERS, None)
    journal.post(path, second)
    assert before.poll() == after.poll() == (second,)
    # A line being written (no newline yet) waits for the next poll.
    with open(path, "ab") as f:
        f.write(first.to_line()[:10])
    assert before.poll() == ()
    with open(path, "ab") as f:
        f.write(first.to_line()[10:])
    assert before.poll() == (first,)
    # A journal replaced by hand cannot say what was missed: everything.
    os.replace(_copy(path), path)
    assert before.poll() == journal.EVERYTHING
    os.unlink(path)
    assert before.poll() == journal.EVERYTHING and before.poll() == ()


def _copy(path: str) -> str:
    other = path + ".new"
    with open(path, "rb") as src, open(other, "wb") as dst:
        dst.write(src.read())
    return other


# -- stats, clear -------------------------------------------------------------------------------


def test_stats_show_each_tier_and_its_counters(tmp_path):
    from raptorx_py.metrics import flush

    settings = tier_settings(tmp_path)
    root = make_table(tmp_path, settings)
    flush(settings.metrics_directory)  # what this process counted before is not ours
    empty = {t.tier: t for t in cache_stats(settings)}
    assert list(empty) == ["metastore", "listing", "footer", "block", "fragment"]
    assert empty["block"].entries == 0 and empty["block"].bytes == 0
    assert empty["metastore"].entries is None  # in other processes' memory
    assert empty["block"].limit == settings.cache_max_size
    assert not os.path.exists(os.path.join(settings.cache_base_directory, "blocks"))  # not made
    warm_table(settings, "shop.events")
    plant_fragments(settings, files_of(root))
    flush(settings.metrics_directory)
    stats = {t.tier: t for t in cache_stats(settings)}
    store = block_store(settings)
    assert stats["block"].entries == len(store.entries()) > 0
    assert stats["block"].bytes == store.total_bytes()
    assert stats["block"].misses - empty["block"].misses == stats["block"].entries
    assert stats["footer"].entries == len(footer_files(settings)) == 6
    assert stats["footer"].misses - empty["footer"].misses == 6
    assert stats["fragment"].entries == 6 and stats["fragment"].bytes > 0
    assert stats["fragment"].limit == settings.fragment_cache_max_size
    assert stats["block"].location.endswith(os.path.join("cache", "blocks"))
    unset = tier_settings(tmp_path, **{"metrics.directory": ""})
    assert {t.hits for t in cache_stats(unset)} == {None}  # no sink: no counts to show


def test_clear_empties_the_tiers_named_and_posts_the_memory_ones(tmp_path):
    settings = tier_settings(tmp_path)
    root = make_table(tmp_path, settings)
    warm_table(settings, "shop.events")
    plant_fragments(settings, files_of(root))
    reader = journal.JournalReader(journal.journal_path(settings.cache_base_directory))
    blocks = len(block_store(settings).entries())

    report = clear_caches(settings, ["block"])
    assert report.removed == {"block": blocks} and report.posted == ()
    assert block_store(settings).entries() == {}
    assert len(footer_files(settings)) == 6 and len(fragment_cache(settings)) == 6
    assert reader.poll() == ()

    report = clear_caches(settings)
    assert report.removed == {"footer": 6, "block": 0, "fragment": 6}
    assert footer_files(settings) == [] and len(fragment_cache(settings)) == 0
    (posted,) = reader.poll()
    assert posted.table is None and set(posted.tiers) == set(journal.MEMORY_TIERS)
    with pytest.raises(ConfigError, match="unknown cache tier 'blocks'"):
        clear_caches(settings, ["blocks"])


# -- invalidate ---------------------------------------------------------------------------------


def test_invalidate_a_partition_drops_its_files_entries_in_every_tier(tmp_path):
    from raptorx_py.cache.footer_cache import url_prefix

    settings = tier_settings(tmp_path)
    root = make_table(tmp_path, settings)
    warm_table(settings, "shop.events")
    plant_fragments(settings, files_of(root))
    before = block_store(settings).entries()

    report = invalidate_table(settings, "shop.events", "day=2024-01-02")
    assert report.partitions == ["day=2024-01-02"] and report.files == 2
    gone = files_of(root, "2024-01-02")
    after = block_store(settings).entries()
    assert report.removed["block"] == len(before) - len(after) > 0
    assert report.removed["footer"] == 2 and report.removed["fragment"] == 2
    # What remains is exactly the other days' entries.
    prefixes = {url_prefix(u) for u in gone}
    assert not any(n[:16] in prefixes for n in footer_files(settings))
    assert len(footer_files(settings)) == 4 and len(fragment_cache(settings)) == 4
    kept = fragment_cache(settings)._entry_names("")
    assert not any(n.startswith(file_prefix(u).hex()) for u in gone for n in kept)
    # The next warm fetches just that partition again.
    again = warm_table(settings, "shop.events")
    assert again.footers_loaded == 2
    assert again.counted["block_cache.misses"] == len(before) - len(after)

    report = invalidate_table(settings, "shop.events")
    assert report.files == 6 and report.removed["footer"] == 6
    assert block_store(settings).entries() == {} and len(fragment_cache(settings)) == 0


def test_invalidate_names_what_is_wrong(tmp_path):
    settings = tier_settings(tmp_path)
    make_table(tmp_path, settings)
    with pytest.raises(NoSuchObjectError, match="partition 'shop.events/day=2023-12-31'"):
        invalidate_table(settings, "shop.events", "day=2023-12-31")
    with pytest.raises(SchemaError, match="'month', which is not a partition key"):
        invalidate_table(settings, "shop.events", "month=1")
    with pytest.raises(NoSuchObjectError, match="table 'shop.nope' does not exist"):
        invalidate_table(settings, "shop.nope")


def test_invalidate_reaches_the_memory_tiers_of_this_process(tmp_path):
    """The metastore cache, the listing cache and the footer memory a planning process
    holds apply the journal before they next serve."""
    from raptorx_py.cache.footer_cache import FileIdentity, footer_cache_for
    from raptorx_py.cache.listing_cache import listing_cache_for
    from raptorx_py.metastore.cached_store import cached_metastore_for, close_cached_metastores

    # A listing cache of this test's own (one per process and configuration).
    settings = tier_settings(tmp_path, **{"hive.file-status-cache-expire-time": "17m"})
    root = make_table(tmp_path, settings)
    try:
        cache = cached_metastore_for(settings.metastore_cache, start=False)
        table = cache.get_table("shop", "events")
        cache.list_partitions(table)
        listings = listing_cache_for(settings.listing_cache)
        for day in DAYS:
            location = f"file://{root}/day={day}"
            listings.get_or_list("shop.events", location, "v1", True, lambda d=day: [d])
        footers = footer_cache_for(settings.footer_cache)
        url = files_of(root, DAYS[0])[0]
        identity = FileIdentity(url, os.path.getsize(url[7:]), "v1")
        footers.get_or_load(identity, lambda: pq.read_metadata(url[7:]))
        assert len(listings) == 3 and len(footers) == 1

        invalidate_table(settings, "shop.events", f"day={DAYS[0]}")
        deltas = CounterDeltas()
        assert listing_cache_for(settings.listing_cache) is listings and len(listings) == 2
        assert footer_cache_for(settings.footer_cache) is footers and len(footers) == 0
        assert cache.get_table("shop", "events").qualified_name == "shop.events"
        assert deltas["metastore_cache.table_misses"] == 1  # reloaded

        clear_caches(settings, ["listing"])
        assert len(listing_cache_for(settings.listing_cache)) == 0
    finally:
        close_cached_metastores()


# -- warm ----------------------------------------------------------------------------------------


def test_warm_reads_the_columns_and_rows_asked_for_then_nothing(tmp_path):
    settings = tier_settings(tmp_path)
    make_table(tmp_path, settings)
    narrow = warm_table(settings, "shop.events", columns=["id"], where="day = '2024-01-03'")
    assert narrow.files == 2 and narrow.row_groups == 8 and narrow.column_chunks == 8
    assert narrow.footers_loaded == 2 and narrow.bytes_from_store >= narrow.bytes_read
    # The same again: everything is cached.
    same = warm_table(settings, "shop.events", columns=["id"], where="day = '2024-01-03'")
    assert same.bytes_from_store == 0 and same.footers_loaded == 0
    assert same.counted["block_cache.hits"] > 0
    # Row groups the footers' statistics rule out are not read: ids of one file go
    # 0..1999 in four groups of 500.
    # (The partitions' statistics leave the first day only: ids 0..3999.)
    pruned = warm_table(settings, "shop.events", columns=["qty"], where="id < 500")
    assert pruned.files == 2 and pruned.row_groups == 1 and pruned.row_groups_pruned == 7
    wide = warm_table(settings, "shop.events")
    assert wide.files == 6 and wide.column_chunks == 6 * 4 * 3


def test_a_corrupt_block_met_by_warm_is_a_counted_miss_not_a_failure(tmp_path):
    """``raptorx cache warm`` reads as the scan does (``scan.raw_batches``): a block whose
    bytes were damaged on disk fails its MAC, is dropped and counted, and is fetched from the
    store again; the warm finishes, and the next one reads nothing from the store."""
    settings = tier_settings(tmp_path)
    make_table(tmp_path, settings)
    first = warm_table(settings, "shop.events", columns=["id"])
    data = os.path.join(settings.cache_base_directory, "blocks", "data")
    # Block 0 of a file holds the start of its first row group's first column, which the
    # warm reads again (the footer, at the end, comes from the footer cache).
    block = next(
        os.path.join(d, n) for d, _, names in os.walk(data) for n in names if n.endswith("-0")
    )
    with open(block, "r+b") as f:
        f.seek(10)
        byte = f.read(1)
        f.seek(10)
        f.write(bytes([byte[0] ^ 0xFF]))
    again = warm_table(settings, "shop.events", columns=["id"])
    assert (again.files, again.row_groups, again.column_chunks) == (
        first.files,
        first.row_groups,
        first.column_chunks,
    )
    assert again.counted["block_cache.corrupt_blocks"] == 1
    assert again.counted["block_cache.misses"] == 1 and again.bytes_from_store > 0
    assert warm_table(settings, "shop.events", columns=["id"]).bytes_from_store == 0


def test_a_block_cache_that_cannot_be_set_up_leaves_warm_to_the_footer_cache(tmp_path, monkeypatch):
    """The scan's rule (``StorageTiers``): a tier that cannot be set up is left out and
    counted, never a failure; the footers are still cached."""
    from raptorx_py.datasource.reading import storage_tiers

    def broken(settings, target):
        raise OSError("no room for the block cache")

    settings = tier_settings(tmp_path)
    make_table(tmp_path, settings)
    monkeypatch.setattr(storage_tiers, "block_cache_for", broken)
    report = warm_table(settings, "shop.events", columns=["id"])
    assert report.files == 6 and report.footers_loaded == 6
    assert report.counted["block_cache.unavailable"] == 6
    assert not os.path.exists(os.path.join(settings.cache_base_directory, "blocks", "data"))


def test_warm_names_what_is_wrong(tmp_path):
    settings = tier_settings(tmp_path)
    make_table(tmp_path, settings)
    with pytest.raises(SchemaError, match="--columns names 'nope'"):
        warm_table(settings, "shop.events", columns=["nope"])
    with pytest.raises(SchemaError, match="OR is not supported"):
        warm_table(settings, "shop.events", where="id = 1 or id = 2")
    off = tier_settings(
        tmp_path, **{"cache.enabled": "false", "hive.parquet.metadata-cache-enabled": "false"}
    )
    with pytest.raises(ConfigError, match="nothing to warm"):
        warm_table(off, "shop.events")


# -- another process reads meanwhile ----------------------------------------------------------

READER = textwrap.dedent(
    """
    import sys
    from raptorx_py.config import load_settings
    from raptorx_py.datasource.planning.planner import plan_scan
    from raptorx_py.datasource.reading.scan import read_split
    from raptorx_py.metastore.cached_store import cached_metastore_for

    settings = load_settings(overrides=dict(a.split("=", 1) for a in sys.argv[2:]))
    rounds = int(sys.argv[1])
    cache = cached_metastore_for(settings.metastore_cache, start=False)
    for _ in range(rounds):
        snapshot = cache.snapshot(["shop.events"])
        table = cache.get_table("shop", "events", snapshot=snapshot)
        plan = plan_scan(cache, settings, table, table.columns, (), snapshot=snapshot)
        ids = [
            x
            for s in plan.splits
            for b in read_split(s, table, table.columns[:1], (), settings)
            for x in b.column(0).to_pylist()
        ]
        print(len(ids), sum(ids), flush=True)
    """
)


def test_a_reader_process_stays_right_while_the_tiers_are_cleared_and_invalidated(tmp_path):
    settings = tier_settings(tmp_path)
    make_table(tmp_path, settings)
    n = ROWS_PER_FILE * 6
    props = [f"{k}={v}" for k, v in settings.properties().items()]
    rounds = 30
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(rounds), *props],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    done = 0
    try:
        for i in range(rounds * 4):
            if reader.poll() is not None:
                break
            if i % 3 == 0:
                clear_caches(settings)
            elif i % 3 == 1:
                invalidate_table(settings, "shop.events", f"day={DAYS[i % 3]}")
            else:
                invalidate_table(settings, "shop.events")
            done += 1
        out, err = reader.communicate(timeout=300)
    finally:
        if reader.poll() is None:
            reader.kill()
    assert reader.returncode == 0, err
    lines = out.split("\n")[:-1]
    assert len(lines) == rounds and done > 0
    assert set(lines) == {f"{n} {n * (n - 1) // 2}"}
