"""A newcomer's first hour, as a user runs it: the benchmark with its output in a file, then
the README's snippet unchanged in a new Python process; and what a user sees when a read
fails. Every process gets a temporary HOME, so ``~/.raptorx`` (the default metastore, the
warehouse, the error log) is the test's own, never the real one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from devservers.ports import free_port
from raptorx_py.cache.block_store import DATA_DIR

REPO = Path(__file__).resolve().parents[2]
BENCH_TIMEOUT = 600


def user_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RAPTORX_CONF_DIR", "XDG_CACHE_HOME", "PYSPARK_SUBMIT_ARGS")
        and not k.startswith("AWS_")
    }
    env["HOME"] = str(home)
    return env


def run_user_script(script: Path, home: Path, text: str) -> subprocess.CompletedProcess:
    """``text`` written to ``script`` and run as a user would, in a new Python process in the
    script's directory with ``home`` as HOME; its output captured."""
    script.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=script.parent,
        env=user_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )


def readme_snippet() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert 'load("tpch.lineitem")' in snippet
    return snippet


def expected_returnflag_counts(generation: Path) -> dict[str, int]:
    import duckdb

    rows = duckdb.sql(
        f"SELECT l_returnflag, count(*) FROM read_parquet('{generation}/lineitem/**/*.parquet',"
        f" hive_partitioning = true) WHERE l_shipdate >= DATE '1995-03-01' GROUP BY 1"
    ).fetchall()
    return {flag: n for flag, n in rows}


def shown_counts(stdout: str) -> dict[str, int]:
    """``DataFrame.show()``'s ``|  A| 1139|`` rows."""
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^\|\s*([A-Z])\|\s*(\d+)\|$", stdout, re.M)
    }


def test_readme_snippet_runs_after_the_benchmark(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    log = tmp_path / "bench.log"
    with open(log, "w", encoding="utf-8") as out:
        bench = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.tpch_suite",
                "--scale",
                "0.01",
                "--queries",
                "6",
                "--configs",
                "spark-parquet-local,tiered-hive-local",
                "--repetitions",
                "1",
                "--warmup",
                "0",
                "--latency-ms",
                "0",
                "--idle-seconds",
                "1",
                "--out",
                str(tmp_path / "out"),
                "--work-dir",
                str(tmp_path / "work"),
            ],
            cwd=REPO,
            env=user_env(home),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=BENCH_TIMEOUT,
        )
    output = log.read_text(encoding="utf-8")
    assert bench.returncode == 0, output
    # Each run records where its time went (benchmarks/query_timeline.py).
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    for config in ("spark-parquet-local", "tiered-hive-local"):
        timed = results["queries"]["6"]["configs"][config]["runs"][0]
        assert {"analysis", "optimization", "planning"} <= set(timed["phases_ms"]), timed
        done = [s for s in timed["stages"] if s["status"] == "COMPLETE"]
        assert done and all(s["tasks"] >= 1 and s["end_ms"] >= s["start_ms"] for s in done)
        # ... and when its timing started, on the wall clock (to place it in a profile).
        began, ended = (datetime.fromisoformat(results[k]) for k in ("started_at", "finished_at"))
        assert began.timestamp() * 1000 <= timed["started_ms"] <= ended.timestamp() * 1000
    # Q6's pushed aggregation is computed in the JVM: no Python worker read any split.
    tiered = results["queries"]["6"]["configs"]["tiered-hive-local"]["runs"][0]
    assert tiered["python_tasks"] == tiered["python_worker_starts"] == 0, tiered["metrics"]
    assert tiered["metrics"]["aggregation.jvm_splits"] > 0, tiered["metrics"]
    assert results["idle_seconds"] == 1

    # The log a person reads: a line when each phase starts and ends, one per query.
    for phase in (
        "generating TPC-H",
        "publishing TPC-H SF 0.01 as tpch.*",
        "starting Spark",
        "running 1 query",
    ):
        assert re.search(rf"^\d\d:\d\d:\d\d start: {re.escape(phase)}", output, re.M), output
        assert re.search(rf"^\d\d:\d\d:\d\d done:  {re.escape(phase)}", output, re.M), output
    assert re.search(
        r"^\d\d:\d\d:\d\d Q6 +1 rows  spark-parquet-local \d+\.\d+s  "
        r"tiered-hive-local \d+\.\d+s \(\d+\.\d\dx of baseline\)$",
        output,
        re.M,
    )
    assert "(lower is faster)" in output
    # No bar drawn into the file, no line cut at 80 columns, none of Spark's start-up noise.
    assert "━" not in output and "\r" not in output
    assert any(len(line) > 120 and "tpch.db" in line for line in output.splitlines())
    for noise in ("NativeCodeLoader", "log4j", "Setting default log level"):
        assert noise not in output

    # The README's snippet, unchanged, in a new process started elsewhere; then, in the same
    # process, the snippet again (one JVM start less than a second process: the suite's time).
    warehouse = home / ".raptorx" / "warehouse" / "tpch.db"
    assert (warehouse / "lineitem").is_dir()
    assert (home / ".raptorx" / "metastore.db").is_file()
    blocks = home / ".raptorx" / "cache" / "blocks" / DATA_DIR  # block files, not the index
    fragments = home / ".raptorx" / "fragment-cache"
    twice = "\n".join(
        [
            readme_snippet(),
            "import glob, os",
            f"kept = [p for d in ({str(blocks)!r}, {str(fragments)!r})",
            "        for p in glob.glob(d + '/**/*', recursive=True) if os.path.isfile(p)]",
            f"print({AGAIN!r}, *sorted(kept), sep='\\n')",
            readme_snippet(),
        ]
    )
    run = run_user_script(tmp_path / "snippet.py", home, twice)
    assert run.returncode == 0, run.stderr
    first, again = run.stdout.split(AGAIN)
    counts = shown_counts(first)
    assert counts == expected_returnflag_counts(tmp_path / "work" / "tpch" / "sf0.01")
    assert sum(counts.values()) > 0

    # Every tier is on by default, under ~/.raptorx: the first run filled the block and
    # fragment caches; the same snippet again answers the same from them, fetching no block.
    kept = [Path(line) for line in again.splitlines() if line.startswith(str(home))]
    filled = {p for p in kept if p.is_relative_to(blocks)}
    assert filled, "the block cache is on by default and the first run filled it"
    stored = [p for p in kept if p.is_relative_to(fragments)]
    assert len(stored) > 2, "more than the fragment cache's index and secret"
    assert shown_counts(again) == counts
    assert files_under(blocks) == filled


