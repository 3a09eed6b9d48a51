"""Issue 50's point 5 from two tpch_suite runs of the same command, one with
`--idle-seconds 70 --idle-configs tiered-hive-s3-warm-fragments` (paused/) and one
without (no-pause/): warm + fragments against Spark's reader on local files after a pause,
the A/A band, each configuration paused against not, and the Python counts.
Usage: analyze.py paused/results.json no-pause/results.json"""

import json
import math
import statistics
import sys

PAUSED = json.load(open(sys.argv[1]))
UNPAUSED = json.load(open(sys.argv[2]))
BASE, TWIN, OURS = (
    "spark-parquet-local",
    "spark-parquet-local-again",
    "tiered-hive-s3-warm-fragments",
)


def geomean(values):
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


def median(results, q, config):
    return statistics.median(x["seconds"] for x in results["queries"][q]["configs"][config]["runs"])


def band(results):
    """The A/A band: as far from 1.0x, either way, as the twin's farthest query."""
    qs = list(results["queries"])
    ratios = [median(results, q, TWIN) / median(results, q, BASE) for q in qs]
    far = max(max(ratios), 1 / min(ratios))
    return geomean(ratios), 1 / far, far


for name, results in (("after a 70 s pause", PAUSED), ("without a pause", UNPAUSED)):
    qs = list(results["queries"])
    ours = {q: median(results, q, OURS) / median(results, q, BASE) for q in qs}
    aa, lo, hi = band(results)
    above = sorted(((v, q) for q, v in ours.items() if v > hi), reverse=True)
    top = sorted(((v, q) for q, v in ours.items()), reverse=True)[:4]
    print(
        f"{name}: warm + fragments / local {geomean(ours.values()):.2f}x; A/A {aa:.2f}x, "
        f"band {lo:.2f}x-{hi:.2f}x; above the band: "
        + (", ".join(f"Q{q} {v:.2f}x" for v, q in above) or "none")
        + "; highest "
        + ", ".join(f"Q{q} {v:.2f}x" for v, q in top)
    )
    starts = tasks = 0
    for q in qs:
        for entry in results["queries"][q]["configs"].values():
            for run in entry["runs"]:
                tasks += run.get("python_tasks", 0)
                starts += run.get("python_worker_starts", 0)
    print(f"  Python tasks {tasks}, Python worker starts {starts} over every timed run")

qs = [q for q in PAUSED["queries"] if q in UNPAUSED["queries"]]
_, lo, hi = band(PAUSED)
for config in (BASE, TWIN, OURS):
    by_query = {q: median(PAUSED, q, config) / median(UNPAUSED, q, config) for q in qs}
    above = sorted(((v, q) for q, v in by_query.items() if v > hi), reverse=True)
    print(
        f"{config}: paused / not paused {geomean(by_query.values()):.2f}x; above the band "
        f"{hi:.2f}x: " + (", ".join(f"Q{q} {v:.2f}x" for v, q in above) or "none")
    )
