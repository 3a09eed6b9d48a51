"""tpch_suite with Spark's optimizer rule timings per configuration (RuleExecutor metrics)."""

import collections
import re
import sys

from benchmarks import tpch_suite

totals = collections.defaultdict(collections.Counter)
runs = collections.Counter()
orig = tpch_suite.Bench.run_once


def run_once(self, sql, config, ctx, endpoint, sink):
    jvm = ctx.spark._jvm
    RE = jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor
    RE.resetMetrics()
    out = orig(self, sql, config, ctx, endpoint, sink)
    text = RE.dumpTimeSpent()
    runs[config.name] += 1
    for line in text.splitlines():
        m = re.match(r"\s*(\S+)\s+(\d+)\s*/\s*(\d+)\s+(\d+)\s*/\s*(\d+)", line)
        if m:
            totals[config.name][m.group(1).split(".")[-1]] += int(m.group(3))
    return out


tpch_suite.Bench.run_once = run_once
rc = tpch_suite.main(sys.argv[1:])
for cfg, c in totals.items():
    print("==", cfg, "runs", runs[cfg], "total ms/run", round(sum(c.values()) / 1e6 / runs[cfg], 1))
    for k, v in c.most_common(15):
        print(f"  {v / 1e6 / runs[cfg]:8.2f} ms/run  {k}")
sys.exit(rc)
