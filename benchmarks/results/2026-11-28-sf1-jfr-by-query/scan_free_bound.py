"""What warm + fragments would take if reading and decoding cost nothing, per query: its
ratio to Spark's reader on local files (from a tpch_suite results.json with both) times the
share of its task threads' samples not spent in fragment hits, Parquet decode, or cache and
file reads (jfr_by_query.py's table). An estimate: it assumes the wall time shrinks as the
task time does (the driver's share and idle cores ignored).
Usage: scan_free_bound.py by_query.md results.json"""

import json
import math
import re
import statistics
import sys

share = {}
for line in open(sys.argv[1]):
    m = re.match(r"\| Q(\d+) \| [\d,]+ \| (\d+)% \| (\d+)% \| (\d+)% \|", line)
    if m:
        share[m.group(1)] = sum(int(m.group(i)) for i in (2, 3, 4)) / 100
results = json.load(open(sys.argv[2]))


def median(q, config):
    return statistics.median(r["seconds"] for r in results["queries"][q]["configs"][config]["runs"])


ratios, bounds = [], []
for q in results["queries"]:
    ratio = median(q, "tiered-hive-s3-warm-fragments") / median(q, "spark-parquet-local")
    ratios.append(ratio)
    bounds.append(ratio * (1 - share[q]))
    print(
        f"Q{q}: {ratio:.2f}x, reading {share[q]:.0%} of its task samples, {bounds[-1]:.2f}x without"
    )


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


print(f"geomean {geomean(ratios):.2f}x; with reading and decoding free {geomean(bounds):.2f}x")
