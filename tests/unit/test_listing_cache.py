import random
import threading
from concurrent.futures import ThreadPoolExecutor

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cache.listing_cache import (
    ListingCache,
    is_sealed,
    listing_cache_for,
    partition_version,
    table_matches,
)
from raptorx_py.cli import main
from raptorx_py.config import load_settings
from raptorx_py.config.loader import with_overrides
from raptorx_py.metastore import open_metastore
from raptorx_py.storage.hive_layout import list_data_files
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock


class Lister:
    """Lists a fake directory: ``n`` file names under ``location``."""

    def __init__(self, location, n=2, during=None):
        self.location, self.n, self.during, self.calls = location, n, during, 0

    def __call__(self):
        self.calls += 1
        if self.during:
            self.during()
        return [f"{self.location}/f{i}.parquet" for i in range(self.n)]


SEALED = {"sealed": "true", "transient_lastDdlTime": "100"}


def cache(**kw):
    return ListingCache(
        kw.pop("patterns", "*"),
        max_files=kw.pop("max_files", 1000),
        expire_seconds=kw.pop("expire_seconds", 3600),
        **kw,
    )


def get(c, location, lister, params=SEALED, table="db.t", **kw):
    return c.get_or_list(
        table, location, partition_version(location, params), is_sealed(params), lister, **kw
    )


@pytest.mark.parametrize(
    "patterns, table, expected",
    [
        ("*", "tpch.lineitem", True),
        ("tpch.*", "tpch.lineitem", True),
        ("tpch.*", "tpch2.lineitem", False),
        ("TPCH.LineItem", "tpch.lineitem", True),
        ("db.table", "DB.Table", True),
        ("db.table", "db.table2", False),
        ("sales.*, tpch.lineitem", "tpch.lineitem", True),
        ("sales.*, tpch.lineitem", "tpch.orders", False),
        (" , ", "tpch.orders", False),
        ("", "tpch.orders", False),
        (["db.?"], "db.x", True),
    ],
)
def test_table_patterns(patterns, table, expected):
    assert table_matches(patterns, table) is expected


def test_ineligible_table_is_listed_every_time_and_not_counted():
    c, lister, n = cache(patterns="tpch.*"), Lister("s3://b/t/p=1"), CounterDeltas()
    for _ in range(2):
        assert len(get(c, lister.location, lister, table="sales.t")) == 2
    assert lister.calls == 2 and len(c) == 0
    assert all(n[k] == 0 for k in ("listing_cache.misses", "listing_cache.skipped_unsealed"))


def test_sealed_partition_hits_open_partition_is_listed_every_time():
    c, n = cache(), CounterDeltas()
    sealed, open_ = Lister("s3://b/t/p=1"), Lister("s3://b/t/p=2")
    for _ in range(3):
        assert get(c, sealed.location, sealed) == (
            "s3://b/t/p=1/f0.parquet",
            "s3://b/t/p=1/f1.parquet",
        )
        get(c, open_.location, open_, params={"transient_lastDdlTime": "100"})
    assert (sealed.calls, open_.calls) == (1, 3)
    assert (
        n["listing_cache.misses"],
        n["listing_cache.hits"],
        n["listing_cache.stores"],
        n["listing_cache.skipped_unsealed"],
    ) == (1, 2, 1, 3)
    assert len(c) == 1 and c.file_count == 2


def test_unseal_and_alter_change_the_version():
    c, lister, n = cache(), Lister("s3://b/t/p=1"), CounterDeltas()
    get(c, lister.location, lister)
    get(c, lister.location, lister)
    assert lister.calls == 1
    get(c, lister.location, lister, params={"transient_lastDdlTime": "100"})  # un-sealed
    assert lister.calls == 2 and len(c) == 0  # the sealed listing is dropped too
    get(c, lister.location, lister)  # sealed again: listed afresh
    assert lister.calls == 3
    altered = {**SEALED, "transient_lastDdlTime": "200"}
    get(c, lister.location, lister, params=altered)
    get(c, lister.location, lister, params=altered)
    assert lister.calls == 4 and n["listing_cache.hits"] == 2
    # A partition moved to another location is another key altogether.
    assert partition_version("s3://b/t/p=1", SEALED) != partition_version("s3://b/x/p=1", SEALED)


def test_managed_table_version_is_the_write_id_state():
    c, lister = cache(), Lister("s3://b/m/p=1")
    for version in ("tbl:5:", "tbl:5:", "tbl:6:", "tbl:6:"):
        c.get_or_list("db.m", lister.location, version, True, lister)
    assert lister.calls == 2


def test_explicit_invalidation():
    c, n = cache(), CounterDeltas()
    a, b, other = Lister("s3://b/t/p=1"), Lister("s3://b/t/p=2"), Lister("s3://b/u/p=1")
    for lister in (a, b):
        get(c, lister.location, lister)
    get(c, other.location, other, table="db.u")
    assert c.invalidate("s3://b/t/p=1/") == 1  # trailing slash: the same location
    get(c, a.location, a)
    assert a.calls == 2
    assert c.invalidate_table("DB.T") == 2
    get(c, b.location, b)
    get(c, other.location, other, table="db.u")
    assert (b.calls, other.calls) == (2, 1)
    c.clear()
    assert len(c) == 0 and c.file_count == 0
    assert n["listing_cache.invalidations"] == 3


