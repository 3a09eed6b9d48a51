"""A file's identity that a restored mtime cannot fool (Spark-free).

An unsealed external file rewritten with the same size and its mtime put back (``cp -p``,
``rsync -t``, ``tar -x``, ``os.utime`` all do this) must be read in its new version by every
tier: the block cache, the footer cache and the fragment result cache, each on its own and
all together; and a file changed that way between planning and reading must fail the read
(``FileChangedError``) rather than be read, or cached, as the listed version. The same
through Spark: ``tests/integration/test_file_identity.py``.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cache.block_cache import block_cache_for
from raptorx_py.cache.footer_cache import FileIdentity, footer_cache_for
from raptorx_py.cache.fragment_cache import fragment_cache_for
from raptorx_py.config import TIERS_OFF, load_settings
from raptorx_py.datasource.planning.fragment_keys import fragment_key
from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.errors import FileChangedError
from raptorx_py.hive.column_types import arrow_schema_for_spark
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.predicates import Comparison
from raptorx_py.storage.file_versions import (
    current_identity,
    etag_of,
    info_version,
    is_another_version,
    stat_version,
)
from raptorx_py.storage.fs import local_fs
from raptorx_py.tables.table_registration import register_external_table
from tests.support.counter_deltas import CounterDeltas

ROWS = 200
#: The old file holds ids 1..ROWS, the new one ids above this bound: ``id > BOUND`` is
#: nothing in the old version and every row in the new one.
BOUND = 500
TIERS = {
    "block": {"cache.enabled": "true"},
    "footer": {"hive.parquet.metadata-cache-enabled": "true"},
    "fragment": {"fragment-result-cache.enabled": "true"},
}
TIERS["all"] = {k: v for tier in TIERS.values() for k, v in tier.items()}


def write_ids(path: str, first: int) -> None:
    """ids ``first..first+ROWS-1``, uncompressed and plain, so every such file has one size."""
    pq.write_table(
        pa.table({"id": pa.array(range(first, first + ROWS), pa.int64())}),
        path,
        compression="none",
        use_dictionary=False,
    )


def rewrite_keeping_mtime(path: str, first: int, *, in_place: bool) -> None:
    """Rewrite ``path`` with ids from ``first``, then put its mtime back, as ``cp -p`` (in
    place: the same inode) or ``rsync -t`` / ``tar -x`` (a new file renamed over it) do.
    Returns once the file's change time differs from before (the kernel's clock ticks
    coarsely: a rewrite within the tick of the last change is the documented limit)."""
    before = os.stat(path)
    if in_place:
        write_ids(path, first)
    else:
        write_ids(path + ".tmp", first)
        os.replace(path + ".tmp", path)
    times = (before.st_atime_ns, before.st_mtime_ns)
    os.utime(path, ns=times)
    while os.stat(path).st_ctime_ns == before.st_ctime_ns:
        os.utime(path, ns=times)  # each call sets the change time to now
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def make_table(tmp_path, tiers: dict):
    root = tmp_path / "t" / "k=1"
    root.mkdir(parents=True)
    path = str(root / "part-0.parquet")
    write_ids(path, 1)
    settings = load_settings(
        overrides={
            "hive.metastore.url": f"sqlite:///{tmp_path}/ms.db",
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
            "cache.base-directory": str(tmp_path / "cache"),
            "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
            **TIERS_OFF,  # each test turns on the tiers it is about
            **tiers,
        },
        env={},
        cwd=tmp_path,
    )
    ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"))
    table = register_external_table(ms, settings, "db.t", f"file://{tmp_path}/t")
    return settings, ms, table, path


def read(settings, ms, table, plan=None) -> list[int]:
    """``SELECT id FROM db.t WHERE id > BOUND`` through the tiers ``settings`` turn on; the
    fragment cache as the reader uses it (``TaskReader._split_result``): its key, then get or
    compute and put."""
    plan = plan or plan_scan(ms, settings, table, table.columns, [Comparison(">", "id", BOUND)])
    fragments = fragment_cache_for(settings.fragment_cache)
    schema = arrow_schema_for_spark(plan.columns)
    ids: list[int] = []
    for split in plan.splits:
        key = None
        if fragments is not None:
            key = fragment_key(plan.table, split, plan.columns, plan.data_predicates, None, schema)
        batches = fragments.get(key) if key is not None and fragments is not None else None
        if batches is None:
            batches = list(
                read_split(split, plan.table, plan.columns, plan.data_predicates, settings)
            )
            if key is not None and fragments is not None:
                fragments.put(key, schema, batches)
        for b in batches:
            ids += b.column("id").to_pylist()
    return sorted(ids)


def plan_of(settings, ms, table):
    return plan_scan(ms, settings, table, table.columns, [Comparison(">", "id", BOUND)])


@pytest.mark.parametrize("in_place", [True, False], ids=["cp-p", "rsync-t"])
@pytest.mark.parametrize("tier", sorted(TIERS))
def test_a_rewrite_with_its_mtime_put_back_is_read_in_its_new_version(tmp_path, tier, in_place):
    settings, ms, table, path = make_table(tmp_path, TIERS[tier])
    assert read(settings, ms, table) == []  # the old version: nothing above BOUND
    assert read(settings, ms, table) == []  # and again, from the tier
    rewrite_keeping_mtime(path, BOUND + 1, in_place=in_place)
    assert read(settings, ms, table) == list(range(BOUND + 1, BOUND + 1 + ROWS))


@pytest.mark.parametrize("tier", ["block", "footer"])
def test_a_rewrite_between_planning_and_reading_fails_the_read(tmp_path, tier):
    """The read-time check (the block cache after a fetch, the opener before it trusts a
    cached footer) sees the change a restored mtime hides, and caches nothing of it."""
    settings, ms, table, path = make_table(tmp_path, TIERS[tier])
    # No predicate: with one, the (trusted) statistics would prune the file at planning, or
    # drop the predicate and have the reader's own listed-version check fail the read first.
    plan = plan_scan(ms, settings, table, table.columns, [])
    rewrite_keeping_mtime(path, BOUND + 1, in_place=True)
    with pytest.raises(FileChangedError, match=r"part-0\.parquet.*changed after it was listed"):
        read(settings, ms, table, plan)
    # Planned again, the new version reads whole (nothing of the refused read was kept).
    assert read(settings, ms, table) == list(range(BOUND + 1, BOUND + 1 + ROWS))


def test_an_unchanged_file_is_served_by_every_tier(tmp_path):
    """The stronger identity is stable while the file is: a second read is all hits."""
    settings, ms, table, _ = make_table(tmp_path, TIERS["all"])
    plan = plan_scan(ms, settings, table, table.columns, [])
    read(settings, ms, table, plan)
    with CounterDeltas() as c:
        assert read(settings, ms, table, plan_scan(ms, settings, table, table.columns, [])) == list(
            range(1, ROWS + 1)
        )
    assert c["fragment_cache.hits"] == 1 and c["fragment_cache.misses"] == 0


STAT_FIELDS = ("st_ino", "st_ctime_ns", "st_mtime_ns")


def test_a_version_leaves_the_device_number_out():
    """A shared filesystem's device number is each client's own: the version the driver
    lists must be the one an executor's ``stat`` of the same file gives."""
    st = os.stat(__file__)
    here = SimpleNamespace(st_dev=st.st_dev, **{f: getattr(st, f) for f in STAT_FIELDS})
    there = SimpleNamespace(st_dev=st.st_dev + 1, **{f: getattr(st, f) for f in STAT_FIELDS})
    assert stat_version(here) == stat_version(there) == stat_version(st)


