"""Planning cost with and without the versioned metastore cache.

``python -m benchmarks.metastore_planning [--partitions 10000] [--repetitions 7]
[--postgres-url postgresql://...] [--hms | --hms-uri thrift://...] [--out result.json]``
builds a managed table with N partitions (one transaction, partitions added in bulk, each with
a row count and column statistics) in a temporary SQLite metastore, and in the given
PostgreSQL database too; with ``--hms`` (a Hive Metastore 2.3.10 started here,
``devservers/hive_metastore.py``, with its notification listener) or ``--hms-uri``, an
EXTERNAL table of N partitions in that Hive Metastore over Thrift (``--hms-partitions``, default
N; row counts, column statistics only with ``--hms-statistics``: the test server's embedded
Derby takes ~0.2 s per partition's statistics, the reads make the same calls either way).
Then it times what the data source does to plan a scan (``snapshot`` + ``get_table`` +
``list_partitions``) in three configurations, interleaved within each repetition:

- ``cold``: a new cache (cache on), its first query: everything is read from the database;
- ``warm``: the same query again on a cache that already holds the table: one round trip
  (over Thrift: the notification-log poll that is the query's snapshot);
- ``off``: ``hive.metastore-cache-ttl=0``: every query reads the database.

It prints and writes (``--out``) per backend the median seconds and the round trips of each
configuration, and the ratios cold/warm and off/warm of the medians. Round trips are checked,
not only reported: warm must be exactly one. On PostgreSQL the table lives in a database
``bench_planning`` and is dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack

from raptorx_py.config import build_settings
from raptorx_py.hive.model import (
    EXTERNAL_TABLE,
    MANAGED_TABLE,
    Column,
    ColumnStats,
    Partition,
    Table,
)
from raptorx_py.metastore.cached_store import CachedMetastore
from raptorx_py.metastore.store import Metastore, backend_for_url
from raptorx_py.metastore.thrift_store import ThriftMetastore
from raptorx_py.metrics import counters

CONFIGURATIONS = ("cold", "warm", "off")


def build_table(
    ms: Metastore | ThriftMetastore,
    database: str,
    name: str,
    partitions: int,
    with_statistics: bool = True,
) -> Table:
    """A managed table written under one write id; over Thrift (no write ids) an EXTERNAL one."""
    thrift = isinstance(ms, ThriftMetastore)
    ms.create_database(database)
    table = ms.create_table(
        Table(
            database,
            name,
            EXTERNAL_TABLE if thrift else MANAGED_TABLE,
            f"file:///warehouse/{database}.db/{name}",
            (Column("id", "bigint"), Column("amount", "double")),
            (Column("day", "int"), Column("region", "string")),
        )
    )
    parts = [
        Partition(
            (str(i // 10), f"r{i % 10}"),
            f"{table.location}/day={i // 10}/region=r{i % 10}",
            {"numRows": "1000"},
            {
                "id": ColumnStats(0, i * 1000, i * 1000 + 999),
                "amount": ColumnStats(3, 0.5, 99.5),
            }
            if with_statistics
            else {},
        )
        for i in range(partitions)
    ]
    if isinstance(ms, ThriftMetastore):
        ms.add_partitions(table, parts)
        return table
    txn = ms.open_transaction(user="benchmark")
    write_id = ms.allocate_write_id(txn, database, name)
    ms.add_partitions(table, parts, write_id=write_id)
    ms.commit_transaction(txn)
    return table


def plan(cache: CachedMetastore, qualified: str) -> int:
    snapshot = cache.snapshot([qualified])
    table = cache.get_table(*qualified.split("."), snapshot=snapshot)
    return len(cache.list_partitions(table, snapshot=snapshot))


def measure(cache: CachedMetastore, qualified: str, expected: int) -> tuple[float, int]:
    before = counters.snapshot().get("metastore.round_trips", 0)
    start = time.perf_counter()
    n = plan(cache, qualified)
    seconds = time.perf_counter() - start
    if n != expected:
        raise AssertionError(f"planned {n} partitions of {qualified}, expected {expected}")
    return seconds, counters.snapshot().get("metastore.round_trips", 0) - before


def run_backend(url: str, partitions: int, repetitions: int, with_statistics: bool = True) -> dict:
    thrift = url.startswith("thrift://")
    key = "hive.metastore.uri" if thrift else "hive.metastore.url"
    settings = {
        name: build_settings(
            {
                key: (url, "benchmark", None),
                "hive.metastore-cache-ttl": (ttl, "benchmark", None),
                "hive.metastore-cache-maximum-size": (str(partitions + 1), "benchmark", None),
                "hive.metastore-timeout": ("600s", "benchmark", None),
            }
        )
        for name, ttl in (("on", "1h"), ("off", "0s"))
    }
    database, name = "bench_planning", f"t_{uuid.uuid4().hex[:8]}"
    qualified = f"{database}.{name}"
    ms: Metastore | ThriftMetastore = (
        ThriftMetastore(url, timeout=600) if thrift else Metastore(backend_for_url(url))
    )
    try:
        start = time.perf_counter()
        build_table(ms, database, name, partitions, with_statistics)
        build_seconds = time.perf_counter() - start
        warm_cache = CachedMetastore(ms, settings["on"].metastore_cache)
        off_cache = CachedMetastore(ms, settings["off"].metastore_cache)
        measure(warm_cache, qualified, partitions)  # fills the warm cache
        seconds = {c: [] for c in CONFIGURATIONS}
        trips = {c: set() for c in CONFIGURATIONS}
        for rep in range(repetitions):
            order = CONFIGURATIONS if rep % 2 == 0 else CONFIGURATIONS[::-1]
            for config in order:
                if config == "cold":
                    # Its set-up trip is not timed.
                    cache = CachedMetastore(ms, settings["on"].metastore_cache)
                elif config == "warm":
                    cache = warm_cache
                else:
                    cache = off_cache
                s, n = measure(cache, qualified, partitions)
                seconds[config].append(s)
                trips[config].add(n)
        if trips["warm"] != {1}:
            raise AssertionError(f"a warm plan made {sorted(trips['warm'])} round trips, not 1")
        median = {c: statistics.median(v) for c, v in seconds.items()}
        ms.drop_table(database, name)
        return {
            "backend": "hive-metastore-thrift" if thrift else url.split(":", 1)[0],
            "partitions": partitions,
            "partition_statistics": with_statistics,
            "build_seconds": round(build_seconds, 3),
            "median_seconds": {c: round(v, 6) for c, v in median.items()},
            "round_trips": {c: sorted(v) for c, v in trips.items()},
            "cold_over_warm": round(median["cold"] / median["warm"], 1),
            "off_over_warm": round(median["off"] / median["warm"], 1),
            "samples_seconds": {c: [round(x, 6) for x in v] for c, v in seconds.items()},
        }
    finally:
        ms.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--postgres-url", help="also measure on this PostgreSQL database")
    parser.add_argument(
        "--hms", action="store_true", help="also measure on a Hive Metastore started here"
    )
    parser.add_argument("--hms-uri", help="also measure on this Hive Metastore (thrift://...)")
    parser.add_argument("--hms-partitions", type=int, help="partitions there (default: N)")
    parser.add_argument(
        "--hms-statistics", action="store_true", help="write column statistics there too"
    )
    parser.add_argument("--out", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="raptorx-planning-") as tmp, ExitStack() as stack:
        runs = [(f"sqlite:///{os.path.join(tmp, 'metastore.db')}", args.partitions, True)]
        if args.postgres_url:
            runs.append((args.postgres_url, args.partitions, True))
        hms_uri = args.hms_uri
        if args.hms and not hms_uri:
            from devservers.hive_metastore import HiveMetastoreServer

            server = stack.enter_context(HiveMetastoreServer(os.path.join(tmp, "hms")))
            hms_uri = server.uri
        if hms_uri:
            runs.append((hms_uri, args.hms_partitions or args.partitions, args.hms_statistics))
        for url, partitions, with_stats in runs:
            result = run_backend(url, partitions, args.repetitions, with_stats)
            results.append(result)
            med, trips = result["median_seconds"], result["round_trips"]
            print(
                f"{result['backend']}: {partitions} partitions "
                f"(built in {result['build_seconds']:.1f} s): "
                + ", ".join(
                    f"{c} {med[c] * 1000:.2f} ms ({trips[c]} round trips)" for c in CONFIGURATIONS
                )
                + f"; cold/warm {result['cold_over_warm']}x, off/warm "
                f"{result['off_over_warm']}x"
            )
    report = {
        "benchmark": "metastore_planning",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "repetitions": args.repetitions,
        "results": results,
    }
    if args.out:
        tmp_out = f"{args.out}.tmp"
        with open(tmp_out, "w") as f:
            json.dump(report, f, indent=2)
        os.replace(tmp_out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