@pytest.mark.parametrize("how", ["location", "table", "clear"])
def test_listing_invalidated_while_built_is_never_stored(how):
    c, n = cache(), CounterDeltas()
    location = "s3://b/t/p=1"
    invalidate = {
        "location": lambda: c.invalidate(location),
        "table": lambda: c.invalidate_table("db.t"),
        "clear": c.clear,
    }[how]
    racing = Lister(location, during=invalidate)
    assert len(get(c, location, racing)) == 2  # the caller still gets its listing
    assert len(c) == 0 and n["listing_cache.discarded_stale"] == 1
    plain = Lister(location)
    get(c, location, plain)
    get(c, location, plain)
    assert plain.calls == 1  # later listings are stored as usual
    assert not c._invalidated_locations and not c._invalidated_tables  # stamps pruned


def test_invalidating_another_location_does_not_discard():
    c = cache()
    racing = Lister("s3://b/t/p=1", during=lambda: c.invalidate("s3://b/t/p=2"))
    get(c, racing.location, racing)
    assert len(c) == 1


def test_failed_listing_is_not_stored_and_leaves_no_state():
    c = cache()

    def broken():
        raise OSError("endpoint unreachable")

    with pytest.raises(OSError):
        get(c, "s3://b/t/p=1", broken)
    assert len(c) == 0 and not c._in_flight


def test_filtered_view_never_replaces_the_whole_listing():
    c, lister = cache(), Lister("s3://b/t/p=1", n=4)
    part = get(c, lister.location, lister, where=lambda f: f.endswith(("f1.parquet", "f3.parquet")))
    assert part == ("s3://b/t/p=1/f1.parquet", "s3://b/t/p=1/f3.parquet")
    assert len(get(c, lister.location, lister)) == 4 and lister.calls == 1
    only0 = get(c, lister.location, lister, where=lambda f: f.endswith("f0.parquet"))
    assert only0 == ("s3://b/t/p=1/f0.parquet",) and lister.calls == 1


def test_size_bound_is_lru_by_file_entries():
    c, n = cache(max_files=5), CounterDeltas()
    a, b, d = (Lister(f"s3://b/t/p={i}") for i in range(3))
    get(c, a.location, a)
    get(c, b.location, b)
    get(c, a.location, a)  # a is now more recent than b
    get(c, d.location, d)  # 6 entries > 5: b goes
    assert c.file_count == 4 and n["listing_cache.evictions"] == 1
    get(c, a.location, a)
    get(c, b.location, b)
    assert (a.calls, b.calls, d.calls) == (1, 2, 1)
    huge = Lister("s3://b/t/p=9", n=6)
    get(c, huge.location, huge)
    assert huge.location not in c._entries and c.file_count <= 5
    empties = [Lister(f"s3://b/t/e={i}", n=0) for i in range(10)]
    for e in empties:
        get(c, e.location, e)
    assert len(c) == 5  # an empty listing counts as one entry


def test_expiry_counts_from_when_the_listing_was_stored():
    clock, lister = FakeClock(0.0), Lister("s3://b/t/p=1")
    c = cache(expire_seconds=100, clock=clock)
    get(c, lister.location, lister)
    clock.now = 99
    get(c, lister.location, lister)
    assert lister.calls == 1
    clock.now = 100  # hits do not extend the listing's life
    get(c, lister.location, lister)
    assert lister.calls == 2
    clock.now = 150
    get(c, lister.location, lister)
    assert lister.calls == 2


def test_cached_serves_what_get_or_list_would_hit_and_never_lists():
    clock, lister, n = FakeClock(0.0), Lister("s3://b/t/p=1"), CounterDeltas()
    c = cache(patterns="db.*", expire_seconds=100, clock=clock)
    version = partition_version(lister.location, SEALED)
    assert c.cached("db.t", lister.location, version, True) is None  # nothing yet
    assert (n["listing_cache.misses"], len(c)) == (0, 0)  # and nothing counted or stored
    listed = get(c, lister.location, lister)
    assert c.cached("DB.T", lister.location + "/", version, True) == listed  # as get_or_list
    assert n["listing_cache.hits"] == 1 and lister.calls == 1
    assert c.cached("db.t", lister.location, version, False) is None  # un-sealed: get lists
    assert c.cached("sales.t", lister.location, version, True) is None  # not eligible
    assert c.cached("db.t", lister.location, "another version", True) is None
    clock.now = 100
    assert c.cached("db.t", lister.location, version, True) is None  # expired
    assert len(c) == 1 and n["listing_cache.hits"] == 1  # misses leave the entry to get_or_list
    get(c, lister.location, lister)
    assert lister.calls == 2 and n["listing_cache.evictions"] == 1


