"""Seeded faults on every cache file while queries run: a reader process plans
and reads a table through every tier, over and over, flushing its counts to the metrics
sink, while this process damages random cache files and indexes (random bytes in place, a
truncation, a removal: block files, footers, fragment entries, the block and fragment
indexes, the secrets, the invalidation journal, the metrics sink) and a second process
runs ``raptorx cache clear`` now and then. Every read must be right (a cache fault never
fails a query the store can answer; a wrong answer is worse than no cache), and every tier
must work afterwards.

Spark-free (the planner and the reader the data source runs), seconds in the default suite;
``make stress`` runs more rounds and seeds. ``RAPTORX_FUZZ_SEED`` picks the seed; a failure
prints it and the faults made.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import pytest

from raptorx_py.cache.block_store import BlockStore
from raptorx_py.cache.fragment_cache import FragmentCache
from raptorx_py.cache_management import cache_stats, clear_caches
from raptorx_py.metrics import MetricsSink
from tests.unit.test_cache_management import ROWS_PER_FILE, make_table, tier_settings

#: Faults made before each read.
FAULTS_PER_READ = 3

READER = textwrap.dedent(
    """
    import os
    import sys
    from raptorx_py.config import load_settings
    from raptorx_py.datasource.planning.planner import plan_scan
    from raptorx_py.datasource.reading.scan import read_split
    from raptorx_py.metastore.cached_store import cached_metastore_for
    from raptorx_py.metrics import flush

    settings = load_settings(overrides=dict(a.split("=", 1) for a in sys.argv[2:]))
    rounds = int(sys.argv[1])
    cache = cached_metastore_for(settings.metastore_cache, start=False)
    for _ in range(rounds):
        sys.stdin.readline()  # the faults of this round are made
        snapshot = cache.snapshot(["shop.events"])
        table = cache.get_table("shop", "events", snapshot=snapshot)
        plan = plan_scan(cache, settings, table, table.columns, (), snapshot=snapshot)
        ids = [
            x
            for s in plan.splits
            for b in read_split(s, table, table.columns[:1], (), settings)
            for x in b.column(0).to_pylist()
        ]
        flush(settings.metrics_directory)
        print(len(ids), sum(ids), flush=True)
    # Every read is done and counted: leave without the interpreter's teardown, in which
    # pyarrow now and then aborts the process ("terminate called without an active
    # exception", apache/arrow#34314), after the work and outside it.
    sys.stderr.flush()
    os._exit(0)
    """
)

CLEARER = textwrap.dedent(
    """
    import sys
    from raptorx_py.cache_management import clear_caches
    from raptorx_py.config import load_settings

    clear_caches(load_settings(overrides=dict(a.split("=", 1) for a in sys.argv[1:])))
    """
)


def cache_files(settings) -> list[str]:
    """Every file of the node's caches and of the metrics sink (set-aside copies and the
    set-up lock files left out: nothing reads them)."""
    found = []
    for root in (
        settings.cache_base_directory,
        settings.fragment_cache_base_directory,
        settings.metrics_directory,
    ):
        for directory, _, names in os.walk(root):
            found += [
                os.path.join(directory, n)
                for n in names
                if not n.endswith((".damaged", ".init-lock"))
                and ".damaged-" not in n
                and not n.endswith(".damaged-journal")
            ]
    return sorted(found)


def damage(path: str, rng: random.Random) -> str:
    """One random fault on ``path``; what was done, for the failure message."""
    kind = rng.choice(["scribble", "scribble", "truncate", "remove"])
    try:
        size = os.path.getsize(path)
        if kind == "scribble":
            offset = rng.randrange(max(size, 1))
            with open(path, "r+b") as f:
                f.seek(offset)
                f.write(rng.randbytes(rng.randint(1, 512)))
        elif kind == "truncate":
            os.truncate(path, rng.randrange(max(size, 1)))
        else:
            os.unlink(path)
    except FileNotFoundError:
        return f"{kind} {path}: already gone"
    return f"{kind} {path}"


def run_faults(tmp_path, seed: int, rounds: int) -> None:
    settings = tier_settings(tmp_path)
    make_table(tmp_path, settings)
    n = ROWS_PER_FILE * 6
    props = [f"{k}={v}" for k, v in settings.properties().items()]
    rng = random.Random(seed)
    reader = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", READER, str(rounds), *props],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    faults: list[str] = []
    lines: list[str] = []
    clearer = None
    try:
        # In lockstep, so the faults are the seed's whatever the machine's pace: a few faults,
        # then one read; every third read runs while another process clears every tier.
        for r in range(rounds):
            for _ in range(FAULTS_PER_READ):
                files = cache_files(settings)
                if files:
                    faults.append(damage(rng.choice(files), rng))
            if r % 3 == 2:
                clearer = subprocess.Popen([sys.executable, "-c", CLEARER, *props])
                faults.append("clear (another process, during the read)")
            reader.stdin.write("go\n")
            reader.stdin.flush()
            line = reader.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
            if clearer is not None:
                assert clearer.wait(timeout=120) == 0
                clearer = None
        reader.stdin.close()
        reader.wait(timeout=300)
        err = reader.stderr.read()
    finally:
        for process in (reader, clearer):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    context = f"seed {seed}, {len(lines)} reads, faults: {faults}\n{err[-3000:]}"
    assert reader.returncode == 0, context
    assert len(lines) == rounds and len(faults) >= rounds, context
    assert set(lines) == {f"{n} {n * (n - 1) // 2}"}, context

    # Afterwards every tier works: a clear leaves each empty and usable, stats read.
    clear_caches(settings)
    store = BlockStore(os.path.join(settings.cache_base_directory, "blocks"), max_size=2**30)
    assert store.enabled and store.count() == 0 and store.put("ab" * 8, 0, b"x" * 10)
    fragments = FragmentCache(
        settings.fragment_cache_base_directory,
        max_bytes=2**30,
        max_entries=100,
        max_entry_bytes=2**20,
        ttl=None,
    )
    assert len(fragments) == 0
    stats = {t.tier: t for t in cache_stats(settings)}
    notes = {t.tier: t.note for t in stats.values() if t.note is not None}
    assert stats["block"].entries == 1 and not notes, (context, notes)
    MetricsSink(settings.metrics_directory).write({"x.y": 1})
    assert MetricsSink(settings.metrics_directory).totals()["x.y"] >= 1


def test_random_faults_while_a_reader_reads(tmp_path):
    seed = int(os.environ.get("RAPTORX_FUZZ_SEED", "36"))
    run_faults(tmp_path, seed, rounds=12)


@pytest.mark.stress
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_faults_while_a_reader_reads_longer(tmp_path, seed):
    run_faults(tmp_path, seed, rounds=150)
