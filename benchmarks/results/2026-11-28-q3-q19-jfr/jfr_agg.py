"""Execution samples (JFR) of Spark's task threads, split by whether the stack goes through
raptorx's reader (warm tiers) or FileScanRDD (Spark's reader): the leading frames of each.
Usage: jfr_agg.py recording.jfr"""

import collections
import json
import subprocess
import sys

COMMAND = ["jfr", "print", "--json", "--stack-depth", "96", "--events", "jdk.ExecutionSample"]
out = subprocess.run([*COMMAND, sys.argv[1]], capture_output=True, text=True, check=True).stdout
own = collections.defaultdict(collections.Counter)
within = collections.defaultdict(collections.Counter)
total = collections.Counter()
for event in json.loads(out)["recording"]["events"]:
    values = event["values"]
    if "Executor task launch" not in (values["sampledThread"].get("javaName") or ""):
        continue
    frames = (values.get("stackTrace") or {}).get("frames", [])
    names = [f"{f['method']['type']['name']}.{f['method']['name']}" for f in frames]
    joined = " ".join(names)
    if "raptorx" in joined or "DataSourceRDD" in joined:
        path = "warm"
    elif "FileScanRDD" in joined:
        path = "local"
    else:
        path = "other"
    total[path] += 1
    if names:
        own[path][names[0]] += 1
    for name in set(names):
        within[path][name] += 1
KEYS = ("raptorx", "parquet", "GeneratedClass", "Predicate", "ColumnVector", "hadoop.fs")
for path, n in total.items():
    print(f"== {path}: {n} samples\n  self:")
    for name, c in own[path].most_common(25):
        print(f"    {c:6d} {100 * c / n:5.1f}% {name}")
    print("  inclusive (raptorx / parquet / codegen):")
    for name, c in within[path].most_common(400):
        if any(k in name for k in KEYS):
            print(f"    {c:6d} {100 * c / n:5.1f}% {name}")
