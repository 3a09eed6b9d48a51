"""One planner per Spark application (``raptorx_py/datasource/planning/driver_planner.py``):
with the native jar, ``register`` makes the driver's own Python process plan every
``tiered_hive`` source and scan through a Py4J callback, so no planning Python worker starts
and every scan of every query shares one metastore cache and one listing cache.

Counted, never timed, over every process (``counted``): ``planning.driver_calls`` and
``planning.worker_calls`` (a source created or a scan planned, by where it ran),
``storage.listings`` (LIST requests), ``metastore.round_trips``. The tables are managed ones
of each test's own metastore (``Tables``, shared with ``test_metastore_cache_reads.py``), so
the caches of one test are never those of another.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from raptorx_py.datasource.planning.driver_planner import (
    planner_registered,
    register_planner,
    sockets_without_nagle,
    unregister_planner,
)
from tests.integration.test_metastore_cache_reads import (
    Tables,
    ids,
    load,
    options,
    rows_of,
)

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def cached_options(url: str) -> dict[str, str]:
    """The metastore cache on (``options``) and every table's listings cached."""
    return options(url, **{"hive.file-status-cache-tables": "*"})


@pytest.fixture
def tables(metastore_url, tmp_path):
    t = Tables(metastore_url, tmp_path)
    yield t
    t.close()


@pytest.fixture
def planner(spark):
    """The session's planner is registered (``register`` did it); left registered."""
    assert planner_registered(spark)
    yield
    register_planner(spark)


def test_planning_starts_no_python_worker(spark, planner, tables, counted):
    tables.managed("t", [1, 2])
    with counted() as c:
        df = load(spark, "db.t", cached_options(tables.url))
        assert ids(df) == [*rows_of(1), *rows_of(2)]
        assert ids(df.where("k = 2")) == list(rows_of(2))
    # load(): the source, created once; each query: its one scan. All in the driver.
    assert c["planning.driver_calls"] == 3, c.delta
    assert c["planning.worker_calls"] == 0
    assert c["planning.scans"] == 2
    assert c["source.created"] == 1


def test_the_planner_socket_runs_without_nagle_on_both_ends(spark, planner, tables, counted):
    """A planning request is longer than py4j's 8 KiB write buffer (it carries the pickled
    source), and py4j 0.10.9.9 leaves Nagle on: each scan then waited ~40 ms for a delayed
    ACK. After one planned query the callback's socket has TCP_NODELAY at the JVM's end
    (``CallbackSockets``) and at this process's (``planning.sockets_without_nagle``)."""
    import socket

    tables.managed("t", [1])
    jvm_sockets = spark.sparkContext._jvm.raptorx.CallbackSockets
    with counted():
        assert ids(load(spark, "db.t", cached_options(tables.url))) == list(rows_of(1))
    assert jvm_sockets.problem() is None
    assert jvm_sockets.socketsSet() >= 1
    answered_on = sockets_without_nagle()
    assert answered_on
    assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in answered_on)


def test_a_second_query_lists_nothing_and_reads_only_the_snapshot(spark, planner, tables, counted):
    """Every scan of every query shares the driver's caches: a second query, even through a
    new ``load()`` and with another filter, makes no LIST and no metastore round trip but its
    snapshot (the version check)."""
    tables.managed("t", [1, 2, 3])
    opts = cached_options(tables.url)
    df = load(spark, "db.t", opts)
    with counted() as first:
        assert ids(df) == [*rows_of(1), *rows_of(2), *rows_of(3)]
    assert first["storage.listings"] == 3, first.delta  # one per partition, cold

    with counted() as second:
        assert ids(df.where("k >= 2")) == [*rows_of(2), *rows_of(3)]
    assert second["storage.listings"] == 0, second.delta
    assert second["metastore.round_trips"] == 1  # the snapshot
    assert second["listing_cache.hits"] == 2 and second["planning.worker_calls"] == 0

    with counted() as other:  # another DataFrame of the same table: its schema() and scan
        assert ids(load(spark, "db.t", opts).where("k = 1")) == list(rows_of(1))
    assert other["storage.listings"] == 0, other.delta
    assert other["metastore.round_trips"] == 2  # load()'s snapshot and the scan's
    assert other["metastore_cache.table_hits"] == 2 and other["metastore_cache.table_misses"] == 0