def test_thread_safety_under_concurrent_lists_and_invalidations():
    rng = random.Random(7)
    c, n = cache(max_files=40), CounterDeltas()
    locations = [f"s3://b/t/p={i}" for i in range(30)]
    calls = [(rng.choice(locations), rng.random() < 0.1) for _ in range(600)]
    barrier = threading.Barrier(4)

    def work(chunk):
        barrier.wait()
        for location, invalidate in chunk:
            if invalidate:
                c.invalidate(location)
            files = get(c, location, Lister(location, n=3))
            assert files == tuple(f"{location}/f{i}.parquet" for i in range(3))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, [calls[i::4] for i in range(4)]))
    assert n["listing_cache.hits"] + n["listing_cache.misses"] == len(calls)
    assert c.file_count == sum(e.weight for e in c._entries.values()) <= 40
    assert not c._in_flight and not c._invalidated_locations


def test_listing_cache_for_settings(tmp_path):
    def settings(**props):
        return load_settings(overrides=props, env={}, cwd=tmp_path)

    assert listing_cache_for(settings().listing_cache) is not None  # every table's, by default
    assert (
        listing_cache_for(settings(**{"hive.file-status-cache-tables": ""}).listing_cache) is None
    )
    s = settings(
        **{
            "hive.file-status-cache-tables": "tpch.*, sales.events",
            "hive.file-status-cache-size": "500",
            "hive.file-status-cache-expire-time": "1h",
        }
    )
    c = listing_cache_for(s.listing_cache)
    assert c is listing_cache_for(s.listing_cache)
    assert (c.patterns, c.max_files, c.expire_seconds) == (("tpch.*", "sales.events"), 500, 3600)
    assert c.eligible("tpch.lineitem") and not c.eligible("tpch2.lineitem")
    assert (
        listing_cache_for(with_overrides(s, {"hive.file-status-cache-size": "10"}).listing_cache)
        is not c
    )


# -- sealing through the CLI, against a real SQLite metastore ---------------------------------
@pytest.fixture
def registered(tmp_path):
    root = tmp_path / "sales"
    for m in ("2024-01", "2024-02"):
        (root / f"m={m}").mkdir(parents=True)
        pq.write_table(
            pa.table({"id": pa.array([1, 2], pa.int64())}), root / f"m={m}" / "part-0.parquet"
        )
    url = f"sqlite:///{tmp_path / 'metastore.db'}"
    args = ["-p", f"hive.metastore.url={url}"]
    assert main(["table", "register", "db.sales", f"file://{root}", *args]) == 0
    settings = load_settings(overrides={"hive.metastore.url": url}, env={}, cwd=tmp_path)
    return args, settings


def partitions(settings):
    with open_metastore(settings.metastore_connection) as ms:
        table = ms.get_table("db", "sales")
        return {p.values[0]: p for p in ms.list_partitions(table)}


def test_cli_seal_and_unseal(registered, capsys):
    args, settings = registered
    assert main(["partition", "seal", "db.sales", "m=2024-01", *args]) == 0
    assert "sealed db.sales partition m=2024-01" in capsys.readouterr().out
    parts = partitions(settings)
    assert is_sealed(parts["2024-01"].parameters) and not is_sealed(parts["2024-02"].parameters)
    sealed_version = partition_version(parts["2024-01"].location, parts["2024-01"].parameters)
    assert main(["partition", "seal", "db.sales", "m=2024-01", *args]) == 0  # idempotent
    assert main(["partition", "unseal", "db.sales", "m=2024-01", *args]) == 0
    p = partitions(settings)["2024-01"]
    assert "sealed" not in p.parameters and "numRows" in p.parameters  # others kept
    assert partition_version(p.location, p.parameters) != sealed_version


def test_cli_seal_errors_name_what_was_wrong(registered, capsys):
    args, _ = registered
    assert main(["partition", "seal", "db.sales", "m=2030-01", *args]) == 2
    err = capsys.readouterr().err
    assert "partition 'db.sales/m=2030-01' does not exist" in err and "m=2024-01" in err
    assert main(["partition", "seal", "db.sales", "x=1", *args]) == 2
    assert "partitioned by ['m']" in capsys.readouterr().err
    assert main(["partition", "unseal", "db.sales", "m", *args]) == 2
    assert "k1=v1/k2=v2" in capsys.readouterr().err


def test_sealing_drives_the_listing_cache_end_to_end(registered):
    args, settings = registered
    fs = fsspec.filesystem("file")
    c, n = cache(patterns="db.*"), CounterDeltas()

    def plan():
        for p in partitions(settings).values():
            path = p.location.removeprefix("file://")
            files = c.get_or_list(
                "db.sales",
                p.location,
                partition_version(p.location, p.parameters),
                is_sealed(p.parameters),
                lambda path=path: list_data_files(fs, path),
            )
            assert [f.path.rsplit("/", 1)[-1] for f in files] == ["part-0.parquet"]

    plan()
    assert n["listing_cache.skipped_unsealed"] == 2
    main(["partition", "seal", "db.sales", "m=2024-02", *args])
    plan()
    plan()
    assert (n["listing_cache.stores"], n["listing_cache.hits"]) == (1, 1)
    main(["partition", "unseal", "db.sales", "m=2024-02", *args])
    plan()
    assert n["listing_cache.skipped_unsealed"] == 2 + 1 + 1 + 2 and len(c) == 0
