"""Where each query's wall time goes, per configuration, from a tpch_suite results.json:
the time at least one stage that reads a table (input_records > 0) was running ("scan
stages"), the time only stages that read shuffles or broadcasts ran ("other stages"), and
the rest (driver: parsing, planning, scheduling gaps). Medians over the timed runs.
Usage: time_split.py results.json [config ...]"""

import json
import math
import statistics
import sys

RESULTS = json.load(open(sys.argv[1]))
CONFIGS = sys.argv[2:] or [
    "spark-parquet-local",
    "tiered-hive-s3-warm",
    "tiered-hive-s3-warm-fragments",
    "spark-cache-table",
]


def covered(intervals):
    total, end = 0, -math.inf
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def split(run):
    wall = run["seconds"] * 1000
    stages = [
        s for s in run.get("stages", []) if s["status"] == "COMPLETE" and s["start_ms"] is not None
    ]
    scan = [(s["start_ms"], s["end_ms"]) for s in stages if s["input_records"] > 0]
    every = [(s["start_ms"], s["end_ms"]) for s in stages]
    scan_ms = covered(scan)
    any_ms = covered(every)
    return wall, scan_ms, any_ms - scan_ms, wall - any_ms


def med(values):
    return statistics.median(values)


print(
    "| query | "
    + " | ".join(f"{c} wall / scan stages / other stages / driver (ms)" for c in CONFIGS)
    + " |"
)
print("|---|" + "---:|" * len(CONFIGS))
totals = {c: [0, 0, 0, 0] for c in CONFIGS}
for q, data in RESULTS["queries"].items():
    cells = []
    for c in CONFIGS:
        runs = data["configs"].get(c, {}).get("runs", [])
        if not runs:
            cells.append("-")
            continue
        parts = [med(x) for x in zip(*(split(r) for r in runs))]
        for i, v in enumerate(parts):
            totals[c][i] += v
        cells.append(" / ".join(f"{v:,.0f}" for v in parts))
    print(f"| Q{q} | " + " | ".join(cells) + " |")
print("| sum | " + " | ".join(" / ".join(f"{v:,.0f}" for v in totals[c]) for c in CONFIGS) + " |")

# The floor: each query's time outside its table-reading stages in the baseline, as a
# fraction of its wall time: what a configuration that made those stages free would take.
base = CONFIGS[0]
fractions = {}
for q, data in RESULTS["queries"].items():
    parts = [med(x) for x in zip(*(split(r) for r in data["configs"][base]["runs"]))]
    fractions[q] = (parts[0] - parts[1]) / parts[0]
g = math.exp(sum(math.log(v) for v in fractions.values()) / len(fractions))
print(
    f"\n{base}: time outside table-reading stages, geomean {g:.2f}x of wall; per query "
    + ", ".join(f"Q{q} {v:.2f}" for q, v in sorted(fractions.items(), key=lambda kv: -kv[1]))
)