def test_two_scans_of_one_table_in_a_query_read_it_and_list_it_once(
    spark, planner, tables, counted
):
    """Every cache off: the query's second scan of a table reads the table and the listing
    its first scan read under the query's snapshot (``query_snapshots.query_values``), with
    no round trip and no LIST of its own; the next query reads them again."""
    tables.managed("t", [1, 2, 3])
    opts = {"hive.metastore.url": tables.url}
    load(spark, "db.t", opts).createOrReplaceTempView("dp_twice")
    sql = (
        "SELECT a.id FROM dp_twice a JOIN (SELECT k, max(id) AS m FROM dp_twice GROUP BY k) b "
        "ON a.k = b.k AND a.id = b.m"
    )
    expected = sorted(max(rows_of(k)) for k in (1, 2, 3))
    for _ in range(2):
        with counted() as c:
            assert sorted(r[0] for r in spark.sql(sql).collect()) == expected
        assert c["planning.scans"] == 2, c.delta
        assert c["storage.listings"] == 3, c.delta  # the first scan's, one per partition
        assert c["planner.listings_reused_in_query"] == 3, c.delta
        assert c["source.query_table_reused"] == 1, c.delta


def commit_in_another_process(url: str, location: str, k: int) -> int:
    """Add partition ``k`` to ``db.t`` in one transaction of a separate Python process;
    its write id."""
    script = f"""
import sys
import threading
from tests.integration.test_metastore_cache_reads import Tables, write_files, rows_of
from raptorx_py.hive.model import Partition
from raptorx_py.metastore.store import Metastore, backend_for_url
ms = Metastore(backend_for_url({url!r}))
table = ms.get_table("db", "t")
txn = ms.open_transaction(user="other")
wid = ms.allocate_write_id(txn, "db", "t")
write_files({location!r}, {k}, wid, rows_of({k}, wid))
ms.add_partitions(table, [Partition(("{k}",), table.location + "/k={k}")], write_id=wid)
ms.commit_transaction(txn)
print(wid)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


def test_a_commit_by_another_process_is_seen_by_the_next_query(spark, planner, tables, counted):
    """The shared cache never serves a stale read: the next query's snapshot sees the other
    process's commit, so the entries cached before it are not fresh for it (snapshot rules
    unchanged: ``query_snapshots.py``)."""
    table = tables.managed("t", [1, 2])
    df = load(spark, "db.t", cached_options(tables.url))
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    with counted() as warm:
        assert ids(df) == [*rows_of(1), *rows_of(2)]
    assert warm["metastore.round_trips"] == 1 and warm["storage.listings"] == 0, warm.delta

    wid = commit_in_another_process(tables.url, table.location[len("file://") :], 3)
    with counted() as after:
        assert ids(df) == [*rows_of(1), *rows_of(2), *rows_of(3, wid)]
    assert after["metastore_cache.partition_misses"] == 1, after.delta
    assert after["storage.listings"] == 1  # the new partition only
    assert after["planning.worker_calls"] == 0


def test_without_a_planner_scans_are_planned_in_workers(spark, planner, tables, counted):
    """The fallback (a Spark Connect server, ``spark-sql``, a Scala application: no driver
    Python process registered a planner): pyspark's planning workers, same rows."""
    tables.managed("t", [1, 2])
    opts = cached_options(tables.url)
    unregister_planner(spark)
    assert not planner_registered(spark)
    with counted() as c:
        assert ids(load(spark, "db.t", opts).where("k = 2")) == list(rows_of(2))
    assert c["planning.driver_calls"] == 0, c.delta
    assert c["planning.worker_calls"] == 2  # the source's creation, the scan
    register_planner(spark)
    with counted() as back:
        assert ids(load(spark, "db.t", opts).where("k = 2")) == list(rows_of(2))
    assert back["planning.worker_calls"] == 0 and back["planning.driver_calls"] == 2


