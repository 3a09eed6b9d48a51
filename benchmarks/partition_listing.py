"""Listing a partitioned table's directories: one listing per partition on the planner's
listing threads, against one listing of the table's location (``planner.TableRoot``).

``python -m benchmarks.partition_listing [--partitions 84] [--files 1] [--repetitions 9]
[--latency-ms 20] [--out result.json]`` starts the emulated S3 endpoint (moto behind the
latency middleware, ``devservers.s3_endpoint``) at ``--latency-ms`` before each request's
first byte, writes a table of ``--partitions`` month directories of ``--files`` small
objects each (TPC-H's lineitem at SF 1 has 84 of one file), and times the planner's
listing of every partition (``planner._list_locations``, no listing cache) both ways,
interleaved within each repetition. It prints and writes the median seconds of each way,
their ratio, and the LISTs each sent (exact counts, from the endpoint).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def _month(i: int) -> str:
    return f"{1992 + i // 12}-{i % 12 + 1:02d}"


def run(partitions: int, files: int, repetitions: int, latency_ms: float) -> dict:
    from devservers.s3_endpoint import S3Endpoint
    from raptorx_py.config import load_settings
    from raptorx_py.datasource.planning import planner

    with S3Endpoint(latency_ms=0) as endpoint:
        endpoint.create_bucket("bench")
        client = endpoint.client()
        for p in range(partitions):
            for f in range(files):
                key = f"t/m={_month(p)}/part-{f}.parquet"
                client.put_object(Bucket="bench", Key=key, Body=b"x" * 100)
        endpoint.set_latency(latency_ms)
        settings = load_settings(
            overrides={**endpoint.s3_properties(), "hive.file-status-cache-tables": ""}, env={}
        )
        root = planner.TableRoot("s3://bench/t", partitions * (2 * files + 1))
        locations = [
            planner._Location(f"s3://bench/t/m={_month(p)}", (_month(p),), {}, p)
            for p in range(partitions)
        ]
        ways = {"each partition": None, "the table's location": root}
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        lists: dict[str, int] = {}
        listed: dict[str, list] = {}
        for _ in range(repetitions):
            for way, given in ways.items():
                endpoint.reset_stats()
                start = time.perf_counter()
                listed[way] = planner._list_locations(
                    settings, "bench.t", locations, None, None, given
                )
                seconds[way].append(time.perf_counter() - start)
                lists[way] = endpoint.stats()["requests"]["LIST"]
        if listed["each partition"] != listed["the table's location"]:
            raise AssertionError("the two ways listed different files")
    medians = {way: statistics.median(s) for way, s in seconds.items()}
    return {
        "partitions": partitions,
        "files_per_partition": files,
        "latency_ms": latency_ms,
        "repetitions": repetitions,
        "median_seconds": medians,
        "ratio_root_to_each": medians["the table's location"] / medians["each partition"],
        "lists": lists,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=84)
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--repetitions", type=int, default=9)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    result = run(args.partitions, args.files, args.repetitions, args.latency_ms)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
