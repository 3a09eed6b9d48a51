"""What a flush costs a Python process for Spark's metrics system: publishing its totals
(``metrics._SnapshotPublisher``, a file replaced whole) beside the metrics sink's SQLite
write it already makes when ``metrics.directory`` is set, measured interleaved.

``python -m benchmarks.metrics_publish [--names 150] [--repetitions 7] [--calls 200]
[--out result.json]``: ``--names`` counters in the process (a worker's after a few queries
holds 100-200), the sink written a 20-name delta (one task's). Figures are microseconds per
call, the median over the repetitions of ``--calls`` calls each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from raptorx_py import metrics
from raptorx_py.metrics import MetricsSink, counters


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--names", type=int, default=150)
    ap.add_argument("--repetitions", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    for i in range(args.names):
        counters.add(f"bench{i % 10}.name{i}", i)
    publisher = metrics._SnapshotPublisher()
    delta = {f"bench{i % 10}.name{i}": 1 for i in range(20)}
    publish, sink_write = [], []
    with tempfile.TemporaryDirectory() as tmp:
        sink = MetricsSink(os.path.join(tmp, "sink"))
        for _ in range(args.repetitions):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                publisher._write(os.path.join(tmp, "snapshots"))
            publish.append((time.perf_counter() - t0) / args.calls * 1e6)
            t0 = time.perf_counter()
            for _ in range(args.calls):
                sink.write(delta)
            sink_write.append((time.perf_counter() - t0) / args.calls * 1e6)
    result = {
        "names": args.names,
        "publish_us": round(statistics.median(publish)),
        "sink_write_us": round(statistics.median(sink_write)),
        "publish_runs_us": [round(x) for x in publish],
        "sink_write_runs_us": [round(x) for x in sink_write],
        "load_average": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