def test_an_error_in_planning_names_what_was_wrong(spark, planner, tables):
    tables.managed("t", [1])
    opts = cached_options(tables.url)
    with pytest.raises(Exception, match=r"raptorx_py\.errors\.\w+: table 'db\.nope' does not"):
        load(spark, "db.nope", opts)
    with pytest.raises(Exception, match="column 'id' of .* is bigint, but the schema asks for"):
        spark.read.format("tiered_hive").options(**opts).schema("id int").load("db.t").collect()
    assert planner_registered(spark)  # an error of the source is not the planner's fault


class _SilentPlanner:
    """A planner that answers nothing (as a broken one would): the JVM must plan without it."""

    def create(self, request):
        return b""

    def plan(self, request):
        return b""

    class Java:
        implements = ["raptorx.DriverPlanner"]


def test_a_planner_that_answers_nothing_leaves_planning_to_the_workers(
    spark, planner, tables, counted
):
    tables.managed("t", [1, 2])
    silent = _SilentPlanner()  # kept alive here: Py4J holds callback objects weakly
    spark.sparkContext._jvm.raptorx.DriverPlanners.register(silent)
    with counted() as c:
        assert ids(load(spark, "db.t", cached_options(tables.url))) == [*rows_of(1), *rows_of(2)]
    assert c["planning.worker_calls"] == 2 and c["planning.driver_calls"] == 0, c.delta


