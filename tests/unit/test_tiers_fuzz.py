"""Seeded fault-injection test of the read path with every tier on (listing, footer and
block caches), without Spark: planner + scan + tiers composed directly, against a reference
model of what each plan must read (after Trino's TestFuzzAlluxioCacheFileSystem and Hive's
TestCachedStore).

Random operations interleave:
- managed appends and overwrites (``raptorx_py.tables``), the model keeping every committed
  state, so a plan made earlier and read later must still read its own state;
- external files rewritten in place (same rows count, new values; half of them with the
  previous version's mtime put back, as ``cp -p`` does; some in a SEALED
  partition whose listing the listing cache keeps) and new files added to an UNSEALED
  partition (whose registration-time statistics must then not prune them);
- plans (with a random ``id > k`` predicate) and reads of any earlier plan;
- cache corruption (bit flip, truncation, deletion of block and footer cache files), LRU
  eviction, and dropping the footer cache's memory.

What a read must give: for a managed plan, exactly its snapshot's rows; for an external
plan, per split, exactly the rows of the file version the split names, or
``FileChangedError`` when that version is no longer the file's; a file the plan left out
must hold no matching row in the version of planning time. Anything else (mixed versions,
rows of another snapshot, a pruned match, a cache fault failing a read) fails, printing the
seed and the operations so far.

``RAPTORX_FUZZ_OPS`` (default 300) and ``RAPTORX_FUZZ_SEED`` change the run; the
``stress`` variant runs 2000 operations for each of 3 seeds (the cost of a plan grows
with the files written, so a run's time grows faster than its length).
"""

from __future__ import annotations

import os
import random
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cache.block_cache import block_cache_for
from raptorx_py.cache.footer_cache import footer_cache_for
from raptorx_py.config import load_settings
from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.errors import FileChangedError
from raptorx_py.hive.model import Column
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.predicates import Comparison
from raptorx_py.storage.file_versions import stat_version
from raptorx_py.storage.fs import local_fs
from raptorx_py.tables.commit import commit_write
from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tables.task_files import write_task
from raptorx_py.tables.write_job import begin_write
from tests.support.counter_deltas import CounterDeltas

COLUMNS = [Column("id", "bigint"), Column("v", "bigint"), Column("region", "string")]
EXT_ROWS = 40  # rows per external file: a rewrite keeps the count (often the size too)


