"""tiered_hive through Spark Connect: pyspark's bundled Connect server, started with the
raptorx jar on a free loopback port (one per module, stopped whatever happens), and a Connect
client in its own process (``tests/support/connect_client.py``: a Connect session and the classic
session fixture cannot share a process). The client's reads (a filter, column pruning, a
join) and a write to a managed table read back give the same rows, and read the same columns,
as the same through the classic session; ``~`` in a property is the client's home, not the
server's; a server without the provider is refused with an error saying how to start one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from devservers.ports import free_port
from raptorx_py.config import load_settings
from raptorx_py.connect import ConnectServer
from raptorx_py.metastore import open_metastore
from raptorx_py.native import jar_path
from raptorx_py.tables.table_registration import register_external_table
from tests.support import connect_client
from tests.support.jvm_options import spark_java_options
from tests.support.sample_tables import write_monthly_facts

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
CLIENT_TIMEOUT = 300


@pytest.fixture(scope="module")
def tables(env, tmp_path_factory):
    """facts (partitioned by m, 40 rows) and dims (unpartitioned), both external."""
    base = tmp_path_factory.mktemp("connect-data")
    root = base / "facts"
    write_monthly_facts(root)
    (base / "dims").mkdir()
    pq.write_table(
        pa.table({"qty": pa.array(range(5), pa.int32()), "label": [f"q{i}" for i in range(5)]}),
        str(base / "dims" / "part-0.parquet"),
    )
    db = env.unique_db("connect")
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), f"{db}.facts", str(root))
        register_external_table(ms, env.settings(), f"{db}.dims", str(base / "dims"))
    return {"facts": f"{db}.facts", "dims": f"{db}.dims", "db": db}


@pytest.fixture(scope="module")
def server_home(tmp_path_factory):
    return tmp_path_factory.mktemp("server-home")


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory, server_home):
    """pyspark's Connect server with the jar, not started yet (``client_run`` starts it once
    the client process is on its way); its processes' home is ``server_home``."""
    jar = jar_path()
    assert jar is not None, "build the jar first: make native"
    log = tmp_path_factory.mktemp("connect-server") / "server.log"
    server = ConnectServer(
        free_port(),
        jar=jar,
        master="local[2]",
        log_path=log,
        env={**os.environ, "HOME": str(server_home)},
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.memory": "1g",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.extraJavaOptions": spark_java_options(),
        },
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client_run(connect_server, env, tables, tmp_path_factory):
    """The client's whole run (one process: its start-up and session cost most of it). The
    client imports pyspark's Connect client while the server starts, and connects when told
    on its stdin that the server listens."""
    work = tmp_path_factory.mktemp("connect-client")
    spec = {
        "url": connect_server.url,
        "properties": env.properties,
        "tables": tables,
        "write_table": f"{tables['db']}.out_connect",
        "tilde_home": str(work / "client-home"),
        "tilde_table": "tilde.t",
        "missing_provider_class": "raptorx.NoSuchProvider",
        "start_on_stdin": True,
    }
    (work / "spec.json").write_text(json.dumps(spec))
    client = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.connect_client",
            str(work / "spec.json"),
            str(work / "out.json"),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            k: v
            for k, v in os.environ.items()
            if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
        },
    )
    try:
        connect_server.start(timeout=240)
        _, stderr = client.communicate("start\n", timeout=CLIENT_TIMEOUT)
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()
    assert client.returncode == 0 and (work / "out.json").is_file(), (
        f"connect client failed ({client.returncode}):\n{stderr[-6000:]}"
    )
    out = json.loads((work / "out.json").read_text())
    print(
        "connect client seconds:",
        out["session_seconds"],
        {k: v["seconds"] for k, v in out.items() if isinstance(v, dict) and "seconds" in v},
    )
    return {**out, "spec": spec}


def ok(step: dict) -> dict:
    assert "error" not in step, step.get("traceback") or step["error"]
    return step


