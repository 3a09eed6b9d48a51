"""The fragment result cache's accounting index: diskcache (now) against the hand-written
SQLite index (``index.db``) it replaced for one session, measured in the same run.

``python -m benchmarks.fragment_index [--entries 400] [--rows 1000] [--repetitions 7]
[--old-revision 6336f8e] [--old-synchronous NORMAL] [--out result.json]``

The old index is ``raptorx_py/cache/fragment_cache.py`` as of ``--old-revision``, read with
``git show`` from this repository (so it needs the history, not only a checkout) and loaded
as a module of its own beside the current one; both count into the same counters. Each
repetition runs both implementations, one after the other, alternating which goes first,
each on a fresh directory, and times, per implementation:

- ``stores``: ``put`` of ``--entries`` distinct results (``--rows`` rows each, about 20 KB
  as an entry) into an unbounded cache;
- ``hits``: ``get`` of each of them (the same code in both: a hit reads no index);
- ``evictions``: ``put`` of ``--entries`` more into a cache bounded to half of them, so
  every store evicts about one entry (the evictions are counted, and must be equal);
- ``second_chances``: the same with every other entry read first (its mtime touched, as the
  JVM does on a hit), so eviction passes over the read ones.

Figures are operations per second (median over the repetitions) and, since the machine is
shared and loaded, the ratio new / old of each repetition (median): above 1, diskcache is
faster.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import pyarrow as pa

from raptorx_py.cache import fragment_cache as new_module
from raptorx_py.metrics import counters

ROOT = Path(__file__).resolve().parent.parent
MODULE_PATH = "raptorx_py/cache/fragment_cache.py"
#: The last commit whose fragment cache had the hand-written index (``index.db``).
OLD_REVISION = "6336f8e"
OPERATIONS = ("stores", "hits", "evictions", "second_chances")


def load_old(revision: str, synchronous: str | None = None) -> ModuleType:
    """The fragment cache module as of ``revision``, loaded as ``fragment_cache_index_db``;
    with ``synchronous``, its index opened with ``PRAGMA synchronous=<it>`` (SQLite's
    default is FULL, an fsync per commit in WAL mode; diskcache sets NORMAL)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:{MODULE_PATH}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "index.db" not in source:
        raise SystemExit(f"{MODULE_PATH} at {revision} has no index.db: not the old index")
    spec = importlib.util.spec_from_loader("fragment_cache_index_db", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{revision}:{MODULE_PATH}", "exec"), module.__dict__)
    if synchronous:
        connect = module.connect_wal

        def connect_wal(path, **kw):
            pragmas = (*kw.pop("pragmas", ()), f"PRAGMA synchronous={synchronous}")
            return connect(path, pragmas=pragmas, **kw)

        module.connect_wal = connect_wal
    return module


def result_batches(rows: int, seed: int) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    schema = pa.schema([pa.field("k", pa.int64()), pa.field("v", pa.float64())])
    batch = pa.record_batch(
        [pa.array(range(seed, seed + rows)), pa.array([i * 0.5 for i in range(rows)])], schema
    )
    return schema, [batch]


def key_of(i: int) -> bytes:
    return i.to_bytes(4, "big") * 5


def run_one(module: ModuleType, directory: str, entries: int, rows: int) -> dict[str, float]:
    """Operations per second of each operation for one implementation."""
    schema, batches = result_batches(rows, 0)
    out: dict[str, float] = {}

    def make(path: str, max_bytes: int):
        return module.FragmentCache(
            path, max_bytes=max_bytes, max_entries=10**9, max_entry_bytes=2**30, ttl=None
        )

    cache = make(os.path.join(directory, "unbounded"), 2**40)
    t0 = time.perf_counter()
    for i in range(entries):
        assert cache.put(key_of(i), schema, batches)
    out["stores"] = entries / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(entries):
        assert cache.get(key_of(i)) is not None
    out["hits"] = entries / (time.perf_counter() - t0)
    entry_bytes = os.path.getsize(module.entry_path(cache.directory, key_of(0)))
    cache.close()

    for name, touch in (("evictions", False), ("second_chances", True)):
        bounded = make(os.path.join(directory, name), entries // 2 * entry_bytes + 64 * 1024)
        for i in range(entries // 2):
            assert bounded.put(key_of(i), schema, batches)
        if touch:
            for i in range(0, entries // 2, 2):
                assert bounded.get(key_of(i)) is not None
        before = counters.snapshot().get("fragment_cache.evicted", 0)
        t0 = time.perf_counter()
        for i in range(entries // 2, entries // 2 + entries):
            assert bounded.put(key_of(i), schema, batches)
        out[name] = entries / (time.perf_counter() - t0)
        out[f"{name}_evicted"] = counters.snapshot().get("fragment_cache.evicted", 0) - before
        bounded.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=400)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--repetitions", type=int, default=7)
    ap.add_argument("--old-revision", default=OLD_REVISION)
    ap.add_argument(
        "--old-synchronous",
        help="open the old index with PRAGMA synchronous=<this> (e.g. NORMAL, diskcache's)",
    )
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    implementations = {
        "old_index_db": load_old(args.old_revision, args.old_synchronous),
        "diskcache": new_module,
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in implementations}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repetitions + 1):  # the first is a warm-up, not kept
            order = list(implementations) if rep % 2 == 0 else list(reversed(implementations))
            for name in order:
                directory = os.path.join(tmp, f"{name}-{rep}")
                figures = run_one(implementations[name], directory, args.entries, args.rows)
                shutil.rmtree(directory)
                if rep:
                    runs[name].append(figures)
    result: dict[str, object] = {
        "entries": args.entries,
        "rows": args.rows,
        "repetitions": args.repetitions,
        "old_revision": args.old_revision,
        "old_synchronous": args.old_synchronous or "FULL (SQLite's default)",
        "per_second": {
            name: {op: round(statistics.median(r[op] for r in rs), 1) for op in OPERATIONS}
            for name, rs in runs.items()
        },
        "ratio_new_over_old": {
            op: round(
                statistics.median(
                    n[op] / o[op] for n, o in zip(runs["diskcache"], runs["old_index_db"])
                ),
                3,
            )
            for op in OPERATIONS
        },
        "evicted_per_run": {
            name: {
                op: sorted({r[f"{op}_evicted"] for r in rs})
                for op in ("evictions", "second_chances")
            }
            for name, rs in runs.items()
        },
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
