"""One listing of a partitioned table's location instead of one per partition
(``planner.TableRoot``, ``planner.listings_below_root``): when it is chosen, and that it
gives every directory what its own listing gives, kept as that listing would be."""

from __future__ import annotations

import itertools

import pytest

from raptorx_py.config import load_settings
from raptorx_py.datasource.planning import planner
from raptorx_py.datasource.planning.planner import (
    LISTING_THREADS,
    TableRoot,
    _list_locations,
    _Location,
)
from raptorx_py.hive.model import Column, Partition, Table
from raptorx_py.metrics import counters

#: A distinct listing-cache size per settings made here, so each test has its own cache
#: (a process keeps one listing cache per distinct size).
_cache_sizes = itertools.count(7_000_001)


def _settings(tmp_path, cached: bool = True):
    return load_settings(
        overrides={
            "hive.file-status-cache-tables": "*" if cached else "",
            "hive.file-status-cache-size": str(next(_cache_sizes)),
            "cache.base-directory": str(tmp_path / "cache"),
        },
        env={},
        cwd=tmp_path,
    )


def _table(tmp_path, partitions: int, sealed: bool = True) -> tuple[str, list[_Location]]:
    root = tmp_path / "t"
    locations = []
    for i in range(partitions):
        directory = root / f"m={i:03d}"
        directory.mkdir(parents=True)
        (directory / "part-0.parquet").write_bytes(b"x" * (i + 1))
        (directory / "_SUCCESS").write_bytes(b"")
        parameters = {"sealed": "true"} if sealed else {}
        locations.append(_Location(f"file://{directory}", (i,), parameters, i))
    return f"file://{root}", locations


def test_the_root_is_listed_when_that_takes_fewer_round_trips():
    root = TableRoot("s3://b/t", 3 * 84)
    assert not root.lists_root_instead(LISTING_THREADS)  # one round of listings anyway
    assert root.lists_root_instead(LISTING_THREADS + 1)  # two rounds against one page
    big = TableRoot("s3://b/t", 5_000)  # five pages, one after another
    assert not big.lists_root_instead(5 * LISTING_THREADS)
    assert big.lists_root_instead(5 * LISTING_THREADS + 1)
    assert not TableRoot("s3://b/t", None).lists_root_instead(10_000)  # size unknown


def test_the_roots_size_comes_from_every_partitions_file_count():
    def partition(files: str | None) -> Partition:
        parameters = {} if files is None else {"numFiles": files}
        return Partition(("1",), "s3://b/t/k=1", parameters)

    table = type("T", (), {"location": "s3://b/t"})()
    assert TableRoot.of(table, [partition("3"), partition("1")]) == TableRoot("s3://b/t", 10)
    assert TableRoot.of(table, [partition("3"), partition(None)]).objects is None
    assert TableRoot.of(table, [partition("x")]).objects is None
    root = TableRoot("s3://b/t", 1)
    assert root.holds("s3://b/t/k=1") and root.holds("s3://b/t/k=1/j=2")
    assert not root.holds("s3://b/t2/k=1") and not root.holds("s3a://b/t/k=1")


@pytest.mark.parametrize("cached", [True, False], ids=["listing cache", "no listing cache"])
def test_one_listing_of_the_root_lists_what_each_partitions_own_listing_does(tmp_path, cached):
    url, locations = _table(tmp_path, LISTING_THREADS + 4)
    outside = tmp_path / "elsewhere" / "m=x"
    outside.mkdir(parents=True)
    (outside / "part-0.parquet").write_bytes(b"z")
    locations.append(_Location(f"file://{outside}", ("x",), {"sealed": "true"}, 99))
    root = TableRoot(url, 3 * len(locations))

    with counters.scope() as each:
        expected = _list_locations(_settings(tmp_path, cached), "db.t", locations)
    assert each["storage.listings"] == len(locations) and each["planner.root_listings"] == 0
    settings = _settings(tmp_path, cached)
    with counters.scope() as c:
        listed = _list_locations(settings, "db.t", locations, root=root)
    assert listed == expected
    assert all(len(files) == 1 for _, files in listed)  # _SUCCESS is not data
    # The root once, the partition outside it on its own.
    assert c["storage.listings"] == 2 and c["planner.root_listings"] == 1, c
    assert c["planner.listings_from_root"] == len(locations) - 1
    # Kept as its own listing would have been: every sealed directory in the listing cache.
    assert c["listing_cache.stores"] == (len(locations) if cached else 0)
    with counters.scope() as again:
        assert _list_locations(settings, "db.t", locations, root=root) == expected
    assert again["storage.listings"] == (0 if cached else 2)
    assert again["listing_cache.hits"] == (len(locations) if cached else 0)


def test_unsealed_directories_listed_from_the_root_are_not_cached(tmp_path):
    url, locations = _table(tmp_path, LISTING_THREADS + 1, sealed=False)
    settings = _settings(tmp_path)
    root = TableRoot(url, 3 * len(locations))
    with counters.scope() as c:
        _list_locations(settings, "db.t", locations, root=root)
    assert c["planner.root_listings"] == 1 and c["listing_cache.stores"] == 0
    assert c["listing_cache.skipped_unsealed"] == len(locations)
    with counters.scope() as again:
        _list_locations(settings, "db.t", locations, root=root)
    assert again["planner.root_listings"] == 1 and again["listing_cache.hits"] == 0


def test_a_query_lists_its_tables_root_once(tmp_path):
    """A later scan of the query needing other partitions, even too few to list the root
    for, takes them from the root listing its first scan made; those the first scan listed
    are the query's already."""
    url, locations = _table(tmp_path, LISTING_THREADS + 4, sealed=False)
    settings = _settings(tmp_path, cached=False)
    root = TableRoot(url, 3 * len(locations))
    query = f"query-{tmp_path.name}"
    first, second = locations[: LISTING_THREADS + 1], locations[LISTING_THREADS + 1 :]
    assert not root.lists_root_instead(len(second))
    with counters.scope() as c:
        _list_locations(settings, "db.t", first, query=query, root=root)
        assert c["storage.listings"] == 1
        listed = _list_locations(settings, "db.t", second, query=query, root=root)
        assert c["storage.listings"] == 1 and c["planner.root_listings"] == 1, c
        assert listed == _list_locations(settings, "db.t", second)
        _list_locations(settings, "db.t", locations, query=query, root=root)
    assert c["planner.listings_reused_in_query"] == len(locations)


def test_the_planner_lists_a_partitioned_tables_root(tmp_path, monkeypatch):
    """``plan_scan`` gives the table's root, sized by its partitions' ``numFiles``."""
    seen = []
    real = planner._list_locations

    def spy(settings, table_name, locations, write_ids=None, query=None, root=None):
        seen.append(root)
        return real(settings, table_name, locations, write_ids, query, root)

    monkeypatch.setattr(planner, "_list_locations", spy)
    url, locations = _table(tmp_path, 3)
    partitions = [
        Partition((str(i),), loc.url, {"numFiles": "1", "sealed": "true"})
        for i, loc in enumerate(locations)
    ]
    table = Table("db", "t", "EXTERNAL_TABLE", url, (Column("x", "bigint"),), (Column("m", "int"),))
    metastore = type("M", (), {"list_partitions": lambda self, t, snapshot=None: partitions})()
    plan = planner.plan_scan(metastore, _settings(tmp_path), table, ["x"], ())
    assert len(plan.splits) == 3
    assert seen == [TableRoot(url, 3 * 3)]