def test_queries_from_two_threads_share_the_planner(spark, planner, tables, counted):
    """Callbacks of concurrent queries are served one at a time; both get their rows."""
    tables.managed("t", [1, 2, 3])
    opts = cached_options(tables.url)
    df = load(spark, "db.t", opts)
    assert ids(df) == [*rows_of(1), *rows_of(2), *rows_of(3)]
    results: dict[int, list] = {}

    def run(k: int) -> None:
        results[k] = [ids(df.where(f"k = {k}")) for _ in range(3)]

    with counted() as c:
        threads = [threading.Thread(target=run, args=(k,)) for k in (1, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    assert results == {1: [list(rows_of(1))] * 3, 3: [list(rows_of(3))] * 3}
    assert c["planning.scans"] == 6 and c["planning.worker_calls"] == 0, c.delta


def test_the_sink_holds_the_planners_counts_without_a_flush_by_the_reader(
    spark, planner, tables, env
):
    """`raptorx cache stats` (another process) once showed zeros for the metastore
    and listing caches of a running application: the driver's planner deferred its flushes
    to the process's exit. Read here straight from the sink, never flushing this process."""
    from raptorx_py import metrics
    from raptorx_py.metrics import MetricsSink

    sink = MetricsSink(env.metrics_dir)
    metrics.settle_deferred_flushes()
    before = sink.totals()
    tables.managed("t", [1, 2])
    df = load(spark, "db.t", cached_options(tables.url))
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    assert ids(df.where("k = 2")) == list(rows_of(2))  # listing cache hits
    metrics.settle_deferred_flushes()
    got = metrics.diff(sink.totals(), before)
    for name in (
        "planning.driver_calls",
        "metastore_cache.table_hits",
        "listing_cache.misses",
        "listing_cache.hits",
        "reader.files_opened",
    ):
        assert got.get(name, 0) > 0, (name, got)


def test_raptorx_cache_stats_shows_every_tiers_counters_of_a_running_application(
    spark, planner, tables, env
):
    """The same, as a user saw it: `raptorx cache stats` in another process, while the
    application runs, showed zero hits and misses for the metastore and listing caches."""
    import json

    from raptorx_py import metrics

    tiers_on = {
        "cache.enabled": "true",
        "hive.parquet.metadata-cache-enabled": "true",
        "fragment-result-cache.enabled": "true",
        # The footer cache serves the Python reader; Spark's reads footers through blocks.
        "hive.parquet.reader": "PYTHON",
    }
    cli_props = {**env.properties, **tiers_on, "hive.metastore.url": tables.url}

    def stats() -> dict[str, int]:
        args = [a for k, v in cli_props.items() for a in ("-p", f"{k}={v}")]
        done = subprocess.run(
            [sys.executable, "-m", "raptorx_py.cli", "cache", "stats", "--json", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return {t["tier"]: t["hits"] + t["misses"] for t in json.loads(done.stdout)["tiers"]}

    metrics.settle_deferred_flushes()
    before = stats()
    tables.managed("t", [1, 2])
    df = load(spark, "db.t", {**cached_options(tables.url), **tiers_on})
    assert ids(df) == [*rows_of(1), *rows_of(2)]
    assert ids(df) == [*rows_of(1), *rows_of(2)]  # hits
    metrics.settle_deferred_flushes()  # the driver's timer; this process flushes nothing
    after = stats()
    moved = {tier: after[tier] - before.get(tier, 0) for tier in after}
    assert set(moved) == {"metastore", "listing", "footer", "block", "fragment"}
    assert all(n > 0 for n in moved.values()), moved


def _external_views(spark, env, tmp_path, sizes: dict[str, int]) -> str:
    """An external unpartitioned table per name of ``sizes`` (ids 0..n-1), each a view
    ``ahead_<name>`` over tiered_hive with every cache off; the database."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raptorx_py.tables.table_registration import register_external_table

    db = env.unique_db("ahead")
    for name, n in sizes.items():
        root = tmp_path / name
        root.mkdir()
        pq.write_table(pa.table({"id": list(range(n))}), root / "part-0.parquet")
        with env.metastore() as ms:
            register_external_table(ms, env.settings(), f"{db}.{name}", str(root))
        spark.read.format("tiered_hive").load(f"{db}.{name}").createOrReplaceTempView(
            f"ahead_{name}"
        )
    return db


def test_a_querys_tables_are_read_ahead_once_each(spark, planner, env, tmp_path, counted):
    """Every cache off: Spark creates the query's scan builders before it builds any, and the
    planner reads each table's snapshot, table and listing (external, unpartitioned) ahead
    on threads of its own (``scan_prefetch.py``), so their round trips overlap. Each is read
    once, by the read ahead (no scan reads them again); the second scan of a table takes its
    first's, as without reading ahead; the rows are right. The provider tells the planner
    of the query's builders in one callback, each of the three tables' sources once."""
    _external_views(spark, env, tmp_path, {"a": 5, "b": 7, "c": 3})
    sql = (
        "SELECT count(*) FROM ahead_a a JOIN ahead_b b ON a.id = b.id "
        "JOIN ahead_c c ON b.id = c.id JOIN (SELECT max(id) AS m FROM ahead_a) x ON a.id <= x.m"
    )
    for _ in range(2):  # and again, for the next query
        with counted() as c:
            assert spark.sql(sql).collect()[0][0] == 3
        assert c["planning.scans"] == 4, c.delta
        assert c["planning.prefetch_calls"] == 1, c.delta
        assert c["planning.prefetch_sources"] == 3, c.delta
        assert c["planner.tables_read_ahead"] == 3, c.delta
        assert c["planner.listings_read_ahead"] == 3, c.delta
        assert c["storage.listings"] == 3, c.delta
        assert c["source.query_table_reused"] == 1, c.delta
        assert c["planner.listings_reused_in_query"] == 1, c.delta
        assert c["planner.prefetch_failed"] == 0, c.delta


def test_a_table_that_cannot_be_read_ahead_fails_the_query_as_without(
    spark, planner, env, tmp_path, counted
):
    """A read ahead that fails (the table was dropped after its view was made) is
    forgotten: the scan reads for itself and the query fails with the scan's own error."""
    db = _external_views(spark, env, tmp_path, {"gone": 4})
    with env.metastore() as ms:
        ms.drop_table(db, "gone")
    with counted() as c, pytest.raises(Exception, match=f"{db}.gone"):
        spark.sql("SELECT id FROM ahead_gone").collect()
    assert c["planner.prefetch_failed"] >= 1, c.delta
