"""A local S3 endpoint that behaves like a remote one: moto's S3 server behind a
latency/bandwidth-emulating, request-counting WSGI middleware, in its own process.

Why: tests and benchmarks need an S3 endpoint on the machine, but a loopback
emulator answers in microseconds, which hides exactly what a cache saves.  This
module charges every S3 request a configurable latency before its first byte
(default 20 ms) and, optionally, a bandwidth cost, so a response of N bytes takes
``latency + N / bandwidth``.  It also counts requests by kind, so tests can assert
"this read issued 3 ranged GETs and no LIST" without timing anything.

Contract
--------
* :class:`S3Endpoint` starts ``python -m benchmarks.object_store serve`` in a
  child process bound to ``127.0.0.1`` on a port chosen by the OS, waits (bounded,
  default 30 s) until the server answers its health check, and raises
  :class:`EndpointStartError` with the server's log tail otherwise.  ``stop()``
  terminates the child, kills it after a bounded wait, and is registered with
  :mod:`atexit`; the child also exits by itself when its parent dies.
* Control endpoints live under ``/_raptorx/`` (moto never sees them; they are
  neither counted nor delayed):

  ``GET  /_raptorx/health``                 -> ``{"ok": true, "pid": ...}``
  ``GET  /_raptorx/stats``                  -> counters, see :meth:`S3Endpoint.stats`
  ``POST /_raptorx/reset``                  -> zero all counters
  ``POST /_raptorx/latency?ms=20``          -> set the per-request latency (0 = off)
  ``POST /_raptorx/bandwidth?bytes_per_s=N`` -> set the bandwidth limit (0 = off)

* Request kinds (path-style addressing, ``/bucket/key``):

  ``LIST``        GET on a bucket whose query only has listing parameters
                  (ListObjects, ListObjectsV2, ListObjectVersions)
  ``HEAD``        any HEAD (HeadObject, HeadBucket)
  ``GET``         GetObject without a Range header
  ``RANGED_GET``  GetObject with a Range header
  ``PUT``         PutObject, UploadPart, UploadPartCopy, CopyObject
  ``DELETE``      DeleteObject, DeleteObjects (one batch request counts once)
  ``OTHER``       everything else (CreateBucket, ListBuckets, multipart
                  create/complete/abort, sub-resources such as ?acl, ?tagging, ...)

  Response body bytes are counted per kind (``bytes``), so ``bytes["GET"]`` and
  ``bytes["RANGED_GET"]`` are the object bytes served by GetObject.

moto's own per-request cost
---------------------------
moto answers a ranged GET by copying the whole object out of its buffer and then
slicing it, so its own cost grows with object size.  By default the server process
installs a small patch (:func:`install_range_patch`) that makes GetObject with a
single ``Range`` read only the requested bytes; ``S3Endpoint(fast_range=False)``
runs stock moto.  :meth:`S3Endpoint.probe_request_cost` measures what a request
costs with the emulated latency switched off, for reports to state next to the
emulated latency.  ``python -m benchmarks.object_store probe --size-mb 200``
prints that cost with and without the patch.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

__all__ = [
    "CONTROL_PREFIX",
    "KINDS",
    "EndpointStartError",
    "S3Endpoint",
    "classify_request",
    "install_range_patch",
    "make_app",
    "serve",
]

#: Path prefix of the control endpoints; requests under it never reach moto.
CONTROL_PREFIX = "/_raptorx"

#: Request kinds, in the order the stats report them.
KINDS = ("LIST", "HEAD", "GET", "RANGED_GET", "PUT", "DELETE", "OTHER")

DEFAULT_LATENCY_MS = 20.0
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_STOP_TIMEOUT_S = 5.0
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"

_PROJECT_ROOT = Path(__file__).resolve().parent.parent

# Query parameters that keep a request in its "data" kind; any other parameter
# (a sub-resource such as ?acl or ?tagging) makes it OTHER.
_LIST_PARAMS = frozenset({
    "list-type", "prefix", "delimiter", "marker", "continuation-token", "max-keys",
    "encoding-type", "fetch-owner", "start-after", "versions", "key-marker",
    "version-id-marker", "x-id", "optional-object-attributes",
})
_GET_PARAMS = frozenset({"versionId", "partNumber", "x-id"})
_PUT_PARAMS = frozenset({"partNumber", "uploadId", "x-id"})
_DELETE_PARAMS = frozenset({"versionId", "x-id"})

# One byte range ("bytes=a-b", "bytes=a-", "bytes=-n"): the only form the range
# patch handles; anything else goes through stock moto.
_SINGLE_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


class EndpointStartError(RuntimeError):
    """The S3 server process did not come up healthy within the allowed time."""


# --------------------------------------------------------------------------- #
# Request classification (pure; used by the middleware)
# --------------------------------------------------------------------------- #
def classify_request(method: str, path: str, query_string: str = "",
                     range_header: str | None = None) -> str:
    """Return the kind (one of :data:`KINDS`) of a path-style S3 request.

    ``path`` is the URL path (``/bucket`` or ``/bucket/key``), ``query_string``
    the raw query, ``range_header`` the value of the ``Range`` header, if any.
    """
    method = method.upper()
    params = set(urllib.parse.parse_qs(query_string, keep_blank_values=True))
    params = {p for p in params if not p.startswith("response-")}
    stripped = path.lstrip("/")
    bucket, _, key = stripped.partition("/")
    if method == "HEAD":
        return "HEAD"
    if not bucket:
        return "OTHER"  # ListBuckets and friends
    if not key:  # bucket-level request
        if method == "GET" and params <= _LIST_PARAMS:
            return "LIST"
        if method == "POST" and "delete" in params:
            return "DELETE"
        return "OTHER"
    if method == "GET":
        if not params <= _GET_PARAMS:
            return "OTHER"
        return "RANGED_GET" if range_header else "GET"
    if method == "PUT":
        return "PUT" if params <= _PUT_PARAMS else "OTHER"
    if method == "DELETE":
        return "DELETE" if params <= _DELETE_PARAMS else "OTHER"
    return "OTHER"


# --------------------------------------------------------------------------- #
# Server side: counters, middleware, moto patch
# --------------------------------------------------------------------------- #
class _Stats:
    """Thread-safe counters and the current latency/bandwidth settings."""

    def __init__(self, latency_ms: float, bandwidth: float | None, fast_range: bool):
        self.lock = threading.Lock()
        self.latency_ms = float(latency_ms)
        self.bandwidth = float(bandwidth) if bandwidth else None
        self.fast_range = fast_range
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.requests = dict.fromkeys(KINDS, 0)
            self.bytes = dict.fromkeys(KINDS, 0)
            self.service_seconds = dict.fromkeys(KINDS, 0.0)
            self.status = {"2xx": 0, "3xx": 0, "4xx": 0, "5xx": 0}
            self.delayed_requests = 0
            self.injected_delay_seconds = 0.0
            self.inflight = 0
            self.max_concurrent = 0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "pid": os.getpid(),
                "latency_ms": self.latency_ms,
                "bandwidth": self.bandwidth,
                "fast_range": self.fast_range,
                "requests": dict(self.requests),
                "total_requests": sum(self.requests.values()),
                "bytes": dict(self.bytes),
                "service_seconds": dict(self.service_seconds),
                "status": dict(self.status),
                "delayed_requests": self.delayed_requests,
                "injected_delay_seconds": self.injected_delay_seconds,
                "max_concurrent": self.max_concurrent,
            }


class _CountedBody:
    """WSGI response iterable that counts (and, with a bandwidth, paces) bytes."""

    _PIECE = 64 * 1024

    def __init__(self, inner: Iterable[bytes], stats: _Stats, kind: str,
                 bandwidth: float | None, first_byte_at: float):
        self._inner = inner
        self._stats = stats
        self._kind = kind
        self._bandwidth = bandwidth
        self._t0 = first_byte_at
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self._inner:
            if not chunk:
                continue
            if not self._bandwidth:
                sent += len(chunk)
                self._add_bytes(len(chunk))
                yield chunk
                continue
            view = memoryview(chunk)
            for start in range(0, len(view), self._PIECE):
                piece = bytes(view[start:start + self._PIECE])
                sent += len(piece)
                wait = self._t0 + sent / self._bandwidth - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                    with self._stats.lock:
                        self._stats.injected_delay_seconds += wait
                self._add_bytes(len(piece))
                yield piece

    def _add_bytes(self, n: int) -> None:
        with self._stats.lock:
            self._stats.bytes[self._kind] += n

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._stats.lock:
            self._stats.inflight -= 1
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


class EmulationMiddleware:
    """WSGI middleware: latency + bandwidth emulation, request counting, control API."""

    def __init__(self, app: Callable[..., Any], latency_ms: float = DEFAULT_LATENCY_MS,
                 bandwidth: float | None = None, fast_range: bool = False):
        self.app = app
        self.stats = _Stats(latency_ms, bandwidth, fast_range)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "") or ""
        if path == CONTROL_PREFIX or path.startswith(CONTROL_PREFIX + "/"):
            return self._control(environ, start_response, path[len(CONTROL_PREFIX):])

        kind = classify_request(environ.get("REQUEST_METHOD", "GET"), path,
                                environ.get("QUERY_STRING", ""), environ.get("HTTP_RANGE"))
        st = self.stats
        with st.lock:
            st.requests[kind] += 1
            st.inflight += 1
            st.max_concurrent = max(st.max_concurrent, st.inflight)
            latency_s = st.latency_ms / 1000.0
            bandwidth = st.bandwidth
            if latency_s > 0 or bandwidth:
                st.delayed_requests += 1
        if latency_s > 0:
            time.sleep(latency_s)
            with st.lock:
                st.injected_delay_seconds += latency_s
        first_byte_at = time.monotonic()

        def counting_start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
            bucket = f"{status[:1]}xx"
            with st.lock:
                if bucket in st.status:
                    st.status[bucket] += 1
            return start_response(status, headers, exc_info) if exc_info else \
                start_response(status, headers)

        t0 = time.perf_counter()
        try:
            inner = self.app(environ, counting_start_response)
        except BaseException:
            with st.lock:
                st.inflight -= 1
            raise
        with st.lock:
            st.service_seconds[kind] += time.perf_counter() - t0
        return _CountedBody(inner, st, kind, bandwidth, first_byte_at)

    # -- control API ------------------------------------------------------- #
    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any],
                 sub: str) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        st = self.stats
        try:
            if sub in ("/health", "") and method == "GET":
                body: Any = {"ok": True, "pid": os.getpid()}
            elif sub == "/stats" and method == "GET":
                body = st.snapshot()
            elif sub == "/reset" and method == "POST":
                st.reset()
                body = st.snapshot()
            elif sub == "/latency" and method == "POST":
                ms = _parse_number(query, "ms")
                with st.lock:
                    st.latency_ms = ms
                body = {"latency_ms": ms}
            elif sub == "/bandwidth" and method == "POST":
                bps = _parse_number(query, "bytes_per_s")
                with st.lock:
                    st.bandwidth = bps or None
                body = {"bandwidth": bps or None}
            else:
                return _json_response(start_response, "404 Not Found", {
                    "error": f"unknown control request {method} {CONTROL_PREFIX}{sub}"})
        except ValueError as exc:
            return _json_response(start_response, "400 Bad Request", {"error": str(exc)})
        return _json_response(start_response, "200 OK", body)


def _parse_number(query: dict[str, list[str]], name: str) -> float:
    values = query.get(name)
    if not values:
        raise ValueError(f"missing query parameter {name!r}")
    try:
        value = float(values[0])
    except ValueError:
        raise ValueError(f"query parameter {name!r} must be a number, got {values[0]!r}") from None
    if value < 0 or value != value or value == float("inf"):
        raise ValueError(f"query parameter {name!r} must be finite and >= 0, got {values[0]!r}")
    return value


def _json_response(start_response: Callable[..., Any], status: str, body: Any) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(data)))])
    return [data]


class _KeyRangeView:
    """Stand-in for ``FakeKey.value`` during a ranged GetObject.

    Supports exactly what moto's ranged-GET path does with the value -- ``len()``,
    truth, and slicing -- reading only the sliced bytes from the key's buffer.  If
    moto decides not to slice (e.g. an unsatisfiable-but-tolerated range), the view
    is returned as the response body and streamed by iteration.
    """

    __slots__ = ("_key",)
    _CHUNK = 1 << 20

    def __init__(self, key: Any):
        self._key = key

    def __len__(self) -> int:
        return int(self._key.size)

    def __bool__(self) -> bool:
        return len(self) > 0

    def _read(self, start: int, length: int) -> bytes:
        with self._key.lock:
            buf = self._key._value_buffer
            buf.seek(start)
            return buf.read(length)

    def __getitem__(self, item: Any) -> bytes:
        if not isinstance(item, slice):
            raise TypeError("a ranged view of an S3 object only supports slicing")
        start, stop, step = item.indices(len(self))
        if step != 1:
            return self._read(0, len(self))[item]
        return self._read(start, stop - start) if stop > start else b""

    def __bytes__(self) -> bytes:
        return self._read(0, len(self))

    def __iter__(self) -> Iterator[bytes]:
        for start in range(0, len(self), self._CHUNK):
            yield self._read(start, self._CHUNK)


def install_range_patch() -> bool:
    """Make moto's GetObject with a single ``Range`` read only the requested bytes.

    Stock moto (5.2.x) builds the GetObject response from ``FakeKey.value`` -- a
    full copy of the object -- and then slices it in ``_handle_range_header``.  The
    patch wraps ``S3Response.get_object`` so that, while it runs for a request with
    one byte range, ``FakeKey.value`` returns a :class:`_KeyRangeView` instead of
    the copy; moto's own range logic (validation, 206, Content-Range) is unchanged.
    Call it only inside the server process.  Returns False (and patches nothing) if
    moto's internals are not shaped as expected.
    """
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    prop = FakeKey.__dict__.get("value")
    orig_get_object = S3Response.__dict__.get("get_object")
    if (not isinstance(prop, property) or prop.fget is None or prop.fset is None
            or orig_get_object is None or not hasattr(S3Response, "_handle_range_header")):
        print("object_store: moto internals differ from 5.2.x; range patch not installed",
              file=sys.stderr)
        return False
    if getattr(orig_get_object, "_raptorx_patched", False):
        return True
    active = threading.local()
    orig_fget = prop.fget

    def value_get(self: Any) -> Any:
        if getattr(active, "on", False):
            return _KeyRangeView(self)
        return orig_fget(self)

    def get_object(self: Any) -> Any:
        rng = self.headers.get("range")
        if rng and _SINGLE_RANGE.match(rng):
            active.on = True
            try:
                return orig_get_object(self)
            finally:
                active.on = False
        return orig_get_object(self)

    get_object._raptorx_patched = True  # type: ignore[attr-defined]
    FakeKey.value = property(value_get, prop.fset, prop.fdel, prop.__doc__)  # type: ignore[assignment]
    S3Response.get_object = get_object  # type: ignore[method-assign]
    return True


def make_app(latency_ms: float = DEFAULT_LATENCY_MS, bandwidth: float | None = None,
             fast_range: bool = True) -> EmulationMiddleware:
    """Build moto's S3 WSGI app wrapped in :class:`EmulationMiddleware` (server side)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    patched = install_range_patch() if fast_range else False
    moto_app = DomainDispatcherApplication(create_backend_app)
    return EmulationMiddleware(moto_app, latency_ms=latency_ms, bandwidth=bandwidth,
                               fast_range=patched)


