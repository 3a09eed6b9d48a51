"""A local S3 endpoint that behaves like a remote one: starts, stops and queries
the emulated S3 server (moto behind a latency/throughput-emulating, request-counting
middleware) in a child process.

What the server emulates and counts, its control endpoints and request kinds, and
the moto range patch are described in :mod:`devservers.s3_server`; this module is
the client handle tests and benchmarks use, and the command line.

Contract
--------
* :class:`S3Endpoint` starts ``python -m devservers.s3_endpoint serve`` in a
  child process bound to ``127.0.0.1`` on a port chosen by the OS, waits (bounded,
  default 30 s) until the server answers its health check, and raises
  :class:`EndpointStartError` with the server's log tail otherwise.  ``stop()``
  terminates the child, kills it after a bounded wait, and is registered with
  :mod:`atexit`; the child also exits by itself when its parent dies.
* :meth:`S3Endpoint.stats`, :meth:`~S3Endpoint.reset_stats`,
  :meth:`~S3Endpoint.set_latency` and :meth:`~S3Endpoint.set_throughput` wrap the
  server's control endpoints (``/_raptorx/...``); :meth:`~S3Endpoint.client`,
  :meth:`~S3Endpoint.storage_options` and :meth:`~S3Endpoint.s3_properties` point
  boto3, s3fs and the ``hive.s3.*`` properties at the endpoint.
* :meth:`S3Endpoint.probe_request_cost` measures what a request costs with the
  emulated latency switched off, for reports to state next to the emulated
  latency.

Command line: ``python -m devservers.s3_endpoint serve [--latency-ms MS]
[--throughput-mbps MBPS] [--no-fast-range]`` runs the server in the foreground
and prints its URL; ``python -m devservers.s3_endpoint probe --size-mb 200``
prints the ranged-GET cost with and without the range patch.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from devservers.s3_server import (
    ACCESS_KEY,
    CONTROL_PREFIX,
    DEFAULT_LATENCY_MS,
    DEFAULT_THROUGHPUT_MBPS,
    REGION,
    SECRET_KEY,
    serve,
)

__all__ = [
    "EndpointStartError",
    "S3Endpoint",
    "main",
]

DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_STOP_TIMEOUT_S = 5.0

_PROJECT_ROOT = Path(__file__).resolve().parent.parent


class EndpointStartError(RuntimeError):
    """The S3 server process did not come up healthy within the allowed time."""


# --------------------------------------------------------------------------- #
# Client side
# --------------------------------------------------------------------------- #
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class S3Endpoint:
    """A moto S3 server with emulated latency in a child process (context manager).

    ``latency_ms``: delay before each S3 request's first byte (0 = off).
    ``throughput_mbps``: response throughput per connection in MB/s (10**6 bytes a second;
    0 = unlimited; default 90, see :mod:`devservers.s3_server`).
    ``fast_range``: install :func:`devservers.s3_server.install_range_patch` in the server process.
    ``start_timeout``: seconds to wait for a healthy server before giving up.
    ``stop_timeout``: seconds ``stop()`` waits after SIGTERM (and after SIGKILL).
    ``python_executable``: interpreter that runs the server (default: this one).
    """

    def __init__(
        self,
        latency_ms: float = DEFAULT_LATENCY_MS,
        throughput_mbps: float = DEFAULT_THROUGHPUT_MBPS,
        *,
        fast_range: bool = True,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
        python_executable: str | None = None,
    ):
        if latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {latency_ms}")
        if throughput_mbps < 0:
            raise ValueError(f"throughput_mbps must be >= 0 MB/s, got {throughput_mbps}")
        self.latency_ms = float(latency_ms)
        self.throughput_mbps = float(throughput_mbps)
        self.fast_range = fast_range
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.python_executable = python_executable or sys.executable
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmpdir: str | None = None
        self._log: Any = None
        self._url: str | None = None
        self._client: Any = None

    # -- lifecycle --------------------------------------------------------- #
    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self._url is None:
            raise RuntimeError("S3Endpoint is not started; call start() first")
        return self._url

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int | None:
        """Process id of the server process (None before start())."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> S3Endpoint:
        """Start the server process and wait until it is healthy.

        Raises :class:`EndpointStartError` (with the server's log tail) if it exits
        or is not healthy within ``start_timeout`` seconds; the process is then
        stopped.
        """
        if self._proc is not None:
            raise RuntimeError(f"S3Endpoint already started at {self._url}")
        self._tmpdir = tempfile.mkdtemp(prefix="raptorx-s3-")
        url_file = os.path.join(self._tmpdir, "url")
        self._log = open(os.path.join(self._tmpdir, "server.log"), "wb")
        cmd = [
            self.python_executable,
            "-m",
            "devservers.s3_endpoint",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--latency-ms",
            repr(self.latency_ms),
            "--throughput-mbps",
            repr(self.throughput_mbps),
            "--url-file",
            url_file,
            "--exit-with-parent",
        ]
        if not self.fast_range:
            cmd.append("--no-fast-range")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_PROJECT_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        env["PYTHONUNBUFFERED"] = "1"
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(_PROJECT_ROOT),
        )
        atexit.register(self.stop)
        try:
            self._wait_healthy(url_file)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, url_file: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        assert self._proc is not None
        last_error = "server did not report its URL"
        while time.monotonic() < deadline:
            rc = self._proc.poll()
            if rc is not None:
                raise EndpointStartError(
                    f"S3 server process (pid {self._proc.pid}) exited with code {rc} "
                    f"during startup.\n"
                    f"--- server log tail ---\n{self._log_tail()}"
                )
            if self._url is None and os.path.exists(url_file):
                with open(url_file) as fh:
                    self._url = fh.read().strip()
            if self._url is not None:
                try:
                    health = self._control("GET", "/health", timeout=2.0)
                    if health.get("ok") and health.get("pid") == self._proc.pid:
                        return
                    last_error = f"unexpected health answer {health!r}"
                except (OSError, ValueError) as exc:
                    last_error = f"health check failed: {exc}"
            time.sleep(0.05)
        raise EndpointStartError(
            f"S3 server (pid {self._proc.pid}) did not become healthy within "
            f"{self.start_timeout:g} s "
            f"({last_error}).\n--- server log tail ---\n{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 30) -> str:
        if not self._tmpdir:
            return "(no log)"
        path = os.path.join(self._tmpdir, "server.log")
        try:
            with open(path, "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"(cannot read {path}: {exc})"
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``stop_timeout`` s). Idempotent."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=self.stop_timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=self.stop_timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self._url = None
        self._client = None

    def __enter__(self) -> S3Endpoint:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- control ----------------------------------------------------------- #
    def _control(self, method: str, sub: str, timeout: float = 10.0) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{self.url}{CONTROL_PREFIX}{sub}",
            method=method,
            data=b"" if method == "POST" else None,
        )
        try:
            with _NO_PROXY.open(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            raise RuntimeError(
                f"control request {method} {sub} failed: HTTP {exc.code}: {detail}"
            ) from None

    def stats(self) -> dict[str, Any]:
        """Counters since the last reset.

        Keys: ``requests`` and ``bytes`` (per kind, see :data:`devservers.s3_server.KINDS`),
        ``total_requests``, ``service_seconds`` (per kind, time spent inside moto),
        ``status`` (2xx/3xx/4xx/5xx counts), ``delayed_requests`` (requests that got
        an emulated delay), ``injected_delay_seconds``, ``max_concurrent``, and the
        settings ``latency_ms``, ``throughput_mbps``, ``fast_range``, ``pid``.
        """
        return self._control("GET", "/stats")

    def reset_stats(self) -> None:
        """Zero every counter (settings are kept)."""
        self._control("POST", "/reset")

    def set_latency(self, ms: float) -> None:
        """Set the emulated per-request latency in milliseconds (0 = off)."""
        if ms < 0:
            raise ValueError(f"latency must be >= 0 ms, got {ms}")
        self._control("POST", f"/latency?ms={float(ms)!r}")
        self.latency_ms = float(ms)

    def set_throughput(self, mbps: float) -> None:
        """Set the emulated throughput per connection in MB/s (0 = unlimited)."""
        if mbps < 0:
            raise ValueError(f"throughput must be >= 0 MB/s, got {mbps}")
        self._control("POST", f"/throughput?mbps={float(mbps)!r}")
        self.throughput_mbps = float(mbps)

    # -- S3 helpers -------------------------------------------------------- #
    def s3_properties(self) -> dict[str, str]:
        """raptorx property overrides that point the hive.s3.* settings here."""
        return {
            "hive.s3.endpoint": self.url,
            "hive.s3.aws-access-key": ACCESS_KEY,
            "hive.s3.aws-secret-key": SECRET_KEY,
            "hive.s3.path-style-access": "true",
            "hive.s3.region": REGION,
        }

    def s3a_settings(self) -> dict[str, str]:
        """Hadoop ``fs.s3a.*`` settings pointing Spark's s3a file system here: plain HTTP,
        path-style, the test credentials, a fixed region (unset, the SDK probes for one or
        gets 403s). s3a's ``If-Match`` change detection is left on (the server honours it).
        For Spark, prefix each key with ``spark.hadoop.`` (``devservers.s3a_jars.spark_conf``)."""
        return {
            "fs.s3a.endpoint": self.url,
            "fs.s3a.endpoint.region": REGION,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.access.key": ACCESS_KEY,
            "fs.s3a.secret.key": SECRET_KEY,
            "fs.s3a.aws.credentials.provider": (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            ),
            "fs.s3a.cross.region.access.enabled": "false",
        }

    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``s3fs.S3FileSystem`` / fsspec ``storage_options``."""
        return {
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "client_kwargs": {"endpoint_url": self.url, "region_name": REGION},
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        }

    def client(self) -> Any:
        """A boto3 S3 client for this endpoint (path-style, test credentials; cached,
        boto3 clients are thread-safe)."""
        if self._client is not None:
            return self._client
        import boto3
        from botocore.config import Config

        self._client = boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        return self._client

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (counted as one OTHER request)."""
        self.client().create_bucket(Bucket=name)

    def probe_request_cost(self, bucket: str, key: str, repeats: int = 5) -> dict[str, Any]:
        """Measure the endpoint's own per-request cost, with emulation switched off.

        Temporarily sets latency and throughput to 0 (off), issues ``repeats`` 1-byte and
        ``repeats`` 1 MiB ranged GETs of ``s3://bucket/key`` (after one warm-up
        each) through a boto3 client, then restores the settings.  The probe's own
        requests are counted like any other (HEAD + RANGED_GETs).  Returns::

            {"object_size", "repeats",
             "ranged_get_1b_s", "ranged_get_1mib_s",          # median, client-observed
             "server_ranged_get_1b_s", "server_ranged_get_1mib_s",  # mean time inside moto
             "emulated_latency_ms", "fast_range"}

        Client-observed time includes boto3's own overhead (signing, parsing).
        """
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        client = self.client()
        size = int(client.head_object(Bucket=bucket, Key=key)["ContentLength"])
        if size == 0:
            raise ValueError(f"s3://{bucket}/{key} is empty; cannot probe ranged GETs")
        latency, throughput = self.latency_ms, self.throughput_mbps
        self.set_latency(0)
        self.set_throughput(0)
        try:

            def median_get(length: int) -> tuple[float, float]:
                start = max(0, (size - length) // 2)
                rng = f"bytes={start}-{min(size, start + length) - 1}"
                times = []
                server_s = 0.0
                for i in range(repeats + 1):
                    before = self.stats()["service_seconds"]["RANGED_GET"]
                    t0 = time.perf_counter()
                    body = client.get_object(Bucket=bucket, Key=key, Range=rng)["Body"].read()
                    elapsed = time.perf_counter() - t0
                    if len(body) != min(length, size):
                        raise RuntimeError(f"probe got {len(body)} bytes for {rng}")
                    if i:  # first request is a warm-up
                        times.append(elapsed)
                        server_s += self.stats()["service_seconds"]["RANGED_GET"] - before
                return statistics.median(times), server_s / repeats

            one_byte, one_byte_server = median_get(1)
            one_mib, one_mib_server = median_get(1 << 20)
        finally:
            self.set_latency(latency)
            self.set_throughput(throughput)
        return {
            "object_size": size,
            "repeats": repeats,
            "ranged_get_1b_s": one_byte,
            "ranged_get_1mib_s": one_mib,
            "server_ranged_get_1b_s": one_byte_server,
            "server_ranged_get_1mib_s": one_mib_server,
            "emulated_latency_ms": latency,
            "fast_range": bool(self.stats()["fast_range"]),
        }


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #
def _probe_cli(size_mb: int, repeats: int) -> None:
    payload = os.urandom(1 << 20) * size_mb  # size_mb MiB; content is irrelevant
    for fast in (False, True):
        with S3Endpoint(latency_ms=0, throughput_mbps=0, fast_range=fast) as ep:
            ep.create_bucket("probe")
            ep.client().put_object(Bucket="probe", Key="blob", Body=payload)
            result = ep.probe_request_cost("probe", "blob", repeats=repeats)
            print(json.dumps(result), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devservers.s3_endpoint", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="run the endpoint until killed; prints its URL")
    p_serve.add_argument("--host", default="127.0.0.1")
    p_serve.add_argument("--port", type=int, default=0, help="0 = let the OS choose (default)")
    p_serve.add_argument(
        "--latency-ms",
        type=float,
        default=DEFAULT_LATENCY_MS,
        help="delay before each request's first byte, ms "
        f"(0 = none; default {DEFAULT_LATENCY_MS:g})",
    )
    p_serve.add_argument(
        "--throughput-mbps",
        type=float,
        default=DEFAULT_THROUGHPUT_MBPS,
        help="response throughput per connection, MB/s "
        f"(0 = unlimited; default {DEFAULT_THROUGHPUT_MBPS:g})",
    )
    p_serve.add_argument(
        "--no-fast-range",
        action="store_true",
        help="run stock moto (ranged GET copies the whole object)",
    )
    p_serve.add_argument("--url-file", help=argparse.SUPPRESS)
    p_serve.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
    p_probe = sub.add_parser(
        "probe", help="measure ranged-GET cost with and without the range patch"
    )
    p_probe.add_argument("--size-mb", type=int, default=200)
    p_probe.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.command == "serve":
        if args.latency_ms < 0 or args.throughput_mbps < 0:
            parser.error("--latency-ms and --throughput-mbps must be >= 0")
        serve(
            host=args.host,
            port=args.port,
            latency_ms=args.latency_ms,
            throughput_mbps=args.throughput_mbps,
            fast_range=not args.no_fast_range,
            url_file=args.url_file,
            exit_with_parent=args.exit_with_parent,
        )
    elif args.command == "probe":
        _probe_cli(args.size_mb, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
