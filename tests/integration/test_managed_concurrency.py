"""Two Spark applications in two processes on one SQLite metastore: one appends batches to a
partitioned managed table in a loop, the other (this test's session) reads it in a loop.

Each read must show exactly the first k batches for some k (never a partial write, never a
gap), k never decreases, and every commit visible in the database before a read starts is in
that read (a snapshot cannot lag behind the database)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.spark

BATCHES = 6
BATCH_ROWS = 30

WRITER_APP = textwrap.dedent("""
    import json, sys
    from pyspark.sql import functions as F
    from raptorx_py.session import tiered_session

    properties, name, batches, rows = json.loads(sys.argv[1])
    spark = tiered_session(master="local[1]", app_name="raptorx-writer", properties=properties,
                           spark_conf={"spark.ui.enabled": "false",
                                       "spark.sql.shuffle.partitions": "1",
                                       "spark.ui.showConsoleProgress": "false"})
    for k in range(batches):
        df = (spark.range(k * rows, (k + 1) * rows, numPartitions=2)
              .withColumn("part", (F.col("id") % 3).cast("string"))
              .withColumn("batch", F.lit(k)))
        df.write.format("tiered_hive").option("partition_by", "part").mode("append").save(name)
        print(f"committed {k}", flush=True)
    spark.stop()
""")


def test_reader_sees_whole_commits_in_order(spark, env, tmp_path, metastore_url):
    """On both metastore backends (the reader session reaches the test's metastore through a
    per-read property; the writer application is started on it)."""
    name = f"{env.unique_db('conc')}.events"
    on = {"hive.metastore.url": metastore_url}
    properties = {**env.properties, **on}
    # Warm this session's read path first (Python workers, metastore), so that its reads are
    # short next to the writer's commits.
    warm = f"{name}_warmup"
    spark.range(3).write.format("tiered_hive").options(**on).mode("append").save(warm)
    assert spark.read.format("tiered_hive").options(**on).load(warm).count() == 3
    script = tmp_path / "writer_app.py"
    script.write_text(WRITER_APP)
    log = open(tmp_path / "writer.log", "w")
    writer = subprocess.Popen(
        [sys.executable, str(script), json.dumps([properties, name, BATCHES, BATCH_ROWS])],
        stdout=subprocess.PIPE,
        stderr=log,
        cwd=os.getcwd(),
        text=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    deadline = time.monotonic() + 120
    seen: list[int] = []  # batches visible, per read
    times: list[float] = []
    started = time.monotonic()
    lagging = 0
    try:
        # Wait (no polling) for the writer's first commit: the table exists from then on.
        ready, _, _ = select.select([writer.stdout], [], [], deadline - time.monotonic())
        assert ready and writer.stdout.readline().startswith("committed 0"), _log(tmp_path)
        with env.metastore(**on) as ms:
            while True:
                assert time.monotonic() < deadline, "the writer did not finish in time"
                done = writer.poll() is not None
                committed = ms.get_valid_write_ids([name])[name].committed_count()
                table = spark.read.format("tiered_hive").options(**on).load(name)
                ids = sorted(r.id for r in table.select("id").collect())
                k, rest = divmod(len(ids), BATCH_ROWS)
                assert rest == 0, f"partial write visible: {len(ids)} rows"
                assert ids == list(range(k * BATCH_ROWS)), "rows missing inside the batches"
                assert not seen or k >= seen[-1], f"went backwards: {seen[-1]} -> {k}"
                assert k >= committed, (
                    f"{committed} commits visible in the database before the read, the read saw {k}"
                )
                lagging += k > committed  # a commit landed while reading: allowed
                seen.append(k)
                times.append(round(time.monotonic() - started, 1))
                if done:
                    break
        assert writer.wait() == 0, _log(tmp_path)
    finally:
        if writer.poll() is None:
            writer.kill()
        log.close()
    print(f"batches visible per read: {seen}; reads that raced a commit: {lagging}; at {times}")
    assert seen[-1] == BATCHES
    assert len(set(seen)) >= 2  # the reads really interleaved with the commits
    table = spark.read.format("tiered_hive").options(**on).load(name)
    parts = {
        r.part: r.c for r in table.groupBy("part").count().withColumnRenamed("count", "c").collect()
    }
    assert parts == {"0": 60, "1": 60, "2": 60}


def _log(tmp_path) -> str:
    return "writer failed:\n" + (tmp_path / "writer.log").read_text()[-4000:]
