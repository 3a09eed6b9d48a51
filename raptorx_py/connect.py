"""Spark Connect: reading ``tiered_hive`` through a Connect server, and starting one.

A Connect client (``SparkSession.builder.remote("sc://host:port")``) has no JVM of its own:
the server plans and runs every query, so the server must have the raptorx jar (the JVM
``tiered_hive`` provider) on its classpath, and its Python workers must run an interpreter
with raptorx_py installed (``PYSPARK_PYTHON``). ``register()`` then registers the configured
Python source from the client under the provider's internal name, exactly as in a classic
session; it finds out whether the server has the provider with one SQL ``reflect`` call.

``ConnectServer`` starts pyspark's own bundled server (``SparkConnectServer`` from the
``spark-connect`` jar inside pyspark) with the jar and this interpreter; ``raptorx
connect-server`` runs it in the foreground.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from raptorx_py import native
from raptorx_py.errors import ConnectServerError

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Spark Connect's own default port.
DEFAULT_PORT = 15002
START_HINT = (
    "start one with the raptorx jar: `raptorx connect-server --port <port>` (pyspark's "
    "bundled server, with the raptorx jar (`raptorx jar`) in --jars and "
    "--driver-class-path, and PYSPARK_PYTHON set to an interpreter with raptorx_py "
    'installed; see the README\'s "Spark Connect" section)'
)


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect client session (which has no ``sparkContext``).

    Decided by the class's module, so a classic session never imports the Connect client
    (which needs grpcio and pandas)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def provider_on_server(spark) -> bool:
    """Whether the server behind a Connect session can load the JVM provider: Spark's
    ``Utils.classIsLoadable`` (the check a classic session makes through py4j), called on
    the server through SQL's ``reflect``. One small query, no Python worker."""
    row = spark.sql(
        "SELECT reflect('org.apache.spark.util.Utils', 'classIsLoadable', ?) AS ok",
        args=[native.PROVIDER_CLASS],
    ).collect()[0]
    return row["ok"] == "true"


def compatibility_report_on_server(spark) -> str:
    """``native.compatibility_report`` of the server behind a Connect session (whose provider
    must be loadable), through SQL's ``reflect`` as ``provider_on_server`` does."""
    # reflect's class and method must be literals (the class name is a constant of ours)
    row = spark.sql(
        f"SELECT reflect('{native.COMPATIBILITY_CLASS}', 'report') AS report"
    ).collect()[0]
    return row["report"] or ""


def default_parallelism(spark) -> int:
    """The server application's task slots, as a Connect client can see them: the number of
    splits of a ``range`` without a partition count (Spark's leaf-node default parallelism,
    which is ``defaultParallelism`` unless ``spark.sql.leafNodeDefaultParallelism`` is set).
    Each of the 2^16 rows' splits is non-empty, so the highest split id counts them."""
    from pyspark.sql import functions as F

    row = (
        spark.range(0, 1 << 16)
        .select(F.spark_partition_id().alias("p"))
        .agg(F.max("p").alias("p"))
        .collect()[0]
    )
    return int(row["p"]) + 1


def pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def server_command(
    port: int,
    host: str = "127.0.0.1",
    jar: str | os.PathLike | None = None,
    python: str | None = None,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
) -> list[str]:
    """The ``spark-submit`` command that runs pyspark's bundled Connect server with the
    raptorx jar, listening on ``host:port``, its Python workers running ``python``."""
    jar = Path(jar) if jar is not None else native.jar_path()
    if jar is None or not jar.is_file():
        what = "was not found" if jar is None else f"{jar} does not exist"
        raise ConnectServerError(
            f"the raptorx jar {what}: {native.BUILD_HINT}, or name it "
            f"with --jar or RAPTORX_NATIVE_JAR"
        )
    python = python or sys.executable
    settings = {
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        # The workers that run the Python source: this interpreter has raptorx_py.
        "spark.pyspark.python": python,
        **(conf or {}),
    }
    cmd = [
        str(pyspark_home() / "bin" / "spark-submit"),
        "--master",
        master,
        "--class",
        SERVER_CLASS,
        "--name",
        "raptorx-connect",
        # --driver-class-path too: the provider's columnar reader lives in a Spark package
        # and must be loaded by the same class loader as Spark's own classes.
        "--jars",
        str(jar),
        "--driver-class-path",
        str(jar),
    ]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    return cmd + ["spark-internal"]


