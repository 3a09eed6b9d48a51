"""Executors read with no Python at all: on the standalone cluster of two workers, with the
executors' Python interpreter made unusable (``PYSPARK_PYTHON``, the interpreter pyspark
starts its workers with, and ``spark.pyspark.python`` name one that does not exist), TPC-H
queries (all 22 under ``make stress``) through ``tiered_hive`` under the default reader
(AUTO) return DuckDB's rows, cold and warm, with every tier on: Spark's reader reads every
split, the JVM computes every pushed partial aggregation and serves and stores every
fragment, and keeps each executor's block cache within its bound itself. Counts, not
timings: no Python task ran on any executor. A read that does need a Python worker there
(``hive.parquet.reader=PYTHON``) fails with one error naming the settings."""

from __future__ import annotations

import pickle

import pytest

from devservers.local_metastore import CLUSTER_TPCH_DATABASE, load_cluster_tpch
from raptorx_py import native
from raptorx_py.tpch import queries
from tests.integration.test_soft_affinity_cluster import drive
from tests.support.tpch_fixtures import query_difference, tpch_work_dir

pytest_plugins = ["tests.support.cluster_fixtures"]
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(native.jar_path() is None, reason="needs the native jar"),
]

#: An interpreter no executor has: a task that needs a Python worker fails to start one.
NO_PYTHON = "/nonexistent/raptorx-no-python/python3"
#: Each executor's block cache bound, below what the queries read.
CACHE_BOUND_MB = 1


#: The queries the default suite runs (a pushed grouped aggregation, Q1; a global one, Q6;
#: joins, Q3 and Q19, whose OR of ANDs keeps few rows); ``make stress`` runs all 22. Q12
#: and Q14 (joins with conditional aggregates) left for the stress run on 2026-12-02: the
#: suite ran over its 15 minutes.
QUERIES = (1, 3, 6, 19)


@pytest.mark.parametrize(
    "numbers",
    [QUERIES, pytest.param(queries.QUERY_NUMBERS, marks=pytest.mark.stress)],
    ids=["some", "all-22"],
)
def test_tpch_queries_need_no_python_on_the_executors(
    numbers, request, tmp_path, standalone_cluster, duckdb_expected, tpch_scale
):
    props = load_cluster_tpch(tpch_scale, tmp_path, work_dir=str(tpch_work_dir(request)))
    out = tmp_path / "rows.pickle"
    drive(
        standalone_cluster,
        props,
        runs=[],
        options={
            # each split where its caches are, so the warm pass finds the fragments it stored
            "hive.node-selection-strategy": "SOFT_AFFINITY",
            "cache.enabled": "true",
            "cache.base-directory": "raptorx-cache",
            # smaller than the tables: each executor's JVM keeps its cache within the bound
            # itself, with no Python store on its node to fold and evict (DirectoryRoom)
            "cache.alluxio.max-cache-size": f"{CACHE_BOUND_MB}MB",
            "fragment-result-cache.enabled": "true",
            "fragment-result-cache.base-directory": "raptorx-fragments",
            "hive.parquet.metadata-cache-enabled": "true",
        },
        timeout=540,
        spark_conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.pyspark.python": NO_PYTHON,
            "spark.locality.wait": "20s",
        },
        env={"PYSPARK_PYTHON": NO_PYTHON},
        tpch={
            "database": CLUSTER_TPCH_DATABASE,
            "scale": tpch_scale,
            "queries": list(numbers),
            "passes": ["cold", "warm"],
            "out": str(out),
        },
    )
    with open(out, "rb") as f:
        got = pickle.load(f)
    for name, run in got["passes"].items():
        for n in numbers:
            diff = query_difference(n, duckdb_expected[n], run["rows"][n])
            assert diff is None, f"{name} Q{n}: {diff}"
        c = run["counters"]
        assert c.get("reader.python_tasks", 0) == 0, (name, c)
        assert c.get("reader.python_splits", 0) == 0, (name, c)
        assert c["reader.spark_splits"] + c.get("fragment_cache.jvm_hits", 0) > 0, (name, c)
    cold, warm = (got["passes"][p]["counters"] for p in ("cold", "warm"))
    # the JVM computed the pushed aggregations and stored them; the warm pass is served them
    assert cold["aggregation.jvm_splits"] > 0 and cold["fragment_cache.jvm_stores"] > 0, cold
    assert warm.get("fragment_cache.jvm_hits", 0) > 0, warm
    # the bound kept without Python: room made, blocks evicted, and still blocks stored
    both = {k: cold.get(k, 0) + warm.get(k, 0) for k in set(cold) | set(warm)}
    print({k: v for k, v in sorted(both.items()) if k.startswith("block_cache.jvm")})
    assert both["block_cache.jvm_room_made"] > 0 and both["block_cache.jvm_evicted"] > 0, both
    assert both["block_cache.jvm_published"] > both["block_cache.jvm_evicted"], both
    # the Python reader needs the Python the executors lack: one clear error
    err = drive(
        standalone_cluster,
        props,
        runs=[{"options": {"hive.parquet.reader": "PYTHON"}}],
        options={},
        table=f"{CLUSTER_TPCH_DATABASE}.nation",
        column="n_nationkey",
        spark_conf={"spark.pyspark.python": NO_PYTHON},
        env={"PYSPARK_PYTHON": NO_PYTHON},
        failing=True,
    )
    assert "hive.parquet.reader=AUTO" in err and NO_PYTHON in err, err[-4000:]
    assert "spark.pyspark.python" in err, err[-4000:]
