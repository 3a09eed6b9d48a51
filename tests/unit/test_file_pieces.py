"""A file bigger than a task's share of its scan is cut into byte ranges, and the readers of
the ranges read each row group exactly once: the one whose middle byte lies in their range
(Spark's and parquet-mr's rule). Planning never reads a footer for it."""

import os
import random
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.datasource.planning import planner
from raptorx_py.datasource.planning.planner import (
    Split,
    cut_each_file,
    cut_files,
    fragment_pieces,
    own_piece_bytes,
    pack_splits,
    piece_bytes,
    plan_scan,
)
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.storage.file_versions import stat_version
from raptorx_py.tables.table_registration import register_external_table

MB = 1024 * 1024


def whole(size, name="f"):
    return Split(f"file:///t/{name}", size, None, None)


def test_a_big_file_is_cut_into_ranges_that_tile_it():
    pieces = cut_files([whole(43 * MB)], piece_bytes([whole(43 * MB)], 64 * MB, 2))
    assert [(p.offset, p.length) for p in pieces] == [
        (0, 43 * MB // 2),
        (43 * MB // 2, 43 * MB // 2),
    ]
    assert all(p.size == 43 * MB and p.url == "file:///t/f" for p in pieces)
    # Two pieces on two slots: one wave of one piece each.
    assert [len(t) for t in pack_splits(pieces, 64 * MB, 2)] == [1, 1]


@pytest.mark.parametrize("seed", range(50))
def test_ranges_cover_every_byte_once(seed):
    rng = random.Random(seed)
    files = [whole(rng.randint(0, 200 * MB), f"f{i}") for i in range(rng.randint(1, 6))]
    slots, max_bytes = rng.randint(1, 8), rng.choice((16 * MB, 64 * MB))
    piece = piece_bytes(files, max_bytes, slots)
    assert piece_in_bounds(piece, max_bytes)
    pieces = cut_files(files, piece)
    for f in files:
        mine = [p for p in pieces if p.url == f.url]
        if len(mine) == 1:
            assert mine[0] == f and f.size <= piece * planner.PIECE_SLOP
            continue
        assert [p.offset for p in mine] == [
            sum(p.length for p in mine[:i]) for i in range(len(mine))
        ]
        assert sum(p.length for p in mine) == f.size
        assert max(p.length for p in mine) <= piece


def piece_in_bounds(piece, max_bytes):
    return piece >= planner.MIN_PIECE_BYTES and (
        piece <= max_bytes or piece == planner.MIN_PIECE_BYTES
    )


def test_small_files_and_a_file_near_the_piece_size_stay_whole():
    files = [whole(MB, "a"), whole(int(4.3 * MB), "b")]
    assert cut_files(files, 4 * MB) == files
    assert piece_bytes(files, 64 * MB, 8) == planner.MIN_PIECE_BYTES


def test_with_fragments_each_file_is_cut_by_its_own_size():
    """The fragment cache's rule: a one-file table fills the slots as Spark's reader does
    (TPC-H's 6.7 MB ``part``: two pieces on two slots), small files stay whole, a big file's
    pieces stop at the fixed size, and no file's cut depends on the others."""
    part, tiny, big = whole(int(6.7 * MB), "part"), whole(MB, "tiny"), whole(300 * MB, "big")
    pieces = cut_each_file([part, tiny, big], 64 * MB, 2)
    by_file = {u: [p for p in pieces if p.url == u] for u in (part.url, tiny.url, big.url)}
    assert len(by_file[part.url]) == 2
    assert by_file[tiny.url] == [tiny]
    assert max(p.length for p in by_file[big.url]) <= 32 * MB
    assert cut_each_file([part], 64 * MB, 2) == by_file[part.url]
    assert own_piece_bytes(int(6.7 * MB), 64 * MB, 2) == planner.MIN_PIECE_BYTES
    assert own_piece_bytes(43 * MB, 64 * MB, 2) == -(-43 * MB // 2)
    assert [len(t) for t in pack_splits(by_file[part.url], 64 * MB, 2)] == [1, 1]


def test_under_the_fragment_cache_only_a_table_of_few_files_is_cut_by_file_size():
    """An unpartitioned table of fewer files than slots is cut per file (the 6.7 MB one-file
    ``part``: two pieces); a partitioned table's files, and a table of as many files as
    slots, are cut at the fixed size only: TPC-H SF 10's 4-8 MB ``lineitem`` and ``orders``
    files stay whole (a one-row-group file cut in two would add an empty piece)."""
    unpartitioned = SimpleNamespace(is_partitioned=False)
    partitioned = SimpleNamespace(is_partitioned=True)
    part = whole(int(6.7 * MB), "part")
    assert len(fragment_pieces(unpartitioned, [part], 64 * MB, 2)) == 2
    orders = [whole(int(8.4 * MB), f"o{i}") for i in range(3)]
    assert fragment_pieces(partitioned, orders, 64 * MB, 2) == orders
    assert fragment_pieces(partitioned, orders[:1], 64 * MB, 2) == orders[:1]
    assert fragment_pieces(unpartitioned, orders[:2], 64 * MB, 2) == orders[:2]
    big = whole(300 * MB, "big")
    assert fragment_pieces(partitioned, [big], 64 * MB, 2) == cut_files([big], 32 * MB)


@pytest.fixture
def many_row_groups(tmp_path):
    """A file of 20 row groups of 50 rows (ids 0..999), with a dictionary-encoded column."""
    path = tmp_path / "t" / "part-0.parquet"
    os.makedirs(path.parent)
    pq.write_table(
        pa.table(
            {
                "id": pa.array(range(1000), pa.int64()),
                "tag": pa.array([f"t{i % 7}" for i in range(1000)]),
            }
        ),
        path,
        row_group_size=50,
    )
    assert pq.ParquetFile(path).metadata.num_row_groups == 20
    return path


def read_ids(split, table, settings):
    return [
        i
        for b in read_split(split, table, table.columns, (), settings)
        for i in b.column("id").to_pylist()
    ]


@pytest.mark.parametrize("seed", range(20))
def test_the_readers_of_the_ranges_read_every_row_once(env, many_row_groups, seed):
    db = env.unique_db("pieces")
    settings = env.settings()
    with env.metastore() as ms:
        register_external_table(ms, settings, f"{db}.t", str(many_row_groups.parent))
        table = ms.get_table(db, "t")
    size = many_row_groups.stat().st_size
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, size), rng.randint(1, 12)))
    bounds = [0, *cuts, size]
    f = Split(many_row_groups.as_uri(), size, stat_version(many_row_groups.stat()), None)
    parts = [
        read_ids(Split(f.url, size, f.version, None, (), a, b - a), table, settings)
        for a, b in zip(bounds, bounds[1:])
    ]
    assert sorted(i for p in parts for i in p) == list(range(1000))
    assert all(p == sorted(p) for p in parts)  # whole row groups, in file order


def test_a_planned_scan_cuts_one_big_file_for_two_slots(env, many_row_groups, monkeypatch):
    monkeypatch.setattr(planner, "MIN_PIECE_BYTES", 1)
    db = env.unique_db("pieces")
    settings = env.settings(**{"hive.min-split-count": "2"})
    with env.metastore() as ms:
        register_external_table(ms, settings, f"{db}.t", str(many_row_groups.parent))
        table = ms.get_table(db, "t")
        plan = plan_scan(ms, settings, table, table.columns, [])
    assert [len(t) for t in plan.tasks] == [1, 1]
    (a,), (b,) = plan.tasks
    assert (a.offset, b.offset + b.length) == (0, many_row_groups.stat().st_size)
    first, second = read_ids(a, table, settings), read_ids(b, table, settings)
    assert first and second and sorted(first + second) == list(range(1000))
