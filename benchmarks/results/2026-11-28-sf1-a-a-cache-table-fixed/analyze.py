"""Per-configuration ratios of a tpch_suite results.json: geomean of medians, paired by
run, the highest queries, and the A/A band. Usage: analyze.py results.json"""

import json
import math
import statistics
import sys

RESULTS = json.load(open(sys.argv[1]))
QUERIES = list(RESULTS["queries"])
PAIRS = [
    ("spark-parquet-local-again", "spark-parquet-local"),
    ("tiered-hive-s3", "spark-parquet-s3"),
    ("tiered-hive-s3-cold", "spark-parquet-s3"),
    ("tiered-hive-s3-warm", "spark-parquet-local"),
    ("tiered-hive-s3-warm-fragments", "spark-parquet-local"),
    ("spark-cache-table", "spark-parquet-local"),
    ("tiered-hive-s3-warm", "spark-cache-table"),
    ("tiered-hive-s3-warm-fragments", "spark-cache-table"),
    ("tiered-hive-s3-warm-fragments", "spark-parquet-s3"),
    ("tiered-hive-s3", "tiered-hive-s3-warm-fragments"),
]


def geomean(values):
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


def runs(q, config):
    return [x["seconds"] for x in RESULTS["queries"][q]["configs"][config]["runs"]]


def ratio(q, config, base):
    return statistics.median(runs(q, config)) / statistics.median(runs(q, base))


def paired(q, config, base):
    return statistics.median(x / y for x, y in zip(runs(q, config), runs(q, base)))


present = set(RESULTS["queries"][QUERIES[0]]["configs"])
for config, base in PAIRS:
    if config not in present or base not in present:
        continue
    by_query = {q: ratio(q, config, base) for q in QUERIES}
    highest = sorted(by_query.items(), key=lambda kv: -kv[1])
    print(
        f"{config} / {base}: geomean {geomean(by_query.values()):.2f}x "
        f"(paired {geomean(paired(q, config, base) for q in QUERIES):.2f}x); "
        f"above 1.0x {sum(v > 1.0 for v in by_query.values())}, "
        f"above 1.2x {sum(v > 1.2 for v in by_query.values())}; highest "
        + ", ".join(f"Q{q} {v:.2f}x" for q, v in highest[:4])
        + f"; lowest Q{highest[-1][0]} {highest[-1][1]:.2f}x"
    )
    if config == "spark-parquet-local-again":
        far = max(highest[0][1], 1 / highest[-1][1])
        apart = sum(1 for v in by_query.values() if v > 1.1 or v < 1 / 1.1)
        print(f"  A/A band {1 / far:.2f}x-{far:.2f}x; {apart} queries more than 1.1x apart")