#: What the snippet run twice prints between its runs, before the block and fragment files
#: the first run wrote.
AGAIN = "--- the README's snippet again ---"


def files_under(directory: Path) -> set[Path]:
    return {p for p in directory.rglob("*") if p.is_file()} if directory.is_dir() else set()


def start_user_script(script: Path, home: Path, text: str) -> subprocess.Popen:
    """``run_user_script`` started, not waited for."""
    script.write_text(text, encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, str(script)],
        cwd=script.parent,
        env=user_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def missing_table_script(root: Path, home: Path) -> str:
    from raptorx_py.config import load_settings
    from raptorx_py.metastore import open_metastore

    # The default metastore exists (a read never creates one) and holds no database.
    with open_metastore(
        load_settings(
            overrides={"hive.metastore.url": f"sqlite:///{home}/.raptorx/metastore.db"}
        ).metastore_connection,
        create=True,
    ):
        pass
    return """
        from raptorx_py import tiered_session
        spark = tiered_session()
        spark.read.format("tiered_hive").load("tpch.lineitem").count()
    """


def unreachable_endpoint_script(root: Path, home: Path) -> str:
    from raptorx_py.config import load_settings
    from raptorx_py.hive.model import EXTERNAL_TABLE, Column, Table
    from raptorx_py.metastore import open_metastore

    metastore = root / "metastore.db"
    with open_metastore(
        load_settings(
            overrides={"hive.metastore.url": f"sqlite:///{metastore}"}
        ).metastore_connection,
        create=True,
    ) as ms:
        ms.create_database("remote")
        ms.create_table(
            Table(
                "remote", "events", EXTERNAL_TABLE, "s3://bucket/events", (Column("a", "bigint"),)
            )
        )
    dead = f"http://127.0.0.1:{free_port()}"
    (root / "endpoint").write_text(dead, encoding="utf-8")
    # No credentials anywhere (the temporary HOME has no ~/.aws): botocore's NoCredentialsError
    # used to hide that nothing listens at the endpoint.
    return f"""
        from raptorx_py import tiered_session
        spark = tiered_session(properties={{"hive.metastore.url": "sqlite:///{metastore}",
                                            "hive.s3.endpoint": "{dead}"}})
        spark.read.format("tiered_hive").load("remote.events").show()
    """


