"""A real Hive Metastore 2.3.10 Thrift server for tests and benchmarks.

Contract:
- ``HiveMetastoreServer(workdir).start()`` runs ``org.apache.hadoop.hive.metastore.HiveMetaStore``
  from pyspark's own jars (no download) with embedded Derby in ``workdir``, on a free loopback
  port (``devservers.ports``), and returns once the server answers a Thrift call
  (``get_all_databases``), or raises ``MetastoreServerStartError`` with the log's tail after
  ``start_timeout`` seconds. It takes about 30 s on this machine: share one per test session.
  ``start()`` is ``launch()`` (the process started, nothing waited for) then ``wait_ready()``:
  a caller with other work to do meanwhile launches first and waits when it needs the server.
- With ``notification_listener`` (the default) the server runs the test listener
  ``raptorx.hmstest.NotificationLogListener`` (``native/src/test/java``, built into
  ``native/target/hms-test-listener.jar`` by ``native/build-test-listener.sh`` when missing or
  older than its source): it fills HMS's notification log with Hive's JSON messages as
  hcatalog's ``DbNotificationListener`` does on production servers (pyspark's jars lack it).
  Without it the log stays empty, like a server configured with no listener.
- The server's output goes to ``workdir/hms.log``; ``stop()`` terminates it (kills it after a
  bounded wait) and is registered with ``atexit``; a caller killed outside Python's exit
  leaves the JVM running, so fixtures stop it explicitly.

``python -m devservers.hive_metastore [--no-listener] DIR`` runs one in the foreground and
prints its URI.
"""

from __future__ import annotations

import argparse
import atexit
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from devservers.ports import free_port

__all__ = ["MetastoreServerStartError", "HiveMetastoreServer", "listener_jar", "main"]

_ROOT = Path(__file__).resolve().parent.parent
LISTENER_CLASS = "raptorx.hmstest.NotificationLogListener"
LISTENER_SOURCES = _ROOT / "native" / "src" / "test" / "java"
LISTENER_JAR = _ROOT / "native" / "target" / "hms-test-listener.jar"
DEFAULT_START_TIMEOUT_S = 120.0


class MetastoreServerStartError(RuntimeError):
    """The Hive Metastore did not answer within the allowed time (the message has its log)."""


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def listener_jar() -> Path:
    """The test listener's jar, built first when missing or older than a source file."""
    sources = [p for p in LISTENER_SOURCES.rglob("*.java")]
    newest = max(p.stat().st_mtime for p in sources)
    if not LISTENER_JAR.exists() or LISTENER_JAR.stat().st_mtime < newest:
        subprocess.run(
            [str(_ROOT / "native" / "build-test-listener.sh"), sys.executable],
            check=True,
            capture_output=True,
            text=True,
        )
    return LISTENER_JAR


class HiveMetastoreServer:
    """One HMS 2.3.10 process (see the module docstring)."""

    def __init__(
        self,
        workdir: str | os.PathLike,
        *,
        notification_listener: bool = True,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        java_options: tuple[str, ...] = (),
    ):
        self.workdir = Path(workdir).resolve()
        #: More options for the server's JVM (the tests': tests/support/jvm_options.py).
        self.java_options = tuple(java_options)
        self.notification_listener = notification_listener
        self.start_timeout = start_timeout
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.log_path = self.workdir / "hms.log"
        self.warehouse = self.workdir / "warehouse"

    @property
    def uri(self) -> str:
        if self.port is None:
            raise RuntimeError("the Hive Metastore is not started")
        return f"thrift://127.0.0.1:{self.port}"

    def command(self, port: int) -> list[str]:
        classpath = [str(pyspark_jars() / "*")]
        props = {
            "hive.async.log.enabled": "false",  # else it dies on a missing disruptor class
            "javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={self.workdir / 'metastore_db'};create=true"
            ),
            "hive.metastore.schema.verification": "false",
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.warehouse.dir": str(self.warehouse),
            "derby.stream.error.file": str(self.workdir / "derby.log"),
            "log4j.configurationFile": str(self._log_config()),
            # HMS's default pool (BoneCP) is not in pyspark's jars; its ACID listener's
            # TxnHandler opens one on every drop_database/drop_table. HikariCP is.
            "datanucleus.connectionPoolingType": "HikariCP",
        }
        if self.notification_listener:
            classpath.insert(0, str(listener_jar()))
            props["hive.metastore.event.listeners"] = LISTENER_CLASS
        return [
            "java",
            "-Xmx512m",
            *self.java_options,
            "-cp",
            os.pathsep.join(classpath),
            *(f"-D{k}={v}" for k, v in props.items()),
            "org.apache.hadoop.hive.metastore.HiveMetaStore",
            "-p",
            str(port),
        ]

    def _log_config(self) -> Path:
        """Warnings and errors of the server (a failed call's stack trace) to its output."""
        path = self.workdir / "log4j2.properties"
        path.write_text(
            "status = error\n"
            "appender.console.type = Console\n"
            "appender.console.name = console\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{ISO8601} %p %c{2}: %m%n\n"
            "rootLogger.level = warn\n"
            "rootLogger.appenderRef.console.ref = console\n"
        )
        return path

    def start(self) -> HiveMetastoreServer:
        return self.launch().wait_ready()

    def launch(self) -> HiveMetastoreServer:
        """The server's process started on a free port; ``wait_ready()`` waits for it."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(exist_ok=True)
        self.port = free_port()
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                self.command(self.port),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
            )
        finally:
            log.close()
        atexit.register(self.stop)
        return self

    def wait_ready(self) -> HiveMetastoreServer:
        """Returns once the launched server answers (within ``start_timeout`` seconds of this
        call), or raises ``MetastoreServerStartError``: it exited, or did not answer in time."""
        if self.process is None:
            raise MetastoreServerStartError("the Hive Metastore was not launched")
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.process.poll() is not None:
                raise MetastoreServerStartError(
                    f"the Hive Metastore exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            if self.healthy():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise MetastoreServerStartError(
                    f"the Hive Metastore did not answer on port {self.port} within "
                    f"{self.start_timeout:g}s:\n{self.log_tail()}"
                )
            time.sleep(0.5)  # polling a child process's readiness: no clock to inject

    def healthy(self) -> bool:
        """True when the server answers ``get_all_databases``."""
        try:  # a plain connect first: thrift logs every refused connection as an error
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
        except OSError:
            return False
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport
        from thrift_files.libraries.thrift_hive_metastore_client import ThriftHiveMetastore

        sock = TSocket.TSocket("127.0.0.1", self.port)
        sock.setTimeout(5000)
        transport = TTransport.TBufferedTransport(sock)
        try:
            transport.open()
            client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
            client.get_all_databases()
            return True
        except Exception:  # noqa: BLE001 - not up yet: any failure means "try again"
            return False
        finally:
            transport.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"(no log at {self.log_path}: {e})"

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def __enter__(self) -> HiveMetastoreServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--no-listener", action="store_true")
    args = parser.parse_args(argv)
    server = HiveMetastoreServer(args.workdir, notification_listener=not args.no_listener)
    server.start()
    print(server.uri, flush=True)
    try:
        assert server.process is not None
        server.process.wait()
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
