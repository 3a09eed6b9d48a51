"""Soft affinity on a real Spark standalone cluster (a master and two workers on loopback,
each its own host, ``tests/support/cluster_fixtures.py``), each executor with its own caches (a
relative ``cache.base-directory``: under its own working directory; or the node's,
``standalone_cluster.NODE_CACHE``, shared by the executors of one worker).

A small table read cold then warm with SOFT_AFFINITY: at least 90% of tasks run on their
preferred executor (``spark.locality.wait`` is raised so a loaded CI machine's slow
worker start does not make Spark give up waiting), the warm run is served by the block cache,
and the executors the tasks preferred are exactly the rendezvous choice over the live
executors, of which losing one moves only its own files; an executor replaced on its host
keeps the host's files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from devservers.local_metastore import (
    CLUSTER_TPCH_DATABASE,
    load_cluster_tpch,
    local_metastore_properties,
    register_table,
)
from raptorx_py import native
from raptorx_py.scheduling.affinity import assignment, parse_executors
from tests.support.jvm_options import TEST_JVM_OPTIONS, spark_jvm_conf

pytest_plugins = ["tests.support.cluster_fixtures"]
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(native.jar_path() is None, reason="needs the native jar"),
]

FILES, ROWS = 12, 5000
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def small_table(tmp_path_factory):
    root = tmp_path_factory.mktemp("affinity")
    props = local_metastore_properties(root)
    data = root / "data"
    data.mkdir()
    for i in range(FILES):
        pq.write_table(
            pa.table({"x": pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64())}),
            data / f"part-{i:03d}.parquet",
        )
    register_table(props, "aff.t", f"file://{data}")
    return props, sorted(f"file://{p}" for p in data.glob("*.parquet"))


def drive(cluster, props, runs, timeout=240, venv=None, work=None, failing=False, env=None, **spec):
    """Run ``devservers.cluster_driver`` on ``cluster``; with ``venv`` (a
    ``tests.support.wheel_fixtures.WheelVenv``), a copy of it run by the wheel's interpreter from
    ``work``, outside the checkout, so that the application is the installed package's. Its
    JSON line; with ``failing``, the driver must fail, and its standard error is returned.
    ``env``: variables set for the driver (and so for the executors' Python workers)."""
    config = {
        "master": cluster.master_url,
        "executors": 2,
        "properties": props,
        "table": "aff.t",
        "column": "x",
        "runs": runs,
        "spark_conf": {"spark.locality.wait": "20s"},
        **spec,
    }
    # C1 only and the serial collector for the driver and executors (jvm_options.py)
    config["spark_conf"] = {**spark_jvm_conf(), **config["spark_conf"]}
    arg = json.dumps(config)
    if venv is None:
        done = subprocess.run(
            [sys.executable, "-m", "devservers.cluster_driver", arg],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
    else:
        driver = work / "cluster_driver.py"
        shutil.copyfile(ROOT / "devservers" / "cluster_driver.py", driver)
        done = venv.run([venv.python, str(driver), arg], cwd=work, timeout=timeout)
    if failing:
        assert done.returncode != 0, done.stdout[-4000:]
        return done.stderr
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


#: Per run of ``two_executor_app``: the block cache's reads (relative directories: each
#: executor's own working directory, so its own caches), the last one the same DataFrame
#: again; then the fragment result cache's, in a directory of each executor's own.
BLOCK_RUNS = [{}, {}, {"reuse": True}]
BLOCK_OPTIONS = {
    "cache.base-directory": "raptorx-cache",
    "cache.enabled": "true",
    "hive.parquet.metadata-cache-enabled": "true",
}
FRAGMENT_RUNS = 2
FRAGMENT_OPTIONS = {
    "fragment-result-cache.enabled": "true",
    "fragment-result-cache.base-directory": "raptorx-fragments",
}


@pytest.fixture(scope="module")
def two_executor_app(standalone_cluster, small_table, tmp_path_factory, wheel_venv):
    """One application of the installed wheel (``tests/support/wheel_fixtures.py``: a fresh
    virtualenv, run from a directory outside the checkout, which is on no import path) on
    the module's cluster, two 1-core executors (one per host) and ``spark.locality.wait``
    20 s: the block cache's runs (``BLOCK_RUNS``, each executor its own cache) then the
    fragment result cache's (``FRAGMENT_RUNS``), each run's options its own, so the two
    tests of that shape share one driver and its executors' starts. Their caches are
    different directories and tiers: the block cache's runs store no fragment (that tier
    is off for them), the fragment runs read no block cache (off for them). Executors
    report to a CSV sink (``spark.metrics.conf.executor.sink.csv``, a row a second)."""
    props, _ = small_table
    work = tmp_path_factory.mktemp("two-executor-app")
    csv_dir = work / "executor-metrics"
    csv_dir.mkdir()
    sink = "spark.metrics.conf.executor.sink.csv"
    out = drive(
        standalone_cluster,
        props,
        runs=[{**r, "options": BLOCK_OPTIONS} for r in BLOCK_RUNS]
        + [{"options": FRAGMENT_OPTIONS}] * FRAGMENT_RUNS,
        options={"hive.node-selection-strategy": "SOFT_AFFINITY", "hive.min-split-count": "4"},
        timeout=360,
        csv_dir=str(csv_dir),
        venv=wheel_venv,
        work=work,
        where_imported=True,
        spark_conf={
            "spark.locality.wait": "20s",
            f"{sink}.class": "org.apache.spark.metrics.sink.CsvSink",
            f"{sink}.period": "1",
            f"{sink}.unit": "seconds",
            f"{sink}.directory": str(csv_dir),
        },
    )
    print(json.dumps(out, indent=1, sort_keys=True))  # the figures, for -s runs
    return out


def test_soft_affinity_reads_each_file_where_its_cache_is(two_executor_app, small_table):
    """The block cache's runs of ``two_executor_app``, each executor with its own cache."""
    _, files = small_table
    out = two_executor_app
    executors = parse_executors(",".join(out["executors"]))
    assert len(executors) == 2
    assert {e.host for e in executors} == {"127.0.0.1", "127.0.0.2"}  # a host per worker
    expected_sum = FILES * ROWS * (FILES * ROWS - 1) // 2
    runs = out["runs"][: len(BLOCK_RUNS)]
    cold, warm, again = (r["counters"] for r in runs)
    assert [r["result"] for r in runs] == [expected_sum] * 3
    # The same DataFrame read again, the executors unchanged: the source made with them is
    # the table's, so the scan's planning is one planner callback (no creation, no worker).
    assert again["planning.driver_calls"] == 1 and again.get("planning.worker_calls", 0) == 0
    for run in (cold, warm):
        placed = sum(
            run.get(f"affinity.{k}", 0) for k in ("preferred", "preferred_host", "fallback")
        )
        # The scan was placed over both live executors (once failed under load on two test
        # workers, 2026-11-28: every task preferred executor 0; this says where to look).
        assert run["planner.executors_placed_over"] == 2, run
        assert placed == run["planner.tasks_with_preference"] >= 2, run
        assert run.get("affinity.preferred", 0) >= 0.9 * placed, run
        # The executors reach the planning from the driver's planner, not from a Python
        # worker: load()'s source, the scan's source with the executors, the scan's plan.
        assert run.get("planning.worker_calls", 0) == 0, run
        assert run["planning.driver_calls"] == 3 and run["planning.scans"] == 1, run
    # The locations tasks preferred are the rendezvous choice of their files.
    owners = assignment(files, executors)
    wanted = {e.location for e in owners.values()}
    seen = {
        k.split(".", 2)[2]
        for k in warm
        if k.startswith(("affinity.preferred.", "affinity.fallback."))
    }
    assert seen == wanted == {e.location for e in executors}
    # Warm: the block cache serves the reads (each file was cached where it runs again).
    hits, misses = warm.get("block_cache.hits", 0), warm.get("block_cache.misses", 0)
    assert cold.get("block_cache.misses", 0) > 0 and hits >= 0.9 * (hits + misses) > 0, warm
    # Losing an executor moves only the files it owned.
    lost = executors[0]
    after = assignment(files, [e for e in executors if e != lost])
    assert {f for f in files if after[f] != owners[f]} == {f for f in files if owners[f] == lost}


def test_fragment_hits_are_served_by_each_executors_jvm(two_executor_app, wheel_venv):
    """With the fragment result cache in each executor's own directory, a warm run
    is served by the executors' JVMs from their own entries (counted by them in the metrics
    sink); only a task that ran away from its preferred host goes to Python, which
    neither reads nor fills that executor's cache: the fragment runs of ``two_executor_app``.

    The application is the INSTALLED wheel's (``tests/support/wheel_fixtures.py``: a fresh
    virtualenv, run from a directory outside the checkout, which is on no import path): the
    executors receive the jar inside the package through ``spark.jars`` and their Python
    workers import the installed raptorx_py."""
    out = two_executor_app
    installed = str(wheel_venv.root)
    assert out["package"].startswith(installed), out["package"]
    assert out["jar"].startswith(installed) and out["jar"] in out["spark_jars"].split(","), out
    assert out["executor_packages"] == [out["package"]], out["executor_packages"]
    expected_sum = FILES * ROWS * (FILES * ROWS - 1) // 2
    runs = out["runs"][len(BLOCK_RUNS) :]
    assert [r["result"] for r in runs] == [expected_sum] * FRAGMENT_RUNS
    cold, warm = (r["counters"] for r in runs)
    assert cold["fragment_cache.stores"] >= 0.9 * FILES, cold
    fallback = warm.get("affinity.fallback", 0)
    assert warm["fragment_cache.jvm_hits"] == warm["fragment_cache.hits"] >= 0.9 * FILES, warm
    assert warm.get("reader.python_tasks", 0) <= fallback, warm
    assert warm.get("reader.fragments_computed", 0) <= FILES - warm["fragment_cache.jvm_hits"]
    # Each executor's Python workers published their totals for its metrics plugin, in a
    # directory of the executor's own; the driver's planner in the driver's.
    executor_ids = {e.split("/")[-1] for e in out["executors"]}
    assert {f"executor-{i}" for i in executor_ids} <= set(out["published"]), out["published"]
    assert out["published"].get("driver", 0) >= 1, out["published"]
    # ... and each executor's plugin shows what the executor counted (here the hits its JVM
    # served), through the CSV sink the executors were given.
    shown, counted = out["csv"]["shown"], out["csv"]["counted"]
    assert shown == counted and set(shown) == executor_ids, out["csv"]
    assert (
        sum(shown.values())
        == cold.get("fragment_cache.jvm_hits", 0) + warm["fragment_cache.jvm_hits"]
    )
    # Every task's placement is counted, by the JVM when it served the task whole.
    placed = sum(warm.get(f"affinity.{k}", 0) for k in ("preferred", "preferred_host", "fallback"))
    assert placed == warm["planner.tasks_with_preference"] > 0, warm


@pytest.mark.stress
def test_a_replaced_executor_keeps_its_host_s_files_and_a_joining_worker_takes_its_share(
    tmp_path, small_table
):
    """Soft affinity on one application of a two-worker cluster of its own (about 165 s; the
    default suite replaces an executor on the module's cluster instead, in
    ``test_a_task_on_a_sibling_executor_of_its_host_uses_the_host_s_caches``) with the node's
    caches:

    - an executor killed and replaced by its worker (a new id on the same host) keeps the
      host's files: the next read is served wholly by the node's block cache;
    - a third worker joining mid-application takes the files for which it is now the
      highest, and only those move (counted); nothing moves between the first two, and the
      moved files are the next read's only block-cache misses."""
    from devservers.standalone_cluster import NODE_CACHE, StandaloneCluster, worker_host

    props, files = small_table
    cluster = StandaloneCluster(
        tmp_path / "cluster", workers=2, daemon_java_options=TEST_JVM_OPTIONS
    )
    joined = tmp_path / "join-now"
    try:
        cluster.start()
        arg = json.dumps(
            {
                "master": cluster.master_url,
                "executors": 2,
                "max_executors": 3,
                "properties": props,
                "table": "aff.t",
                "column": "x",
                "options": {
                    "hive.node-selection-strategy": "SOFT_AFFINITY",
                    "cache.base-directory": NODE_CACHE,
                    "cache.enabled": "true",
                    "hive.min-split-count": "6",
                },
                "runs": [
                    {},
                    {"replace_host": worker_host(1)},
                    {"before": str(joined), "executors": 3},
                ],
                "spark_conf": {"spark.locality.wait": "20s", **spark_jvm_conf()},
            }
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "devservers.cluster_driver", arg],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 240
            while not joined.exists():
                assert proc.poll() is None, proc.communicate()[1][-4000:]
                assert time.monotonic() < deadline, "the third run never started"
                time.sleep(0.05)  # polling a condition, bounded by the deadline
            cluster.start_worker(2)
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, stderr[-4000:]
    finally:
        cluster.stop()
    out = json.loads(stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=1, sort_keys=True))  # the figures, for -s runs
    expected_sum = FILES * ROWS * (FILES * ROWS - 1) // 2
    assert [r["result"] for r in out["runs"]] == [expected_sum] * 3
    first, replaced, grown = (parse_executors(",".join(r["executors"])) for r in out["runs"])
    assert [e.host for e in first] == [e.host for e in replaced] == [worker_host(0), worker_host(1)]
    assert first[0] == replaced[0] and first[1].id != replaced[1].id  # a new id, same host
    # Replaced: every file on the same host as before, all read from the node's cache.
    owners, owners_replaced = assignment(files, first), assignment(files, replaced)
    assert all(owners[f].host == owners_replaced[f].host for f in files)
    warm = out["runs"][1]["counters"]
    assert warm.get("affinity.fallback", 0) == 0, warm
    assert warm.get("block_cache.misses", 0) == 0 and warm["block_cache.hits"] >= FILES, warm
    # Joined: only the files the new host now wins move, about a third, none between the
    # first two hosts.
    assert len(grown) == 3 and set(replaced) < set(grown)
    (new,) = set(grown) - set(replaced)
    owners_grown = assignment(files, grown)
    moved = {f for f in files if owners_grown[f] != owners_replaced[f]}
    assert moved == {f for f in files if owners_grown[f] == new}
    assert 0 < len(moved) < FILES, moved  # 1/3 expected; the unit tests count 4,000 paths
    last = out["runs"][2]["counters"]
    assert {k.split(".", 2)[2] for k in last if k.startswith("affinity.preferred.")} == {
        e.location for e in owners_grown.values()
    }
    if not last.get("affinity.fallback"):
        assert last.get("block_cache.misses", 0) == len(moved), last
    assert last.get("block_cache.hits", 0) >= 0.9 * (FILES - len(moved)), last


def test_a_task_on_a_sibling_executor_of_its_host_uses_the_host_s_caches(
    standalone_cluster, small_table
):
    """Two executors on one host (the module cluster's 2-core worker) and one on another, the
    node's caches shared by a host's executors (the application's own: ``NODE_CACHE`` is under
    its directory on each worker). Spark waits for a task's host but not for its executor
    (``spark.locality.wait.process=0``), so a task may run on its preferred executor or on
    the sibling: either way it reads the host's caches (a warm read makes no block-cache
    miss) and none runs on the other host.

    The last read follows the other host's executor killed and replaced by its worker (a new
    id on the same host): it keeps the host's files, the read is again wholly warm."""
    from devservers.standalone_cluster import NODE_CACHE, worker_host

    props, files = small_table
    out = drive(
        standalone_cluster,
        props,
        runs=[{}, {}, {"replace_host": worker_host(1)}],
        executors=3,
        options={
            "hive.node-selection-strategy": "SOFT_AFFINITY",
            "cache.base-directory": NODE_CACHE,
            "cache.enabled": "true",
            "hive.min-split-count": "6",
        },
        spark_conf={"spark.locality.wait.process": "0", "spark.locality.wait.node": "60s"},
    )
    print(json.dumps(out, indent=1, sort_keys=True))  # the figures, for -s runs
    expected_sum = FILES * ROWS * (FILES * ROWS - 1) // 2
    assert [r["result"] for r in out["runs"]] == [expected_sum] * 3
    executors = parse_executors(",".join(out["executors"]))
    assert sorted(e.host for e in executors) == [worker_host(0), worker_host(0), worker_host(1)]
    before, replaced = (parse_executors(",".join(r["executors"])) for r in out["runs"][1:])
    kept = {e for e in before if e.host == worker_host(0)}
    assert kept < set(replaced) and len(replaced) == 3  # host 0's two unchanged
    ((old,), (new,)) = (set(before) - kept, set(replaced) - kept)
    assert old.host == new.host == worker_host(1) and old.id != new.id  # a new id, same host
    for run in (r["counters"] for r in out["runs"][1:]):  # warm: the host's cache serves
        placed = run.get("affinity.preferred", 0) + run.get("affinity.preferred_host", 0)
        assert placed == run["planner.tasks_with_preference"], run
        assert run.get("affinity.fallback", 0) == 0, run
        assert run.get("block_cache.misses", 0) == 0 and run["block_cache.hits"] >= FILES, run
    print(  # how many ran on a sibling (Spark's choice, not asserted)
        [r["counters"].get("affinity.preferred_host", 0) for r in out["runs"]]
    )


@pytest.mark.stress
def test_a_worker_killed_mid_query_moves_only_its_own_files(tmp_path, small_table):
    """Three workers; a worker's process group is killed as a read starts: the read returns
    the right sum, the next plans over the two survivors, and only the lost executor's files
    changed owner: they are the next read's only block-cache misses."""
    from devservers.standalone_cluster import StandaloneCluster

    props, files = small_table
    cluster = StandaloneCluster(
        tmp_path / "cluster", workers=3, daemon_java_options=TEST_JVM_OPTIONS
    )
    mark = tmp_path / "mid-query"
    try:
        cluster.start()
        arg = json.dumps(
            {
                "master": cluster.master_url,
                "executors": 3,
                "properties": props,
                "table": "aff.t",
                "column": "x",
                "options": {
                    "hive.node-selection-strategy": "SOFT_AFFINITY",
                    "cache.base-directory": "raptorx-cache",
                    "cache.enabled": "true",
                    "hive.min-split-count": "6",
                },
                "runs": [{}, {"mark": str(mark)}, {"executors": 2}],
                "spark_conf": {"spark.locality.wait": "20s", **spark_jvm_conf()},
            }
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "devservers.cluster_driver", arg],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 240
            while not mark.exists():
                assert proc.poll() is None, proc.communicate()[1][-4000:]
                assert time.monotonic() < deadline, "the second read never started"
                time.sleep(0.05)  # polling a condition, bounded by the deadline
            cluster.kill(cluster.worker_procs[0])
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, stderr[-4000:]
    finally:
        cluster.stop()
    out = json.loads(stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=1, sort_keys=True))  # the figures, for -s runs
    expected_sum = FILES * ROWS * (FILES * ROWS - 1) // 2
    assert [r["result"] for r in out["runs"]] == [expected_sum] * 3
    before = parse_executors(",".join(out["runs"][0]["executors"]))
    after = parse_executors(",".join(out["runs"][2]["executors"]))
    assert len(before) == 3 and len(after) == 2 and set(after) < set(before)
    (lost,) = set(before) - set(after)
    owners, new_owners = assignment(files, before), assignment(files, after)
    moved = {f for f in files if new_owners[f] != owners[f]}
    assert moved == {f for f in files if owners[f] == lost}
    last = out["runs"][2]["counters"]
    assert {k.split(".", 2)[2] for k in last if k.startswith("affinity.preferred.")} == {
        e.location for e in new_owners.values()
    }
    # Unmoved files are warm where they run; the moved ones were never cached by a
    # fallback, so they are the only misses.
    assert last.get("block_cache.misses", 0) <= len(moved)
    if not last.get("affinity.fallback"):  # every file read where it now belongs: exactly
        # the moved files miss (a fallback in the killed read would have cached some).
        assert last.get("block_cache.misses", 0) == len(moved), last
    assert last.get("block_cache.hits", 0) >= 0.9 * (FILES - len(moved)), last