def failed_task_script(root: Path, home: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raptorx_py.config import load_settings
    from raptorx_py.metastore import open_metastore
    from raptorx_py.tables.table_registration import register_external_table

    data = root / "t"
    data.mkdir()
    pq.write_table(pa.table({"a": pa.array(range(100), pa.int64())}), data / "part-0.parquet")
    metastore = root / "metastore.db"
    settings = load_settings(overrides={"hive.metastore.url": f"sqlite:///{metastore}"})
    with open_metastore(settings.metastore_connection, create=True) as ms:
        register_external_table(ms, settings, "db.t", f"file://{data}")
    size = (data / "part-0.parquet").stat().st_size
    (data / "part-0.parquet").write_bytes(b"X" * size)  # same size: found by the read only
    return f"""
        from raptorx_py import tiered_session
        spark = tiered_session(properties={{"hive.metastore.url": "sqlite:///{metastore}"}})
        spark.read.format("tiered_hive").load("db.t").count()
    """


#: Each failing script's set-up: its directory's files and HOME made, the script's text.
FAILING_SCRIPTS = {
    "missing_table": missing_table_script,
    "unreachable_endpoint": unreachable_endpoint_script,
    "failed_task": failed_task_script,
}


@dataclass
class FailingRun:
    root: Path
    home: Path
    proc: subprocess.Popen

    def lines(self) -> list[str]:
        """The run waited for: its stderr's non-empty lines, checked to be one line of
        ours (exit status 1, no traceback, the full one in the error log)."""
        stdout, stderr = self.proc.communicate(timeout=300)
        run = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, stdout, stderr)
        return failing_lines(run, self.home)


@pytest.fixture(scope="module")
def failing_runs(tmp_path_factory) -> Iterator[dict[str, FailingRun]]:
    """The three failing scripts, each in a directory with a HOME of its own, set up and
    then started together: three user processes, each starting its own JVM, whose starts
    share the cores rather than follow one another; each test waits for its own."""
    runs: dict[str, FailingRun] = {}
    try:
        for name, script in FAILING_SCRIPTS.items():
            root = tmp_path_factory.mktemp(name)
            home = root / "home"
            home.mkdir()
            text = textwrap.dedent(script(root, home))
            runs[name] = FailingRun(
                root, home, start_user_script(root / "user_script.py", home, text)
            )
        yield runs
    finally:
        for run in runs.values():
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.communicate()


UI_PORT_TAKEN = re.compile(r"WARN Utils: Service '\w+' could not bind on port \d+")
#: Spark's console progress bar ("[Stage 0:>   (0 + 1) / 1]"), redrawn while a stage runs.
PROGRESS_BAR = re.compile(r"^\[Stage \d+:")


def failing_lines(run: subprocess.CompletedProcess, home: Path) -> list[str]:
    assert run.returncode == 1, run.stderr
    # Spark's warning that another process holds its UI port depends on what else runs
    # on the host (test workers, a user's own shell), and its progress bar's redraws on how
    # long a stage takes on a busy machine: neither is ours, neither is counted.
    lines = [
        line
        for line in run.stderr.splitlines()
        if line.strip() and not UI_PORT_TAKEN.search(line) and not PROGRESS_BAR.match(line)
    ]
    # No traceback at all (the doubled one was 59-99 lines): our line is the last one.
    assert "Traceback" not in run.stderr, run.stderr
    assert "\tat org.apache.spark" not in run.stderr, run.stderr  # no JVM stack either
    assert len(lines) < 12, run.stderr
    assert lines[-2].startswith("raptorx: the call at ") and "user_script.py:" in lines[-2]
    log = home / ".raptorx" / "logs" / "errors.log"
    assert str(log) in lines[-2]
    assert "Traceback (most recent call last)" in log.read_text(encoding="utf-8")
    return lines


def test_missing_table_is_one_line(failing_runs):
    lines = failing_runs["missing_table"].lines()
    assert lines[-1] == (
        "raptorx_py.errors.NoSuchObjectError: database 'tpch' does not exist. "
        "Existing databases: (none)"
    )


def test_unreachable_endpoint_is_one_line(failing_runs):
    run = failing_runs["unreachable_endpoint"]
    dead = (run.root / "endpoint").read_text(encoding="utf-8")
    lines = run.lines()
    assert lines[-1].startswith(
        f"raptorx_py.errors.StorageError: could not connect to {dead} (hive.s3.endpoint)"
    ), lines


def test_a_failed_task_is_one_line(failing_runs):
    """An error in a read task (executor side): Spark's executor and scheduler no longer print
    it with the JVM stack twice before the driver raises it."""
    run = failing_runs["failed_task"]
    data = run.root / "t"
    lines = run.lines()
    assert lines[-1].startswith(
        "raptorx_py.errors.CorruptFileError: Corrupt or truncated "
        f"Parquet file file://{data}/part-0.parquet"
    ), lines
