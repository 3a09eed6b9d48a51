"""A Spark standalone cluster on loopback, from pyspark's own jars: one master and N
workers (``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), each
worker with its own ``SPARK_WORKER_DIR`` (so each executor has its own working directory,
where a relative ``cache.base-directory`` puts its caches), free ports, and registration
waited for by a deadline on the master's JSON status, never by a fixed sleep. Every process
is started in its own process group and killed with it, whatever happens.

Each worker is a host of its own: worker ``i`` binds ``127.0.0.<i + 1>`` (all of 127/8 is
loopback on Linux), so its executors register with that host and soft affinity, which
hashes hosts first (``scheduling.affinity``), sees one node per worker. ``NODE_CACHE`` is
the relative cache directory of a node: an executor's working directory is
``<worker dir>/<app id>/<executor id>``, so ``../raptorx-cache`` is shared by every
executor of one worker in one application, as a node's local disk is (and an executor that
replaces another on the worker finds it).

A SparkContext per process: a test or benchmark drives the cluster from a driver subprocess
(``devservers/cluster_driver.py``), since the test session already has a local one. Used by
``tests/support/cluster_fixtures.py`` (a pytest fixture) and ``benchmarks/cluster_affinity.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from devservers.ports import free_port

REGISTRATION_DEADLINE_S = 90.0
#: A relative ``cache.base-directory`` shared by the executors of one worker in one
#: application (see above).
NODE_CACHE = "../raptorx-cache"


def worker_host(i: int) -> str:
    """The loopback address worker ``i`` binds (``127.0.0.1`` for the first)."""
    return f"127.0.0.{i + 1}"


@dataclass
class StandaloneCluster:
    root: Path
    workers: int = 2
    cores: int = 1
    #: Cores of each worker by index, where not ``cores`` (a worker with 2 cores runs two
    #: 1-core executors of an application: two executors on one host).
    worker_cores: tuple[int, ...] = ()
    master_port: int = 0
    webui_port: int = 0
    #: JVM options of the master and the workers (``SPARK_DAEMON_JAVA_OPTS``; none by
    #: default, as the benchmarks run them); an application's executors take theirs from
    #: its ``spark.executor.extraJavaOptions``.
    daemon_java_options: tuple[str, ...] = ()
    processes: list[subprocess.Popen] = field(default_factory=list)
    worker_procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _env(self, **extra) -> dict[str, str]:
        home = os.path.dirname(pyspark.__file__)
        conf_dir = self.root / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": home,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_CONF_DIR": str(conf_dir),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_DAEMON_MEMORY": "256m",
            **(
                {"SPARK_DAEMON_JAVA_OPTS": " ".join(self.daemon_java_options)}
                if self.daemon_java_options
                else {}
            ),
            **extra,
        }

    def _spawn(self, name: str, args: list[str], **env) -> subprocess.Popen:
        spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
        log = open(self.root / f"{name}.log", "wb")
        proc = subprocess.Popen(
            [spark_class, *args],
            env=self._env(**env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.processes.append(proc)
        return proc

    def status(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as r:
            return json.load(r)

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):
            # Not up yet: no listener, or (seen while it starts) an empty or partial body.
            return -1

    def wait_for(self, workers: int, deadline_s: float = REGISTRATION_DEADLINE_S) -> None:
        deadline = time.monotonic() + deadline_s
        while self.alive_workers() != workers:
            for p in self.processes:
                if p.poll() is not None and p in self.worker_procs + self.processes[:1]:
                    raise RuntimeError(
                        f"a cluster process exited ({p.args[1]}); see {self.root}/*.log"
                    )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{workers} workers not registered with {self.master_url} "
                    f"within {deadline_s}s; see {self.root}/*.log"
                )
            time.sleep(0.2)  # polling a condition, bounded by the deadline

    def start(self) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.master_port, self.webui_port = free_port(), free_port()
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.webui_port),
            ],
        )
        for i in range(self.workers):
            self.start_worker(i, self.worker_cores[i] if i < len(self.worker_cores) else None)
        self.wait_for(self.workers)
        return self

    def start_worker(self, i: int, cores: int | None = None) -> subprocess.Popen:
        """Start worker ``i`` on its own host (``worker_host(i)``) with ``cores`` cores (the
        cluster's ``cores`` by default); registration is the caller's to wait for."""
        work = self.root / f"worker{i}"
        work.mkdir(parents=True, exist_ok=True)
        host = worker_host(i)
        proc = self._spawn(
            f"worker{i}",
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                host,
                "--cores",
                str(cores or self.cores),
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(work),
                self.master_url,
            ],
            SPARK_WORKER_DIR=str(work),
            SPARK_LOCAL_IP=host,
        )
        self.worker_procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        """Kill ``proc``'s whole process group (a worker takes its executors with it)."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)

    def stop(self) -> None:
        # Workers first (their executors are in their process groups), then the master.
        for proc in reversed(self.processes):
            self.kill(proc)