def _watch_parent(parent_pid: int) -> None:
    """Exit the server process as soon as the process that started it is gone."""
    while True:
        if os.getppid() != parent_pid:
            os._exit(0)
        time.sleep(0.5)


def serve(host: str = "127.0.0.1", port: int = 0, latency_ms: float = DEFAULT_LATENCY_MS,
          bandwidth: float | None = None, fast_range: bool = True,
          url_file: str | None = None, exit_with_parent: bool = False) -> None:
    """Run the server in this process until killed (multi-threaded werkzeug server)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    class QuietHandler(MotoRequestHandler):
        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            """Per-request access logs are dropped (errors are still logged)."""

    app = make_app(latency_ms=latency_ms, bandwidth=bandwidth, fast_range=fast_range)
    server = make_server(host, port, app, threaded=True, request_handler=QuietHandler)
    server.daemon_threads = True
    url = f"http://{host}:{server.server_port}"
    if exit_with_parent:
        threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True,
                         name="watch-parent").start()
    if url_file:
        tmp = url_file + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(url)
        os.replace(tmp, url_file)
    print(url, flush=True)
    server.serve_forever()


# --------------------------------------------------------------------------- #
# Client side
# --------------------------------------------------------------------------- #
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class S3Endpoint:
    """A moto S3 server with emulated latency in a child process (context manager).

    ``latency_ms``: delay before each S3 request's first byte (0 = off).
    ``bandwidth``: response bytes per second (None/0 = unlimited).
    ``fast_range``: install :func:`install_range_patch` in the server process.
    ``start_timeout``: seconds to wait for a healthy server before giving up.
    ``stop_timeout``: seconds ``stop()`` waits after SIGTERM (and after SIGKILL).
    ``python_executable``: interpreter that runs the server (default: this one).
    """

    def __init__(self, latency_ms: float = DEFAULT_LATENCY_MS, bandwidth: float | None = None,
                 *, fast_range: bool = True, start_timeout: float = DEFAULT_START_TIMEOUT_S,
                 stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
                 python_executable: str | None = None):
        if latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {latency_ms}")
        if bandwidth is not None and bandwidth < 0:
            raise ValueError(f"bandwidth must be >= 0 bytes/s or None, got {bandwidth}")
        self.latency_ms = float(latency_ms)
        self.bandwidth = bandwidth or None
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

    def start(self) -> "S3Endpoint":
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
        cmd = [self.python_executable, "-m", "benchmarks.object_store", "serve",
               "--host", "127.0.0.1", "--port", "0",
               "--latency-ms", repr(self.latency_ms),
               "--bandwidth", repr(float(self.bandwidth or 0)),
               "--url-file", url_file, "--exit-with-parent"]
        if not self.fast_range:
            cmd.append("--no-fast-range")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_PROJECT_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env["PYTHONUNBUFFERED"] = "1"
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT, env=env, cwd=str(_PROJECT_ROOT))
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
                    f"--- server log tail ---\n{self._log_tail()}")
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
            f"({last_error}).\n--- server log tail ---\n{self._log_tail()}")

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

    def __enter__(self) -> "S3Endpoint":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- control ----------------------------------------------------------- #
    def _control(self, method: str, sub: str, timeout: float = 10.0) -> dict[str, Any]:
        req = urllib.request.Request(f"{self.url}{CONTROL_PREFIX}{sub}", method=method,
                                     data=b"" if method == "POST" else None)
        try:
            with _NO_PROXY.open(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            raise RuntimeError(f"control request {method} {sub} failed: "
                               f"HTTP {exc.code}: {detail}") from None

    def stats(self) -> dict[str, Any]:
        """Counters since the last reset.

        Keys: ``requests`` and ``bytes`` (per kind, see :data:`KINDS`),
        ``total_requests``, ``service_seconds`` (per kind, time spent inside moto),
        ``status`` (2xx/3xx/4xx/5xx counts), ``delayed_requests`` (requests that got
        an emulated delay), ``injected_delay_seconds``, ``max_concurrent``, and the
        settings ``latency_ms``, ``bandwidth``, ``fast_range``, ``pid``.
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

    def set_bandwidth(self, bytes_per_s: float | None) -> None:
        """Set the emulated bandwidth in bytes/s (None or 0 = unlimited)."""
        if bytes_per_s is not None and bytes_per_s < 0:
            raise ValueError(f"bandwidth must be >= 0 bytes/s, got {bytes_per_s}")
        self._control("POST", f"/bandwidth?bytes_per_s={float(bytes_per_s or 0)!r}")
        self.bandwidth = bytes_per_s or None

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

        self._client = boto3.client("s3", endpoint_url=self.url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION,
                            config=Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1}))
        return self._client

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (counted as one OTHER request)."""
        self.client().create_bucket(Bucket=name)

    def probe_request_cost(self, bucket: str, key: str, repeats: int = 5) -> dict[str, Any]:
        """Measure the endpoint's own per-request cost, with emulation switched off.

        Temporarily sets latency and bandwidth to 0, issues ``repeats`` 1-byte and
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
        latency, bandwidth = self.latency_ms, self.bandwidth
        self.set_latency(0)
        self.set_bandwidth(None)
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
            self.set_bandwidth(bandwidth)
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
        with S3Endpoint(latency_ms=0, fast_range=fast) as ep:
            ep.create_bucket("probe")
            ep.client().put_object(Bucket="probe", Key="blob", Body=payload)
            result = ep.probe_request_cost("probe", "blob", repeats=repeats)
            print(json.dumps(result), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.object_store",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="run the endpoint until killed; prints its URL")
    p_serve.add_argument("--host", default="127.0.0.1")
    p_serve.add_argument("--port", type=int, default=0, help="0 = let the OS choose (default)")
    p_serve.add_argument("--latency-ms", type=float, default=DEFAULT_LATENCY_MS)
    p_serve.add_argument("--bandwidth", type=float, default=0.0,
                         help="response bytes per second, 0 = unlimited (default)")
    p_serve.add_argument("--no-fast-range", action="store_true",
                         help="run stock moto (ranged GET copies the whole object)")
    p_serve.add_argument("--url-file", help=argparse.SUPPRESS)
    p_serve.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
    p_probe = sub.add_parser("probe", help="measure ranged-GET cost with and without the range patch")
    p_probe.add_argument("--size-mb", type=int, default=200)
    p_probe.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.command == "serve":
        if args.latency_ms < 0 or args.bandwidth < 0:
            parser.error("--latency-ms and --bandwidth must be >= 0")
        serve(host=args.host, port=args.port, latency_ms=args.latency_ms,
              bandwidth=args.bandwidth or None, fast_range=not args.no_fast_range,
              url_file=args.url_file, exit_with_parent=args.exit_with_parent)
    elif args.command == "probe":
        _probe_cli(args.size_mb, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