def test_entries_under_the_mtime_only_spelling_are_counted_misses(tmp_path):
    """Entries written before (a local file's version was the bare ``repr`` of its mtime)
    are never found under the new versions: counted misses, the file read again."""
    settings, ms, table, path = make_table(tmp_path, TIERS["all"])
    split = plan_scan(ms, settings, table, table.columns, []).splits[0]
    old = repr(os.stat(path).st_mtime)
    assert split.version is not None and split.version != old
    footers = footer_cache_for(settings.footer_cache)
    assert footers is not None
    footers.get_or_load(FileIdentity(split.url, split.size, old), lambda: pq.read_metadata(path))
    blocks = block_cache_for(settings.block_cache, local_fs())
    with blocks.open(path, "rb", size=split.size, version=old) as f:
        f.read()
    footers.clear_memory()
    with CounterDeltas() as c:
        assert read(settings, ms, table, plan_scan(ms, settings, table, table.columns, [])) == (
            list(range(1, ROWS + 1))
        )
    assert c["footer_cache.misses"] == 1 and c["footer_cache.hits_disk"] == 0
    # The file's one block is fetched again (then served from the cache within the read).
    assert c["block_cache.misses"] == 1 and c["block_cache.bytes_from_remote"] == split.size


def test_a_sealed_file_rewritten_with_its_mtime_put_back_is_never_a_torn_read(tmp_path):
    """A sealed partition's cached listing keeps each file's version (the listing cache
    carries the identity): after a same-size rewrite with the mtime put back and a partial
    eviction of its blocks, a plan from the cached listing must not fill the missing blocks
    with the new version's bytes beside the old ones (what an mtime-only version let
    through): ``FileChangedError``, and the old version's blocks are dropped."""
    settings, ms, table, path = make_table(
        tmp_path,
        {**TIERS["block"], "cache.block-size": "512B", "hive.file-status-cache-tables": "*"},
    )
    ms.set_partition_parameters(table, ("1",), {"sealed": "true"})
    everything = lambda: plan_scan(ms, settings, table, table.columns, [])  # noqa: E731
    assert read(settings, ms, table, everything()) == list(range(1, ROWS + 1))
    blocks = block_cache_for(settings.block_cache, local_fs())
    blocks.store.evict_to(blocks.store.total_bytes() // 2)
    assert blocks.store.entries()  # some blocks of the old version stay
    rewrite_keeping_mtime(path, BOUND + 1, in_place=True)
    with CounterDeltas() as c, pytest.raises(FileChangedError, match="changed after it was listed"):
        read(settings, ms, table, everything())
    assert c["listing_cache.hits"] == 1 and c["block_cache.version_mismatches"] == 1
    assert blocks.store.entries() == {}


def test_each_store_s_version_and_how_versions_compare(tmp_path):
    """The one rule (``storage.file_versions``), per kind of store."""
    import datetime as dt

    f = tmp_path / "f.bin"
    f.write_bytes(b"abc")
    assert current_identity(local_fs(), str(f)) == (3, stat_version(os.stat(f)))
    s3_info = {"name": "b/k", "size": 3, "ETag": '"e1"', "LastModified": dt.datetime.now()}
    assert info_version(s3_info) == "etag:e1" and etag_of(info_version(s3_info)) == "e1"
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert info_version({"LastModified": when}) == f"mtime:{when.timestamp()!r}"
    assert info_version({"size": 3}) is None
    local = stat_version(os.stat(f))
    assert not is_another_version(local, local)
    assert is_another_version(local, local.replace("posix:", "posix:9"))
    assert is_another_version("etag:e1", "etag:e2") and not is_another_version("etag:e1", "etag:e1")
    # Of different kinds, unknown, or a caller's own label: nothing said.
    assert not is_another_version("etag:e1", local)
    assert not is_another_version(local, None)
    assert not is_another_version("v1", "v2") and etag_of("v1") is None
