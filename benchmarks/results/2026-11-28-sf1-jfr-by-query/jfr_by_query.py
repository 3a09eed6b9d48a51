"""Where the executors' task threads spend their time, per query: JFR execution samples of
Spark's task threads ("Executor task launch worker-N"), each put in one category by the
first frame, from the leaf down, that names one, and each given to the query whose
timed run (results.json's started_ms and seconds) holds its time; warm-ups are left out.
Run the suite with one configuration for the recording to be that configuration's.
Usage: jfr_by_query.py recording.jfr results.json"""

import collections
import datetime as dt
import json
import subprocess
import sys

# Frames are named "org/apache/spark/...Class.method". The first frame from the leaf down
# that names a category decides; a frame of no category (java.io, java.lang, ...) is walked
# past. Within one frame, the list's order decides. Spark compiles a stage's operators into
# one generated method: what they do inline (a join's probe, a filter, a projection) is
# counted under "generated code and rows", only calls into a named operator's class under
# that operator.
CATEGORIES = [
    ("fragment hits", ("FragmentHits", "/arrow/")),
    ("Parquet decode", ("/parquet/", "ParquetDictionary", "Vectorized")),
    ("cache / file reads", ("raptorx", "hadoop/fs", "FileInputStream", "FileChannel")),
    ("join", ("/joins/", "HashedRelation", "LongToUnsafeRowMap", "bhj_", "smj_")),
    ("aggregate", ("hashAgg", "/aggregate/", "BytesToBytesMap", "agg_")),
    ("sort", ("Sorter", "TimSort", "sort_", "RadixSort")),
    ("shuffle", ("/shuffle/", "/storage/", "/serializer/", "/io/compress", "lz4", "zstd")),
    (
        "generated code and rows",
        (
            "GeneratedClass",
            "UnsafeRow",
            "ColumnarToRow",
            "UTF8String",
            "/types/Decimal",
            "catalyst/expressions",
        ),
    ),
]


def category(names):
    for name in names:
        for label, keys in CATEGORIES:
            if any(k in name for k in keys):
                return label
    return "other"


def windows(results):
    """(query, start, end) in epoch ms of every timed run of the recorded configuration."""
    out = []
    for q, data in json.load(open(results))["queries"].items():
        for config in data["configs"].values():
            for run in config["runs"]:
                out.append((int(q), run["started_ms"], run["started_ms"] + run["seconds"] * 1000))
    return out


COMMAND = ["jfr", "print", "--json", "--stack-depth", "96", "--events", "jdk.ExecutionSample"]
events = json.loads(
    subprocess.run([*COMMAND, sys.argv[1]], capture_output=True, text=True, check=True).stdout
)
per = collections.defaultdict(collections.Counter)
WINDOWS = windows(sys.argv[2])
for event in events["recording"]["events"]:
    values = event["values"]
    if "Executor task launch" not in (values["sampledThread"].get("javaName") or ""):
        continue
    when = dt.datetime.fromisoformat(values["startTime"].replace("Z", "+00:00")).timestamp() * 1000
    frames = (values.get("stackTrace") or {}).get("frames", [])
    names = [f"{f['method']['type']['name']}.{f['method']['name']}" for f in frames]
    for q, start, end in WINDOWS:
        if start <= when < end:
            per[q][category(names)] += 1
            break
labels = [c for c, _ in CATEGORIES] + ["other"]
print("| query | samples | " + " | ".join(labels) + " |")
print("|---|---:|" + "---:|" * len(labels))
total = collections.Counter()
for q in sorted(per):
    n = sum(per[q].values())
    total.update(per[q])
    print(f"| Q{q} | {n:,} | " + " | ".join(f"{100 * per[q][c] / n:.0f}%" for c in labels) + " |")
n = sum(total.values())
print(f"| all | {n:,} | " + " | ".join(f"{100 * total[c] / n:.0f}%" for c in labels) + " |")
