"""Caches that heal themselves, Spark-free, with real files and
real processes:

- a process holding a cache's index open survives another process clearing it or
  truncating every file of it, the directory then made read-only (a read-only bind mount,
  which binds root too): its next read is a counted miss, never SIGBUS, and once the
  directory is writable again the tier stores and serves;
- a damaged index or secret of every tier (block, fragment, footer, the invalidation
  journal, the metrics sink) is set aside and rebuilt, counted, and what remains is right;
  ``raptorx cache clear`` leaves every tier working and empty.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from raptorx_py import cache_invalidations as journal
from raptorx_py.cache import cache_files
from raptorx_py.cache.block_store import INDEX_FILE, BlockStore
from raptorx_py.cache.footer_cache import FileIdentity, FooterCache
from raptorx_py.cache.fragment_cache import FragmentCache, entry_path
from raptorx_py.cache_management import clear_caches
from raptorx_py.metrics import MetricsSink
from raptorx_py.sqlite_wal import DAMAGED_SUFFIX
from tests.support.counter_deltas import CounterDeltas
from tests.unit.test_cache_management import tier_settings

SCHEMA = pa.schema([pa.field("x", pa.int64())])


def result(n: int) -> list[pa.RecordBatch]:
    return [pa.record_batch([pa.array(range(n), pa.int64())], SCHEMA)]


def fragments(directory, **kw) -> FragmentCache:
    args = dict(max_bytes=2**30, max_entries=1000, max_entry_bytes=2**26, ttl=None)
    return FragmentCache(str(directory), **{**args, **kw})


def scribble(path, seed: int, length: int = 4096) -> None:
    """Random bytes over the start of ``path`` (in place: same inode), as a disk or a stray
    writer would leave it."""
    rng = random.Random(seed)
    with open(path, "r+b") as f:
        f.write(rng.randbytes(length))


# --- 1. a mapping held while another process clears or truncates ---------------------------

HOLDER = textwrap.dedent(
    """
    import json, sys
    import pyarrow as pa
    from raptorx_py.cache.block_store import BlockStore
    from raptorx_py.cache.fragment_cache import FragmentCache
    from raptorx_py.metrics import counters

    tier, directory = sys.argv[1], sys.argv[2]
    schema = pa.schema([pa.field("x", pa.int64())])
    def batch(n):
        return [pa.record_batch([pa.array(range(n), pa.int64())], schema)]
    if tier == "fragment":
        cache = FragmentCache(directory, max_bytes=2**30, max_entries=1000,
                              max_entry_bytes=2**26, ttl=None)
        for i in range(200):  # enough rows for the index to span many pages
            assert cache.put(i.to_bytes(8, "big"), schema, batch(10))
        def get(i):
            got = cache.get(i.to_bytes(8, "big"))
            return None if got is None else pa.Table.from_batches(got).num_rows
        def put(i):
            return cache.put(i.to_bytes(8, "big"), schema, batch(10))
    else:
        cache = BlockStore(directory, max_size=2**30)
        for i in range(200):
            assert cache.put("ab" * 8, i, bytes([i]) * 64)
        def get(i):
            got = cache.read("ab" * 8, i, 64, 0, 64)
            return None if got is None else len(got)
        def put(i):
            return cache.put("ab" * 8, i, bytes([i % 256]) * 64)
    print("filled", flush=True)
    sys.stdin.readline()  # another process clears or truncates; the directory is read-only
    before = counters.snapshot()
    read_only = {"get": get(7), "put": put(500)}
    read_only["counted"] = {k: v - before.get(k, 0) for k, v in counters.snapshot().items()
                            if v != before.get(k, 0)}
    print(json.dumps(read_only), flush=True)
    sys.stdin.readline()  # writable again
    again = {"put": put(501), "get": get(501)}
    print(json.dumps(again), flush=True)
    """
)

CLEARER = textwrap.dedent(
    """
    import os, sys
    tier, directory, how = sys.argv[1], sys.argv[2], sys.argv[3]
    if how == "clear":
        if tier == "fragment":
            from raptorx_py.cache.fragment_cache import FragmentCache
            c = FragmentCache(directory, max_bytes=2**30, max_entries=1000,
                              max_entry_bytes=2**26, ttl=None)
            c.clear(); c.close()
        else:
            from raptorx_py.cache.block_store import BlockStore
            s = BlockStore(directory, max_size=2**30)
            s.drop_prefix(""); s.close()
    else:  # truncate every file of the cache: index, its journals, entries, secret
        for root, _, names in os.walk(directory):
            for name in names:
                os.truncate(os.path.join(root, name), 0)
    """
)


def scribble_schema(path: str, table: str) -> None:
    """Make ``table``'s schema row name a non-UTF-8 object whose SQL does not parse: SQLite's
    error then quotes bytes Python cannot decode."""
    data = bytearray(open(path, "rb").read())
    row = data.index(b"table" + table.encode() * 2)
    data[row + 5] = 0x93
    sql = data.index(b"CREATE TABLE " + table.encode())
    data[sql : sql + 6] = b"CRXATE"
    with open(path, "wb") as f:
        f.write(data)


def _read_only(directory: str):
    """Make ``directory`` read-only for every process, root included (a read-only bind
    mount over it); a function undoing it. Skips where mounts are not allowed."""
    bound = subprocess.run(["mount", "--bind", directory, directory], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bound.stderr.decode().strip()}")
    subprocess.run(["mount", "-o", "remount,ro,bind", directory, directory], check=True)

    def undo() -> None:
        subprocess.run(["umount", "-l", directory], check=True)

    return undo


def _tell(holder: subprocess.Popen) -> None:
    """Let the holder go on (a holder that died meanwhile is judged by its exit status)."""
    try:
        holder.stdin.write("go\n")
        holder.stdin.flush()
    except BrokenPipeError:
        pass


@pytest.mark.parametrize("how", ["clear", "truncate"])
@pytest.mark.parametrize("tier", ["fragment", "block"])
def test_a_process_holding_the_index_survives_another_clearing_or_truncating_it(
    tmp_path, tier, how
):
    """The crash this guards against: SIGBUS in diskcache's ``expire`` after another
    process cleared the cache and the directory became read-only. Before the fix, a
    truncated ``-shm`` (WAL's index, always memory-mapped) or database (diskcache's 64 MiB
    mmap) killed the holder here with SIGBUS."""
    directory = str(tmp_path / tier)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, tier, directory],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    undo = None
    try:
        assert holder.stdout.readline().strip() == "filled", holder.stderr.read()
        subprocess.run([sys.executable, "-c", CLEARER, tier, directory, how], check=True)
        undo = _read_only(directory)
        _tell(holder)
        read_only = json.loads(holder.stdout.readline() or "null")
        undo()
        undo = None
        _tell(holder)
        again = json.loads(holder.stdout.readline() or "null")
        holder.wait(timeout=60)
    finally:
        if undo is not None:
            undo()
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert holder.returncode != -signal.SIGBUS, "the holder died of SIGBUS"
    assert holder.returncode == 0, holder.stderr.read()
    assert read_only is not None and again is not None
    # The next read is a miss (the entry is gone or truncated), counted, not a crash; the
    # store on a read-only directory fails, counted.
    assert read_only["get"] is None and read_only["put"] is False
    counted = read_only["counted"]
    if tier == "fragment":
        assert counted.get("fragment_cache.misses") == 1
        assert counted.get("fragment_cache.errors", 0) >= 1
    else:
        assert counted.get("block_cache.put_errors") == 1
    # Writable again: the same process stores and serves (its damaged index rebuilt).
    assert again["put"] is True and again["get"] == (10 if tier == "fragment" else 64)


# --- 2. a damaged index or secret, per tier --------------------------------------------------


def test_a_damaged_block_index_is_rebuilt_from_the_blocks_that_verify(tmp_path):
    directory = tmp_path / "blocks"
    store = BlockStore(str(directory), max_size=2**30)
    for i in range(20):
        assert store.put("cd" * 8, i, bytes([i]) * 100)
    store.close()
    victim = store.path_of("cd" * 8 + "-3")
    scribble(victim, seed=1, length=10)  # one block no longer verifies
    scribble(directory / INDEX_FILE, seed=2)
    deltas = CounterDeltas()
    again = BlockStore(str(directory), max_size=2**30)
    assert again.enabled
    assert deltas["block_cache.index_rebuilt"] == 1
    assert (directory / (INDEX_FILE + DAMAGED_SUFFIX)).exists()  # set aside, not deleted
    assert again.count() == 19 and again.last_recovery["adopted"] == 19
    assert again.read("cd" * 8, 5, 100, 0, 100) == bytes([5]) * 100
    assert again.read("cd" * 8, 3, 100, 0, 100) is None and not os.path.exists(victim)
    assert again.put("cd" * 8, 3, bytes([3]) * 100)
    # Damage met by a running store (not at opening) heals too, and the put goes on.
    scribble(directory / INDEX_FILE, seed=3)
    assert again.put("cd" * 8, 30, b"x" * 100)
    assert deltas["block_cache.index_rebuilt"] == 2 and deltas["block_cache.put_errors"] == 0
    assert again.count() == 21 and again.read("cd" * 8, 30, 100, 0, 100) == b"x" * 100


@pytest.mark.parametrize("damage", ["other length", "same length"])
def test_a_damaged_block_secret_drops_the_blocks_keyed_with_it(tmp_path, damage):
    directory = tmp_path / "blocks"
    store = BlockStore(str(directory), max_size=2**30)
    assert store.put("ef" * 8, 0, b"a" * 100)
    store.close()
    secret = directory / cache_files.SECRET_FILE
    secret.write_bytes(os.urandom(7 if damage == "other length" else cache_files.SECRET_BYTES))
    deltas = CounterDeltas()
    again = BlockStore(str(directory), max_size=2**30)
    assert again.enabled
    assert len(secret.read_bytes()) == cache_files.SECRET_BYTES
    assert again.read("ef" * 8, 0, 100, 0, 100) is None  # never bytes it cannot verify
    assert deltas["block_cache.corrupt_blocks"] == 1
    assert again.put("ef" * 8, 0, b"b" * 100) and again.read("ef" * 8, 0, 100, 0, 100) == b"b" * 100


def test_a_damaged_fragment_index_is_rebuilt_from_the_entries_that_verify(tmp_path):
    directory = tmp_path / "fragments"
    cache = fragments(directory)
    for i in range(10):
        assert cache.put(bytes([i]) * 20, SCHEMA, result(i + 1))
    cache.close()
    scribble(entry_path(str(directory), bytes([4]) * 20), seed=4, length=60)
    index = directory / "index" / "cache.db"
    scribble(index, seed=5)
    deltas = CounterDeltas()
    again = fragments(directory)
    assert deltas["fragment_cache.index_rebuilt"] == 1 and deltas["fragment_cache.corrupt"] == 1
    assert len(again) == 9 and again.volume() > 0
    assert (directory / "index" / ("cache.db" + DAMAGED_SUFFIX)).exists()
    assert pa.Table.from_batches(again.get(bytes([6]) * 20)).num_rows == 7
    assert again.get(bytes([4]) * 20) is None
    # Met by a store of a running cache: the index is rebuilt and the store goes on.
    scribble(index, seed=6)
    assert again.put(b"n" * 20, SCHEMA, result(3))
    assert deltas["fragment_cache.index_rebuilt"] == 2 and deltas["fragment_cache.errors"] == 0
    assert len(again) == 10 and pa.Table.from_batches(again.get(b"n" * 20)).num_rows == 3


def test_an_index_whose_schema_quotes_undecodable_bytes_is_rebuilt(tmp_path):
    # SQLite's message quotes the scribbled name, which Python cannot decode: damage all
    # the same (sqlite_wal.undecodable_is_damage), not an error out of the tier.
    blocks = BlockStore(str(tmp_path / "blocks"), max_size=2**20)
    assert blocks.put("ab" * 8, 0, b"x" * 10)
    blocks.close()
    scribble_schema(blocks.index_path, "blocks")
    cache = fragments(tmp_path / "fragments")
    assert cache.put(b"k" * 20, SCHEMA, result(3))
    cache.close()
    scribble_schema(str(tmp_path / "fragments" / "index" / "cache.db"), "Cache")
    deltas = CounterDeltas()
    assert BlockStore(str(tmp_path / "blocks"), max_size=2**20).count() == 1
    again = fragments(tmp_path / "fragments")
    assert deltas["block_cache.index_rebuilt"] == 1
    assert deltas["fragment_cache.index_rebuilt"] == 1
    assert pa.Table.from_batches(again.get(b"k" * 20)).num_rows == 3


def test_a_damaged_fragment_secret_drops_the_entries_keyed_with_it(tmp_path):
    directory = tmp_path / "fragments"
    cache = fragments(directory)
    assert cache.put(b"k" * 20, SCHEMA, result(5))
    cache.close()
    (directory / cache_files.SECRET_FILE).write_bytes(b"\0" * 5)
    deltas = CounterDeltas()
    again = fragments(directory)
    assert again.get(b"k" * 20) is None
    assert deltas["fragment_cache.corrupt"] == 1
    assert again.put(b"k" * 20, SCHEMA, result(6))
    assert pa.Table.from_batches(again.get(b"k" * 20)).num_rows == 6


def test_a_damaged_footer_secret_drops_the_footers_keyed_with_it(tmp_path):
    import pyarrow.parquet as pq

    data = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), data)
    identity = FileIdentity(f"file://{data}", data.stat().st_size, "v1")
    directory = tmp_path / "footers"

    def footers() -> FooterCache:
        return FooterCache(str(directory), max_bytes=2**20, ttl=3600, max_disk_bytes=2**20)

    footers().get_or_load(identity, lambda: pq.read_metadata(data))
    (directory / cache_files.SECRET_FILE).write_bytes(os.urandom(cache_files.SECRET_BYTES))
    deltas = CounterDeltas()
    loads = []
    md = footers().get_or_load(identity, lambda: loads.append(1) or pq.read_metadata(data))
    assert md.num_rows == 3 and loads == [1]  # read again from the file, not trusted
    assert deltas["footer_cache.corrupt_entries"] == 1
    assert footers().get_or_load(identity, lambda: loads.append(2)).num_rows == 3
    assert loads == [1]  # stored again under the new secret: a disk hit


def test_a_damaged_metrics_sink_is_set_aside_and_counting_goes_on(tmp_path):
    sink = MetricsSink(str(tmp_path / "metrics"))
    sink.write({"a.b": 2})
    scribble(sink.path, seed=7)
    deltas = CounterDeltas()
    sink.write({"a.b": 3})  # neither raises nor loses this write
    assert sink.totals() == {"a.b": 3}
    assert deltas["metrics.sink_rebuilt"] == 1
    assert os.path.exists(sink.path + DAMAGED_SUFFIX)
    os.truncate(sink.path, 0)  # emptied by another process: its table made again
    assert sink.totals() == {}
    sink.write({"a.b": 1})
    assert sink.totals() == {"a.b": 1}


def test_a_damaged_journal_drops_everything_once_and_reads_on(tmp_path):
    path = str(tmp_path / "cache" / journal.JOURNAL_FILE)
    journal.post(path, journal.Invalidation(table="db.a"))
    reader = journal.JournalReader(path)
    with open(path, "ab") as f:
        f.write(b"\x00garbage\xff\nmore garbage without a newline")
    deltas = CounterDeltas()
    assert reader.poll() == journal.EVERYTHING
    assert deltas["invalidations.journal_damaged"] == 1
    # The torn tail is ended by the next post's own newline: a damaged line, everything
    # again (what it said is unknown); the post itself is on a line of its own.
    journal.post(path, journal.Invalidation(table="db.b"))
    assert reader.poll() == journal.EVERYTHING
    assert deltas["invalidations.journal_damaged"] == 2
    journal.post(path, journal.Invalidation(table="db.c"))
    (got,) = reader.poll()
    assert got.table == "db.c"
    assert reader.poll() == ()


def test_clear_leaves_every_tier_working_and_empty_whatever_its_index_holds(tmp_path):
    settings = tier_settings(tmp_path)
    blocks_dir = os.path.join(settings.cache_base_directory, "blocks")
    store = BlockStore(blocks_dir, max_size=2**30)
    assert store.put("12" * 8, 0, b"z" * 100)
    store.close()
    cache = fragments(settings.fragment_cache_base_directory)
    assert cache.put(b"q" * 20, SCHEMA, result(2))
    cache.close()
    scribble(os.path.join(blocks_dir, INDEX_FILE), seed=8)
    scribble(os.path.join(settings.fragment_cache_base_directory, "index", "cache.db"), seed=9)
    report = clear_caches(settings, ["block", "fragment"])
    # The rebuilt indexes held the entries that verified, and the clear removed them.
    assert report.removed == {"block": 1, "fragment": 1}
    store = BlockStore(blocks_dir, max_size=2**30)
    cache = fragments(settings.fragment_cache_base_directory)
    assert store.enabled and store.count() == 0 and len(cache) == 0
    assert store.put("12" * 8, 1, b"y" * 100) and cache.put(b"r" * 20, SCHEMA, result(1))


# --- 3. what the CLI says on a read-only directory; a lowered bound --------------------------


def test_cache_stats_on_a_read_only_directory_reads_every_tier_or_says_why(tmp_path, capsys):
    """``raptorx cache stats`` once ended in a traceback
    (``PermissionError ... cache.db.init-lock``) on a read-only cache directory."""
    from raptorx_py.cache_management import cache_stats, warm_table
    from raptorx_py.cli import main
    from raptorx_py.metrics import flush
    from tests.unit.test_cache_management import files_of, make_table, plant_fragments
    from tests.unit.test_cli_cache import _args

    settings = tier_settings(tmp_path)
    root = make_table(tmp_path, settings)
    warm_table(settings, "shop.events")
    plant_fragments(settings, files_of(root))
    flush(settings.metrics_directory)
    writable = {t.tier: t for t in cache_stats(settings)}
    assert writable["block"].entries > 0 and writable["fragment"].entries == 6
    listing = sorted(str(p) for p in tmp_path.rglob("*"))
    undo = _read_only(str(tmp_path))
    try:
        read_only = {t.tier: t for t in cache_stats(settings)}
        assert main(["cache", "stats", *_args(settings)]) == 0
        out = capsys.readouterr().out
    finally:
        undo()
    for tier in ("footer", "block", "fragment"):
        assert (read_only[tier].entries, read_only[tier].bytes) == (
            writable[tier].entries,
            writable[tier].bytes,
        )
        assert read_only[tier].note is None and read_only[tier].hits == writable[tier].hits
    assert "Traceback" not in out and "stats not read" not in out
    assert sorted(str(p) for p in tmp_path.rglob("*")) == listing  # nothing written

    # A tier whose index cannot be read says why, in one line; the others are still read.
    scribble(os.path.join(settings.fragment_cache_base_directory, "index", "cache.db"), seed=11)
    undo = _read_only(str(tmp_path))
    try:
        assert main(["cache", "stats", *_args(settings)]) == 0
        out = capsys.readouterr().out
    finally:
        undo()
    whys = [line for line in out.splitlines() if "stats not read" in line]
    assert len(whys) == 1, out
    why = whys[0]
    assert why.startswith("(fragment: stats not read from ") and "not a database" in why
    assert "Traceback" not in out


def test_a_fragment_cache_over_a_lowered_bound_shrinks_when_it_opens(tmp_path, caplog):
    """A 272 MB fragment cache once stayed at 272 MB after its bound was
    lowered to 5 MB, until new entries were written."""
    directory = tmp_path / "fragments"
    cache = fragments(directory)
    for i in range(20):
        assert cache.put(bytes([i]) * 20, SCHEMA, result(40_000))  # about 320 KB each
    full = cache.volume()
    cache.close()
    bound = full // 4
    deltas = CounterDeltas()
    smaller = fragments(directory, max_bytes=bound)
    assert smaller.volume() <= bound < full
    assert deltas["fragment_cache.evicted"] == 20 - len(smaller) > 0
    # The newest entries stayed (oldest rows go first).
    assert smaller.get(bytes([19]) * 20) is not None and smaller.get(bytes([0]) * 20) is None
    smaller.close()
    # Where it cannot shrink (read-only), opening says so and why; queries go on without it.
    from raptorx_py.cache.fragment_cache import fragment_cache_for
    from raptorx_py.config import load_settings

    settings = load_settings(
        overrides={
            "fragment-result-cache.enabled": "true",
            "fragment-result-cache.base-directory": str(directory),
            "fragment-result-cache.max-cache-size": "1MB",
        }
    )
    undo = _read_only(str(directory))
    try:
        with caplog.at_level("WARNING"):
            assert fragment_cache_for(settings.fragment_cache) is None
    finally:
        undo()
    assert any(
        str(directory) in r.getMessage() and "readonly database" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


def test_a_cold_read_counts_the_blocks_it_fetched_and_read_again_as_hits(tmp_path):
    """A cold query's scan node shows ``block cache hits = 3, misses =
    3, remote requests = 3``. A hit is a block read from the cache, whoever stored it: the
    footer read fetches a small file's only block, and its column chunks are then read from
    that block. The scan node's text says so (``ScanReport.scala``)."""
    import pyarrow.parquet as pq
    from fsspec.implementations.local import LocalFileSystem

    from raptorx_py.cache.block_cache import BlockCacheFileSystem

    data = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": list(range(1000)), "y": [str(i) for i in range(1000)]}), data)
    size = data.stat().st_size
    fs = BlockCacheFileSystem(LocalFileSystem(), str(tmp_path / "blocks"), max_size=2**30)
    deltas = CounterDeltas()
    with fs.open(str(data), "rb", size=size, version="v1") as f:
        assert pq.ParquetFile(f).read().num_rows == 1000
    cold = dict(deltas)
    assert cold["block_cache.misses"] == 1 and cold["block_cache.remote_requests"] == 1
    assert cold["block_cache.hits"] >= 1  # the fetched block, read again for the chunks
    with fs.open(str(data), "rb", size=size, version="v1") as f:
        assert pq.ParquetFile(f).read().num_rows == 1000
    warm = {k: v - cold.get(k, 0) for k, v in deltas.items()}
    assert warm.get("block_cache.misses", 0) == 0 and warm["block_cache.hits"] >= 1
    scala = open(
        os.path.join(
            os.path.dirname(__file__),
            "../../native/src/main/scala/org/apache/spark/sql/execution/python/raptorx",
            "ScanReport.scala",
        )
    ).read()
    assert (
        'BlockHitsText = "block cache hits (blocks this scan fetched, read again, included)"'
        in scala
    )


