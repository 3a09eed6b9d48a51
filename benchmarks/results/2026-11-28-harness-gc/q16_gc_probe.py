import gc
import sys
import time

from pyspark.sql import SparkSession

from raptorx_py.tpch import queries

spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.driver.memory", "4g")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
queries.register_views(spark, queries.parquet_reader(spark, "/work/main/work-data/tpch/sf1"))
sql = (
    queries.query_text(16, scale=1)
    if "scale" in queries.query_text.__code__.co_varnames
    else queries.query_text(16)
)
state = {}


def cb(phase, info):
    if phase == "start":
        state["t"] = time.perf_counter()
    else:
        state.setdefault("gc", []).append((info["generation"], time.perf_counter() - state["t"]))


gc.callbacks.append(cb)
ballast = [dict(a=i, b=str(i)) for i in range(int(sys.argv[1]))]  # a harness-sized heap
for i in range(20):
    state["gc"] = []
    t0 = time.perf_counter()
    rows = spark.sql(sql).collect()
    s = time.perf_counter() - t0
    g2 = [round(d * 1000, 1) for g, d in state["gc"] if g == 2]
    print(
        i,
        round(s * 1000),
        len(rows),
        "gen2 ms",
        g2,
        "all gc ms",
        round(sum(d for _, d in state["gc"]) * 1000, 1),
        flush=True,
    )
print("objects", len(gc.get_objects()))
