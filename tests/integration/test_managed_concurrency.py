"""Two Spark applications in two processes on one metastore (SQLite, then PostgreSQL): one
appends batches to a partitioned managed table in a loop, the other (this test's session)
reads it in a loop.

Each read must show exactly the first k batches for some k (never a partial write, never a
gap), k never decreases, and every commit visible in the database before a read starts is in
that read (a snapshot cannot lag behind the database).

The writer application is started once for the module (``Writer``: its JVM's start-up was
most of each backend's run) and takes one job per test on its stdin; like this test's
reads, its writes reach the backend's metastore through a per-write property."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.jvm_options import spark_java_options

pytestmark = pytest.mark.spark

BATCHES = 6
BATCH_ROWS = 30

WRITER_APP = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import functions as F
    from raptorx_py.session import tiered_session

    properties, java_options = json.loads(sys.argv[1]), sys.argv[2]
    spark = tiered_session(master="local[1]", app_name="raptorx-writer", properties=properties,
                           spark_conf={"spark.driver.extraJavaOptions": java_options,
                                       "spark.ui.enabled": "false",
                                       "spark.sql.shuffle.partitions": "1",
                                       "spark.ui.showConsoleProgress": "false"})
    for line in sys.stdin:  # a job per line: per-write options, table, batches, rows, done file
        on, name, batches, rows, done = json.loads(line)
        for k in range(batches):
            df = (spark.range(k * rows, (k + 1) * rows, numPartitions=2)
                  .withColumn("part", (F.col("id") % 3).cast("string"))
                  .withColumn("batch", F.lit(k)))
            (df.write.format("tiered_hive").options(**on).option("partition_by", "part")
             .mode("append").save(name))
            print(f"committed {k}", flush=True)
        with open(done, "w") as f:  # every batch committed
            f.write("done")
    spark.stop()
""")


class Writer:
    """The writer application (``WRITER_APP``), started at its first job and kept for the
    next; ended at the end of the module, or when a job did not finish."""

    def __init__(self, env, root):
        self.env, self.root = env, root
        self.proc: subprocess.Popen | None = None
        self.log = root / "writer.log"
        self.log_file = None

    def start_job(self, on: dict, name: str, done) -> None:
        if self.proc is None or self.proc.poll() is not None:
            script = self.root / "writer_app.py"
            script.write_text(WRITER_APP)
            self.log_file = open(self.log, "a")  # noqa: SIM115 (closed by stop())
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    json.dumps(self.env.properties),
                    spark_java_options(),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log_file,
                cwd=os.getcwd(),
                text=True,
                env={**os.environ, "PYSPARK_PYTHON": sys.executable},
            )
        self.proc.stdin.write(json.dumps([on, name, BATCHES, BATCH_ROWS, str(done)]) + "\n")
        self.proc.stdin.flush()

    def wait_first_commit(self, deadline: float) -> None:
        # Wait (no polling) for the job's first commit: the table exists from then on.
        ready, _, _ = select.select([self.proc.stdout], [], [], deadline - time.monotonic())
        assert ready and self.proc.stdout.readline().startswith("committed 0"), self.failed()

    def finish_job(self) -> None:
        """The job's other commit lines, read, so the next job's first line is its own."""
        for k in range(1, BATCHES):
            assert self.proc.stdout.readline().startswith(f"committed {k}"), self.failed()

    def failed(self) -> str:
        return "writer failed:\n" + self.log.read_text()[-4000:]

    def stop(self) -> int | None:
        """Ends the application (told there are no more jobs, killed after a minute); its
        exit status, None when it had to be killed or was not running."""
        if self.proc is None:
            return None
        status = self.proc.poll()
        if status is None:
            self.proc.stdin.close()  # no more jobs: the application stops
            try:
                status = self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.log_file.close()
        return status


@pytest.fixture(scope="module")
def writer(env, tmp_path_factory):
    w = Writer(env, tmp_path_factory.mktemp("writer"))
    try:
        yield w
    finally:
        status = w.stop()
    assert status in (None, 0), w.failed()  # the application ended cleanly after its jobs


def test_reader_sees_whole_commits_in_order(spark, env, tmp_path, metastore_url, writer):
    """On both metastore backends (the reader session and the writer application reach the
    test's metastore through a per-read and a per-write property)."""
    name = f"{env.unique_db('conc')}.events"
    on = {"hive.metastore.url": metastore_url}
    # Warm this session's read path first (Python workers, metastore), so that its reads are
    # short next to the writer's commits.
    warm = f"{name}_warmup"
    spark.range(3).write.format("tiered_hive").options(**on).mode("append").save(warm)
    assert spark.read.format("tiered_hive").options(**on).load(warm).count() == 3
    done_file = tmp_path / "writer-done"
    writer.start_job(on, name, done_file)
    deadline = time.monotonic() + 120
    seen: list[int] = []  # batches visible, per read
    times: list[float] = []
    started = time.monotonic()
    lagging = 0
    finished = False
    try:
        writer.wait_first_commit(deadline)
        with env.metastore(**on) as ms:
            while True:
                assert time.monotonic() < deadline, "the writer did not finish in time"
                done = done_file.exists()
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
        writer.finish_job()
        finished = True
    finally:
        if not finished:  # the next test starts a writer of its own
            if writer.proc is not None and writer.proc.poll() is None:
                writer.proc.kill()
            writer.stop()
    print(f"batches visible per read: {seen}; reads that raced a commit: {lagging}; at {times}")
    assert seen[-1] == BATCHES
    assert len(set(seen)) >= 2  # the reads really interleaved with the commits
    table = spark.read.format("tiered_hive").options(**on).load(name)
    parts = {
        r.part: r.c for r in table.groupBy("part").count().withColumnRenamed("count", "c").collect()
    }
    assert parts == {"0": 60, "1": 60, "2": 60}