def classic_step(counted, fn) -> dict:
    with counted() as c:
        result = connect_client.rows(fn())
    return {"rows": result, "counts": c.delta}


def scan_counts(counts: dict) -> dict:
    return {k: v for k, v in counts.items() if k.startswith("scan.")}


def test_the_client_is_a_connect_session(client_run):
    assert client_run["session_type"] == "pyspark.sql.connect.session.SparkSession"


@pytest.mark.parametrize("name", list(connect_client.QUERIES))
def test_reads_equal_the_classic_session(client_run, spark, counted, tables, name):
    remote = ok(client_run[name])
    local = classic_step(counted, lambda: connect_client.QUERIES[name](spark, tables))
    assert remote["rows"] == local["rows"] and local["rows"]
    # The same scans, each reading the same columns: the JVM provider prunes for Connect too.
    assert scan_counts(remote["counts"]) == scan_counts(local["counts"])
    # Planned where each can be: the classic session by the driver's planner, the Connect
    # server (no driver Python process) by pyspark's planning workers (driver_planner.py).
    scans = local["counts"]["planning.scans"]
    assert scans >= 1 and remote["counts"]["planning.scans"] == scans
    assert local["counts"].get("planning.worker_calls", 0) == 0
    assert local["counts"]["planning.driver_calls"] >= scans
    assert remote["counts"].get("planning.driver_calls", 0) == 0
    assert remote["counts"]["planning.worker_calls"] >= scans


def test_tables_by_name_through_the_catalog(client_run, tables):
    """register() on the client sets the catalog on the server's session: a query by name
    equals the same query through load(), planned in the server's Python workers."""
    by_name = ok(client_run["catalog_filter"])
    assert by_name["rows"] == ok(client_run["filter"])["rows"]
    assert by_name["counts"].get("planning.scans", 0) >= 1
    shown = [r[0] for r in ok(client_run["catalog_tables"])["rows"]]
    assert tables["facts"].split(".")[1] in shown and tables["dims"].split(".")[1] in shown


def test_pruning_reads_only_the_columns_the_query_needs(client_run, tables):
    counts = ok(client_run["prune"])["counts"]
    prefix = f"scan.column.{tables['facts']}."
    assert {k[len(prefix) :]: v for k, v in counts.items() if k.startswith(prefix)} == {
        "qty": 1,
        "name": 1,
    }


def test_write_to_a_managed_table_equals_the_classic_session(client_run, spark, counted, tables):
    remote = ok(client_run["write"])["rows"]
    local = connect_client.write_and_read(spark, tables, f"{tables['db']}.out_classic")
    assert remote == local and len(local) == 25
    # What the Connect client wrote is a table of the shared metastore, like any other.
    written = spark.read.format("tiered_hive").load(client_run["spec"]["write_table"])
    assert connect_client.rows(written) == remote


def test_tilde_is_the_clients_home_not_the_servers(client_run, server_home):
    home = client_run["spec"]["tilde_home"]
    assert ok(client_run["tilde"])["rows"] == [[i] for i in range(5)]
    # The server's processes wrote the table into the client's default metastore...
    assert not (server_home / ".raptorx").exists()
    mine = f"sqlite:///{home}/.raptorx/metastore.db"
    with open_metastore(
        load_settings(overrides={"hive.metastore.url": mine}).metastore_connection
    ) as ms:
        assert ms.get_table("tilde", "t").name == "t"
    # ...because the URL travelled absolute.
    assert client_run["tilde_metastore_url"] == mine


def test_a_server_without_the_provider_is_refused_saying_how_to_start_one(client_run):
    error = client_run["missing_provider"]["error"]
    assert error.startswith("raptorx_py.errors.ConnectServerError:")
    assert "raptorx.NoSuchProvider" in error and "raptorx connect-server --port" in error
    assert "PYSPARK_PYTHON" in error