@pytest.mark.stress
def test_all_22_tpch_queries_on_the_cluster_equal_duckdb(
    request, tmp_path, standalone_cluster, tpch_sf001_dir, tpch_scale
):
    """TPC-H SF 0.01 from a local warehouse, every query through tiered_hive with
    SOFT_AFFINITY on the two-worker cluster, each result equal to DuckDB's."""
    import pickle

    from raptorx_py.tpch import oracle, queries
    from tests.support.tpch_fixtures import query_difference, tpch_work_dir

    props = load_cluster_tpch(tpch_scale, tmp_path, work_dir=str(tpch_work_dir(request)))
    out = tmp_path / "rows.pickle"
    drive(
        standalone_cluster,
        props,
        runs=[],
        options={
            "hive.node-selection-strategy": "SOFT_AFFINITY",
            "cache.enabled": "true",
            "cache.base-directory": "raptorx-cache",
        },
        timeout=540,
        spark_conf={"spark.sql.shuffle.partitions": "4"},
        tpch={
            "database": CLUSTER_TPCH_DATABASE,
            "scale": tpch_scale,
            "queries": list(queries.QUERY_NUMBERS),
            "out": str(out),
        },
    )
    with open(out, "rb") as f:
        got = pickle.load(f)
    expected = oracle.duckdb_results(tpch_sf001_dir, queries.QUERY_NUMBERS, tpch_scale, threads=2)
    for n in queries.QUERY_NUMBERS:
        diff = query_difference(n, expected[n], got["rows"][n])
        assert diff is None, f"Q{n}: {diff}"
    c = got["counters"]
    print(
        json.dumps(
            {
                k: v
                for k, v in sorted(c.items())
                if k.startswith(
                    ("affinity.", "planner.tasks", "block_cache.hits", "block_cache.misses")
                )
            },
            indent=1,
        )
    )
    placed = c.get("affinity.preferred", 0) + c.get("affinity.fallback", 0)
    # A planned task may run more than once (a scan executed again by a later stage).
    assert placed >= c["planner.tasks_with_preference"] > 0
    assert c.get("affinity.preferred", 0) >= 0.9 * placed, c