def server_env(
    host: str = "127.0.0.1", python: str | None = None, env: dict[str, str] | None = None
) -> dict[str, str]:
    """The server's environment: ``PYSPARK_PYTHON`` (read by the JVM when it starts Python
    workers) and, for a loopback server, ``SPARK_LOCAL_IP`` so the driver stays on it."""
    out = dict(os.environ if env is None else env)
    out["PYSPARK_PYTHON"] = python or sys.executable
    if host in ("127.0.0.1", "localhost"):
        out.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return out


class ConnectServer:
    """One bundled Spark Connect server process with the raptorx jar, in its own process
    group so that ``stop()`` also ends its Python workers.

    ``start()`` returns once the server accepts connections on ``host:port`` (or raises
    ``ConnectServerError`` with the end of its log when it exits or ``timeout`` passes).
    ``stop()`` is safe to call at any time, more than once; the context manager always
    calls it. The port is not reserved between choosing and binding it: a clash shows as
    the server exiting with "Address already in use" in its log.
    """

    def __init__(
        self,
        port: int,
        host: str = "127.0.0.1",
        jar=None,
        python: str | None = None,
        master: str = "local[*]",
        conf: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        log_path: str | os.PathLike | None = None,
    ):
        self.host, self.port = host, port
        self.command = server_command(port, host, jar, python, master, conf)
        self.env = server_env(host, python, env)
        self.log_path = Path(log_path) if log_path is not None else None
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def start(self, timeout: float = 120.0) -> ConnectServer:
        log = open(self.log_path, "ab") if self.log_path is not None else None
        try:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT if log else None,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            if log is not None:
                log.close()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _started_process(self) -> subprocess.Popen:
        if self.process is None:
            raise ConnectServerError(f"the Spark Connect server for {self.url} is not running")
        return self.process

    def wait(self) -> int:
        """Block until the server process exits; its exit code."""
        return self._started_process().wait()

    def wait_ready(self, timeout: float) -> None:
        process = self._started_process()
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return
            except OSError:
                pass
            try:
                # Waiting on the process (not sleeping) notices at once when it exits.
                code = process.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                raise ConnectServerError(
                    f"the Spark Connect server for {self.url} exited with "
                    f"code {code} before listening{self._log_tail()}"
                )
            if time.monotonic() > deadline:
                raise ConnectServerError(
                    f"the Spark Connect server for {self.url} did not "
                    f"listen within {timeout:.0f}s{self._log_tail()}"
                )

    def _log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"; the end of {self.log_path}:\n" + "\n".join(tail)

    def stop(self, timeout: float = 30.0) -> None:
        proc = self.process
        if proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        # The group may outlive its leader (Python workers): make sure none is left.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait()
        self.process = None

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def cmd_connect_server(args) -> int:
    """``raptorx connect-server``: run the server in the foreground until interrupted."""
    conf = {}
    for item in args.conf or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConnectServerError(f"--conf expects key=value, got '{item}'")
        conf[key.strip()] = value
    server = ConnectServer(
        args.port, host=args.host, jar=args.jar, python=args.python, master=args.master, conf=conf
    )
    if args.print_command:
        print(
            shlex.join(["env", f"PYSPARK_PYTHON={server.env['PYSPARK_PYTHON']}", *server.command])
        )
        return 0

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    # SIGTERM (and SIGHUP) must stop the server too: it runs in its own process group, which
    # a signal to this process alone would leave behind.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, terminate)
    try:
        server.start(timeout=args.timeout)
        print(
            f"Spark Connect server with tiered_hive listening at {server.url} (Ctrl-C stops it)",
            flush=True,
        )
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


def add_cli(sub) -> None:
    cmd = sub.add_parser(
        "connect-server",
        help="run pyspark's bundled Spark Connect server with the raptorx jar (foreground)",
    )
    cmd.add_argument("--port", type=int, default=DEFAULT_PORT, help="gRPC port (default 15002)")
    cmd.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 for every one)",
    )
    cmd.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    cmd.add_argument(
        "--jar",
        help="the raptorx jar (default: RAPTORX_NATIVE_JAR, then the installed package's jar, "
        "then a checkout's native/target/raptorx-native.jar: what `raptorx jar` prints)",
    )
    cmd.add_argument(
        "--python",
        help="interpreter for the Python workers, with raptorx_py installed (default: this one)",
    )
    cmd.add_argument(
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark conf for the server (repeatable)",
    )
    cmd.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for the server to listen"
    )
    cmd.add_argument(
        "--print-command",
        action="store_true",
        help="print the spark-submit command instead of running it",
    )
    cmd.set_defaults(func=cmd_connect_server)