class Run:
    def __init__(self, tmp_path, seed: int):
        self.rng = random.Random(seed)
        self.seed = seed
        self.log: list[str] = []
        self.settings = load_settings(
            overrides={
                "hive.metastore.url": f"sqlite:///{tmp_path}/ms.db",
                "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
                "cache.enabled": "true",
                "cache.base-directory": str(tmp_path / "cache"),
                "cache.block-size": "1kB",
                "cache.alluxio.max-cache-size": "64kB",
                "hive.parquet.metadata-cache-enabled": "true",
                "hive.file-status-cache-tables": "*",
                "hive.max-split-size": "64kB",
            },
            env={},
            cwd=tmp_path,
        )
        self.ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"))
        self.cache_dir = str(tmp_path / "cache")
        self.mtime = 1_700_000_000.0
        # managed: committed states, newest last (rows as (id, v, region))
        self.managed: list[Counter] = [Counter()]
        self.next_id = 0
        # external: path -> [(version, rows)], every version (``file_versions``), newest
        # last; partition of each
        self.ext_root = str(tmp_path / "ext")
        self.versions: dict[str, list[tuple[str, list[tuple[int, int]]]]] = {}
        self.part_of: dict[str, str] = {}
        for part in ("1", "2"):
            for i in range(2):
                self._write_ext(os.path.join(self.ext_root, f"p={part}", f"f{i}.parquet"), part)
        self.ext = register_external_table(
            self.ms, self.settings, "db.e", f"file://{self.ext_root}"
        )
        self.ms.set_partition_parameters(self.ext, ("1",), {"sealed": "true"})
        self.plans: list[tuple] = []
        self.faults = Counter()

    # --- writes ------------------------------------------------------------------------
    def _rows(self, n, lo, hi):
        return [(self.rng.randrange(lo, hi), self.rng.randrange(1 << 40)) for _ in range(n)]

    def _write_ext(self, path, part, rows=None, keep_mtime=False):
        """Write a new version of ``path``; ``keep_mtime``: put the previous version's mtime
        back (``cp -p``, ``rsync -t``), so only its inode and change time tell it apart."""
        rows = rows or self._rows(EXT_ROWS, 0, 100)
        before = os.stat(path) if keep_mtime else None
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        pq.write_table(
            pa.table(
                {
                    "id": pa.array([r[0] for r in rows], pa.int64()),
                    "v": pa.array([r[1] for r in rows], pa.int64()),
                }
            ),
            tmp,
            row_group_size=10,
        )
        os.replace(tmp, path)  # a reader sees a whole file, old or new
        if before is not None:
            times = (before.st_atime_ns, before.st_mtime_ns)
            os.utime(path, ns=times)
            # A change time later than the previous version's (the kernel's clock moves in
            # ticks): no two versions share an identity, which the model relies on.
            while os.stat(path).st_ctime_ns == before.st_ctime_ns:
                os.utime(path, ns=times)
        else:
            self.mtime += 1.5
            os.utime(path, (self.mtime, self.mtime))
        self.versions.setdefault(path, []).append((stat_version(os.stat(path)), rows))
        self.part_of[path] = part

    def rewrite_external(self):
        path = self.rng.choice(sorted(self.versions))
        keep_mtime = self.rng.random() < 0.5
        self._write_ext(path, self.part_of[path], keep_mtime=keep_mtime)
        kept = " (its mtime put back)" if keep_mtime else ""
        return f"rewrite {os.path.relpath(path, self.ext_root)}{kept}"

    def add_external(self):
        n = sum(1 for p in self.part_of.values() if p == "2")
        path = os.path.join(self.ext_root, "p=2", f"f{n}.parquet")
        # Values outside the registration statistics (ids 0..99): stats must not prune them.
        self._write_ext(path, "2", self._rows(EXT_ROWS, 100, 1000))
        return f"add p=2/f{n}"

    def managed_write(self):
        overwrite = self.rng.random() < 0.3
        n = self.rng.randrange(1, 30)
        ids = range(self.next_id, self.next_id + n)
        self.next_id += n
        rows = [
            (i, self.rng.randrange(1 << 40), self.rng.choice(["EU", "US", "ASIA"])) for i in ids
        ]
        b = pa.RecordBatch.from_pydict(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "v": pa.array([r[1] for r in rows], pa.int64()),
                "region": [r[2] for r in rows],
            }
        )
        job = begin_write(self.ms, self.settings, "db", "m", COLUMNS, overwrite, ("region",))
        files = write_task(self.settings, job, [b])
        commit_write(self.ms, self.settings, job, files)
        # An overwrite replaces the whole table (Spark's truncate).
        state = Counter() if overwrite else Counter(self.managed[-1])
        state.update(rows)
        self.managed.append(state)
        return f"{'overwrite' if overwrite else 'append'} {n} rows"

    # --- plans and reads ---------------------------------------------------------------
    def plan(self):
        k = self.rng.choice([None, 10, 50, 95, 99, 500])
        preds = [] if k is None else [Comparison(">", "id", k)]
        if len(self.managed) > 1 and self.rng.random() < 0.5:
            t = self.ms.get_table("db", "m")
            plan = plan_scan(self.ms, self.settings, t, t.all_columns, preds)
            self.plans.append(("m", plan, k, self.managed[-1]))
        else:
            t = self.ms.get_table("db", "e")
            plan = plan_scan(self.ms, self.settings, t, t.all_columns, preds)
            current = {p: v[-1] for p, v in self.versions.items()}
            self.plans.append(("e", plan, k, current))
        return f"plan #{len(self.plans) - 1} of db.{self.plans[-1][0]} where id > {k}"

    def read(self):
        i = self.rng.randrange(len(self.plans)) if self.rng.random() < 0.4 else len(self.plans) - 1
        kind, plan, k, model = self.plans[i]
        self.log.append(f"read plan #{i}")
        match = (lambda r: True) if k is None else (lambda r: r[0] > k)
        if kind == "m":
            got = Counter()
            for split in plan.splits:
                for b in read_split(
                    split, plan.table, plan.columns, plan.data_predicates, self.settings
                ):
                    got.update(zip(*(b.column(c).to_pylist() for c in ("id", "v", "region"))))
            want = Counter({r: c for r, c in model.items() if match(r)})
            assert got == want, self._fail(f"plan #{i}: managed rows differ from its snapshot")
            return
        planned = set()
        for split in plan.splits:
            path = split.url.removeprefix("file://")
            planned.add(path)
            version = [rows for v, rows in self.versions[path] if v == split.version]
            assert version, self._fail(f"{path}: planned version {split.version} never existed")
            try:
                got = []
                for b in read_split(
                    split, plan.table, plan.columns, plan.data_predicates, self.settings
                ):
                    got += zip(b.column("id").to_pylist(), b.column("v").to_pylist())
            except FileChangedError:
                current = self.versions[path][-1][0]
                assert current != split.version, self._fail(
                    f"{path}: FileChangedError, but its version {split.version} is current"
                )
                self.faults["file_changed"] += 1
                continue
            assert sorted(got) == sorted(r for r in version[0] if match(r)), self._fail(
                f"{path}: rows are not those of version {split.version}"
            )
        for path, (_version, rows) in model.items():
            if path not in planned:
                assert not [r for r in rows if match(r)], self._fail(
                    f"plan #{i} left out {path}, which holds rows with id > {k}"
                )

    # --- cache faults ------------------------------------------------------------------
    def _cache_files(self):
        out = []
        for d, _, files in os.walk(self.cache_dir):
            out += [
                os.path.join(d, f)
                for f in files
                if "/data/" in os.path.join(d, f) or f.endswith(".footer")
            ]
        return sorted(out)

    def corrupt(self):
        files = self._cache_files()
        if not files:
            return "corrupt (nothing cached)"
        path = self.rng.choice(files)
        kind = self.rng.choice(["flip", "truncate", "delete"])
        try:
            raw = bytearray(open(path, "rb").read())
            if kind == "flip" and raw:
                raw[self.rng.randrange(len(raw))] ^= 1 << self.rng.randrange(8)
                with open(path + ".x", "wb") as f:
                    f.write(raw)
                os.replace(path + ".x", path)
            elif kind == "truncate":
                os.truncate(path, self.rng.randrange(len(raw) + 1) if raw else 0)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
        return f"{kind} {os.path.relpath(path, self.cache_dir).split('/')[0]} entry"

    def evict(self):
        store = block_cache_for(self.settings.block_cache, local_fs()).store
        store.evict_to(self.rng.randrange(store.total_bytes() + 1))
        if self.rng.random() < 0.5:
            footer_cache_for(self.settings.footer_cache).clear_memory()
        return "evict"

    def _fail(self, what: str) -> str:
        return (
            f"{what}\nseed={self.seed} (RAPTORX_FUZZ_SEED={self.seed} to replay); "
            f"operations:\n  " + "\n  ".join(self.log[-200:])
        )

    def step(self):
        ops = [
            (self.managed_write, 2),
            (self.rewrite_external, 2),
            (self.add_external, 0.5),
            (self.plan, 3),
            (self.corrupt, 2),
            (self.evict, 1),
        ]
        if self.plans:
            ops.append((self.read, 5))
        op = self.rng.choices([o for o, _ in ops], [w for _, w in ops])[0]
        try:
            what = op()
        except AssertionError:
            raise
        except Exception as e:  # any other error is a failure of the system under test
            raise AssertionError(self._fail(f"{op.__name__} raised {type(e).__name__}: {e}")) from e
        if what:
            self.log.append(what)


def _run(tmp_path, seed: int, ops: int) -> Run:
    run = Run(tmp_path, seed)
    with CounterDeltas() as delta:
        for _ in range(ops):
            run.step()
    run.delta = delta
    return run


def test_fuzz_reads_match_the_model(tmp_path):
    seed = int(os.environ.get("RAPTORX_FUZZ_SEED", "20261123"))
    ops = int(os.environ.get("RAPTORX_FUZZ_OPS", "300"))
    run = _run(tmp_path, seed, ops)
    d = run.delta
    # The run met what it is meant to: hits, faults and evictions, and survived them.
    assert d.get("block_cache.hits", 0) > 0 and d.get("block_cache.misses", 0) > 0, d
    assert d.get("block_cache.corrupt_blocks", 0) + d.get("footer_cache.corrupt_entries", 0) > 0, d
    assert d.get("block_cache.evictions", 0) > 0, d


@pytest.mark.stress
@pytest.mark.parametrize("seed", range(3))
def test_fuzz_long(tmp_path, seed):
    ops = int(os.environ.get("RAPTORX_FUZZ_OPS", "2000"))
    _run(tmp_path, 7919 * (seed + 1), ops)
