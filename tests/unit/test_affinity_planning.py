"""Soft affinity in planning and reading, without a cluster: tasks grouped by preferred
executor, the partition mark the JVM reads, and a fallback read that fills no cache."""

import pickle
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark import cloudpickle

from raptorx_py.config import load_settings
from raptorx_py.datasource.planning.planner import Split, pack_by_executor
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.datasource.reading.task_reader import count_placement_and_may_use_caches
from raptorx_py.hive.model import Column
from raptorx_py.jvm_contract import placement
from raptorx_py.jvm_contract.placement import PlacedPartition
from raptorx_py.metrics import counters
from raptorx_py.scheduling.affinity import Executor, preferred
from raptorx_py.storage.file_versions import stat_version

EXECUTORS = (Executor("127.0.0.1", "0"), Executor("127.0.0.1", "1"), Executor("10.0.0.9", "2"))


def files(n, size=10):
    return [Split(f"s3://b/t/part-{i}.parquet", size, None, None) for i in range(n)]


def test_a_task_s_splits_share_their_preferred_executor():
    splits = files(60)
    # Two pieces of one big file: both go with the file.
    big = Split("s3://b/t/big.parquet", 200, None, None)
    pieces = [
        Split(big.url, 200, None, None, (), 0, 100),
        Split(big.url, 200, None, None, (), 100, 100),
    ]
    tasks, locations = pack_by_executor(splits + pieces, EXECUTORS, max_bytes=10_000, min_count=6)
    assert len(tasks) == len(locations)
    for task, loc in zip(tasks, locations):
        assert {preferred(s.url, EXECUTORS).location for s in task} == {loc}
    assert sorted((s.url, s.offset) for t in tasks for s in t) == sorted(
        (s.url, s.offset) for s in splits + pieces
    )  # nothing lost
    # Six slots over three executors: two tasks each, every executor used.
    assert sorted(locations) == sorted(e.location for e in EXECUTORS for _ in range(2))


def stamp(data: bytes, flag: str) -> bytes:
    """What the JVM's ``Affinity.stamped`` does: overwrite the mark's flag byte."""
    start = data.index(placement.MARKER.encode()) + len(placement.MARKER)
    end = data.index(b"|", start)
    return data[: end + 1] + flag.encode() + data[end + 2 :]


def test_the_mark_is_readable_in_the_pickle_and_its_flag_can_be_stamped():
    part = PlacedPartition(tuple(files(3)), EXECUTORS[1].location)
    data = cloudpickle.dumps(part)
    start = data.index(placement.MARKER.encode()) + len(placement.MARKER)
    assert data[start : data.index(b"|", start)].decode() == "executor_127.0.0.1_1"
    assert data.index(placement.MARKER.encode()) < data.index(b"s3://b/t/part-0")
    for flag in ("P", "F"):
        back = pickle.loads(stamp(data, flag))
        assert back.ran == flag and back.location == part.location and back.value == part.value
    with pytest.raises(ValueError, match="without '|'"):
        PlacedPartition((), "executor_a|b_1")


def test_placement_is_counted_and_only_another_host_fills_no_cache():
    counters.drain()
    part = PlacedPartition((), "executor_h_1")

    def ran(flag: str):
        return pickle.loads(stamp(cloudpickle.dumps(part), flag))

    assert count_placement_and_may_use_caches(ran("P")) is True
    # On a sibling executor of the preferred host: the host's caches are the file's.
    assert count_placement_and_may_use_caches(ran("H")) is True
    assert count_placement_and_may_use_caches(ran("F")) is False
    assert count_placement_and_may_use_caches(part) is True  # unknown (no jar): read as before
    plain = SimpleNamespace(value=())
    assert count_placement_and_may_use_caches(plain) is True  # a plain partition
    got = counters.drain()
    assert got["affinity.preferred"] == 1 and got["affinity.fallback"] == 1
    assert got["affinity.preferred_host"] == 1
    assert got["affinity.preferred_host.executor_h_1"] == 1
    assert got["affinity.preferred.executor_h_1"] == 1 and got["affinity.unknown"] == 1


def test_a_bound_on_imbalance_moves_whole_files_to_their_second_choice():
    """``hive.soft-affinity.max-split-imbalance``: the tasks of an executor holding too many
    of a scan's splits are fewer, its files' pieces move together, and the moves are
    counted."""
    two = EXECUTORS[:1] + EXECUTORS[2:]  # two hosts, one executor each
    many = files(200)
    # Skewed on purpose: 30 files prefer the first executor, 11 the second.
    splits = [s for s in many if preferred(s.url, two) == two[0]][:30] + [
        s for s in many if preferred(s.url, two) == two[1]
    ][:11]
    counters.drain()
    _, unbounded = pack_by_executor(splits, two, max_bytes=10, min_count=0)
    assert "planner.affinity_second_choice" not in counters.drain()
    per = {e.location: unbounded.count(e.location) for e in two}  # one split per task
    spread = abs(per[two[0].location] - per[two[1].location])
    tasks, bounded = pack_by_executor(splits, two, max_bytes=10, min_count=0, max_imbalance=1)
    moved = counters.drain().get("planner.affinity_second_choice", 0)
    after = {e.location: bounded.count(e.location) for e in two}
    assert abs(after[two[0].location] - after[two[1].location]) <= 1
    assert spread == 19 and moved == 9 and sum(after.values()) == 41
    assert all(len(task) == 1 for task in tasks)  # one 10-byte split per task


def test_a_fallback_read_leaves_the_block_and_footer_caches_empty(tmp_path):
    path = tmp_path / "data" / "f.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"x": list(range(1000))}), path)
    st = path.stat()
    split = Split(f"file://{path}", st.st_size, stat_version(st), None)
    table = SimpleNamespace(
        partition_keys=(), columns=(Column("x", "bigint"),), qualified_name="db.t"
    )
    settings = load_settings(
        overrides={
            "cache.enabled": "true",
            "hive.parquet.metadata-cache-enabled": "true",
            "cache.base-directory": str(tmp_path / "cache"),
        }
    )

    def cached_files():
        base = tmp_path / "cache"
        return sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []

    rows = sum(
        b.num_rows for b in read_split(split, table, table.columns, (), settings, fill_caches=False)
    )
    assert rows == 1000 and not [p for p in cached_files() if p.suffix != ".db"]
    before = len(cached_files())
    rows = sum(b.num_rows for b in read_split(split, table, table.columns, (), settings))
    assert rows == 1000 and len(cached_files()) > before
