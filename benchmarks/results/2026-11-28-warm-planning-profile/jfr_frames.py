"""Inclusive counts of frames in JFR execution samples whose stack holds FILTER."""

import collections
import json
import subprocess
import sys

path, filt = sys.argv[1], sys.argv[2]
out = subprocess.run(
    ["jfr", "print", "--json", "--stack-depth", "200", "--events", "jdk.ExecutionSample", path],
    capture_output=True,
    text=True,
).stdout
events = json.loads(out)["recording"]["events"]
inc = collections.Counter()
top = collections.Counter()
n = 0
for e in events:
    frames = [
        f["method"]["type"]["name"].split(".")[-1] + "." + f["method"]["name"]
        for f in e["values"]["stackTrace"]["frames"]
    ]
    if not any(filt in f for f in frames):
        continue
    n += 1
    for f in set(frames):
        inc[f] += 1
    top[frames[0]] += 1
print("samples", n, "of", len(events))
for k, v in inc.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 60):
    print(v, k)
print("--- top")
for k, v in top.most_common(20):
    print(v, k)