def test_a_store_moves_to_the_index_another_process_rebuilt(tmp_path):
    """A store (block index) or a cache (fragment index) opened before another opener set
    the damaged index aside uses the rebuilt one at its next write, not the renamed file."""
    directory = tmp_path / "blocks"
    first = BlockStore(str(directory), max_size=2**30)
    assert first.put("aa" * 8, 0, b"a" * 10)
    scribble(directory / INDEX_FILE, seed=12)
    second = BlockStore(str(directory), max_size=2**30)  # rebuilds (another process's view)
    assert second.count() == 1
    assert first.put("aa" * 8, 1, b"b" * 10)
    assert second.count() == 2 and first.count() == 2

    fdir = tmp_path / "fragments"
    one = fragments(fdir)
    assert one.put(b"a" * 20, SCHEMA, result(1))
    scribble(fdir / "index" / "cache.db", seed=13)
    two = fragments(fdir)
    assert len(two) == 1
    assert one.put(b"b" * 20, SCHEMA, result(2))
    assert len(two) == 2 and len(one) == 2


def test_the_cli_clear_of_a_damaged_tier_leaves_it_working(tmp_path, capsys, caplog):
    """A fault as once seen in use: random bytes over the block index made every command
    print "block cache disabled ... file is not a database" and ``raptorx cache clear
    --tier block`` report 0 entries removed, leaving the tier off."""
    from raptorx_py.cache_management import warm_table
    from raptorx_py.cli import main
    from tests.unit.test_cache_management import make_table
    from tests.unit.test_cli_cache import _args

    settings = tier_settings(tmp_path)
    make_table(tmp_path, settings)
    warm_table(settings, "shop.events")
    blocks_dir = os.path.join(settings.cache_base_directory, "blocks")
    held = BlockStore(blocks_dir, max_size=2**30).count()
    assert held > 0
    scribble(os.path.join(blocks_dir, INDEX_FILE), seed=14)
    with caplog.at_level("WARNING"):
        assert main(["cache", "clear", "--tier", "block", *_args(settings)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"block: {held} entries removed"]
    assert not any("disabled" in r.getMessage() for r in caplog.records)
    (rebuilt,) = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert "rebuilt from the block files" in rebuilt  # said once
    assert main(["cache", "stats", "--json", *_args(settings)]) == 0
    tiers = {t["tier"]: t for t in json.loads(capsys.readouterr().out)["tiers"]}
    assert (tiers["block"]["entries"], tiers["block"]["note"]) == (0, None)
    warm_table(settings, "shop.events")  # the tier caches again
    assert BlockStore(blocks_dir, max_size=2**30).count() == held
