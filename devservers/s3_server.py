"""The emulated S3 server: moto's S3 server behind a latency/throughput-emulating,
request-counting WSGI middleware, meant to run in a process of its own.

Why: tests and benchmarks need an S3 endpoint on the machine, but a loopback
emulator answers in microseconds, which hides exactly what a cache saves.  This
module charges every S3 request a configurable latency before its first byte
(default 20 ms) and a throughput per connection (default 90 MB/s, AWS's guideline of one
connection per 85-90 MB/s wanted), so a response of N bytes takes at least
``latency + N / throughput``: a client that makes many small requests pays in latency, one
that moves many bytes pays in throughput, as on S3.  It also counts requests by kind, so
tests can assert "this read issued 3 ranged GETs and no LIST" without timing anything.

This module is the server side only.  Tests and benchmarks start, stop and query
it through :class:`devservers.s3_endpoint.S3Endpoint`, which runs
``python -m devservers.s3_endpoint serve`` (that is, :func:`serve`) in a child
process.

Contract
--------
* :func:`serve` runs a multi-threaded werkzeug server on ``host:port`` (port 0 =
  chosen by the OS) in the calling process until it is killed, prints its URL
  (and writes it to ``url_file``, atomically, if given) once it listens.  With
  ``exit_with_parent`` the process exits by itself when its parent dies.
* Latency and throughput (:class:`EmulationMiddleware`): every S3 request sleeps
  ``latency_ms`` before it reaches moto; with a throughput set, the response body
  is then released in 64 KiB pieces, each no earlier than ``first byte time +
  bytes sent / throughput``. A connection carries one response at a time (HTTP/1.1), so
  pacing each response is pacing each connection, whatever the client (s3fs, s3a, boto3);
  clients that open more connections get more throughput in all, as on S3.  Both settings
  can be changed at run time through the control endpoints and apply to requests that
  start afterwards.
* Control endpoints live under ``/_raptorx/`` (moto never sees them; they are
  neither counted nor delayed):

  ``GET  /_raptorx/health``                 -> ``{"ok": true, "pid": ...}``
  ``GET  /_raptorx/stats``                  -> counters, see
                                               :meth:`devservers.s3_endpoint.S3Endpoint.stats`
  ``POST /_raptorx/reset``                  -> zero all counters
  ``POST /_raptorx/latency?ms=20``          -> set the per-request latency (0 = off)
  ``POST /_raptorx/throughput?mbps=N``     -> set the throughput per connection in MB/s
                                               (10**6 bytes a second; 0 = unlimited)

* Request kinds (path-style addressing, ``/bucket/key``; :func:`classify_request`):

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
  ``bytes["RANGED_GET"]`` are the object bytes served by GetObject.  Also counted:
  response status classes, time spent inside moto per kind, the emulated delay
  injected, and the highest number of requests in flight at once.

moto's own per-request cost
---------------------------
moto answers a ranged GET by copying the whole object out of its buffer and then
slicing it, so its own cost grows with object size.  By default the server process
installs a small patch (:func:`install_range_patch`) that makes GetObject with a
single ``Range`` read only the requested bytes; ``S3Endpoint(fast_range=False)``
(``serve(fast_range=False)``) runs stock moto.  Limits of the patch: it handles
only a single byte range (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``); multi-range
requests and every other operation go through stock moto.  It is written against
moto 5.2.x internals; if they are shaped differently it patches nothing, says so
on stderr, and the stats report ``fast_range: false``.  It patches moto's classes
for the whole process, so install it only inside the server process.

Two more patches make moto's work per request smaller without changing any response
(:func:`make_app` installs both; checked header by header and byte by byte against stock
moto on HEAD, GET, ranged GET, LIST and error responses): a request's backend, looked up
from its host through every moto module's URL patterns twice a request, is remembered per
host, and a stored last-modified time's conversion to a response's text (dateutil parsing,
each object of a LIST) is remembered per value (:func:`install_timestamp_memo`). Together
about 1.7 instead of 2.7 ms of the server's CPU per request of a mix of HEAD, ranged GET
and a LIST of 20 objects (2026-11-28).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = [
    "ACCESS_KEY",
    "CONTROL_PREFIX",
    "DEFAULT_LATENCY_MS",
    "DEFAULT_THROUGHPUT_MBPS",
    "KINDS",
    "MB",
    "REGION",
    "SECRET_KEY",
    "EmulationMiddleware",
    "classify_request",
    "install_range_patch",
    "install_timestamp_memo",
    "make_app",
    "serve",
]

#: Path prefix of the control endpoints; requests under it never reach moto.
CONTROL_PREFIX = "/_raptorx"

#: Request kinds, in the order the stats report them.
KINDS = ("LIST", "HEAD", "GET", "RANGED_GET", "PUT", "DELETE", "OTHER")

DEFAULT_LATENCY_MS = 20.0
#: Response throughput per connection, MB/s (10**6 bytes a second); 0 = unlimited.
DEFAULT_THROUGHPUT_MBPS = 90.0
MB = 1_000_000
#: Credentials and region moto accepts; clients of the server use these.
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"

# Query parameters that keep a request in its "data" kind; any other parameter
# (a sub-resource such as ?acl or ?tagging) makes it OTHER.
_LIST_PARAMS = frozenset(
    {
        "list-type",
        "prefix",
        "delimiter",
        "marker",
        "continuation-token",
        "max-keys",
        "encoding-type",
        "fetch-owner",
        "start-after",
        "versions",
        "key-marker",
        "version-id-marker",
        "x-id",
        "optional-object-attributes",
    }
)
_GET_PARAMS = frozenset({"versionId", "partNumber", "x-id"})
_PUT_PARAMS = frozenset({"partNumber", "uploadId", "x-id"})
_DELETE_PARAMS = frozenset({"versionId", "x-id"})

# One byte range ("bytes=a-b", "bytes=a-", "bytes=-n"): the only form the range
# patch handles; anything else goes through stock moto.
_SINGLE_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


# --------------------------------------------------------------------------- #
# Request classification (pure; used by the middleware)
# --------------------------------------------------------------------------- #
def classify_request(
    method: str, path: str, query_string: str = "", range_header: str | None = None
) -> str:
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
    """Thread-safe counters and the current latency/throughput settings."""

    def __init__(self, latency_ms: float, throughput_mbps: float, fast_range: bool):
        self.lock = threading.Lock()
        self.latency_ms = float(latency_ms)
        self.throughput_mbps = float(throughput_mbps or 0)
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
                "throughput_mbps": self.throughput_mbps,
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
    """WSGI response iterable that counts (and, with a throughput, paces) bytes.

    ``bytes_per_s``: the pace (None = unlimited); each 64 KiB piece leaves no earlier than
    ``first_byte_at + bytes sent so far / bytes_per_s``, the first one included, so an
    N-byte response takes at least N / bytes_per_s after its first byte time.
    """

    _PIECE = 64 * 1024

    def __init__(
        self,
        inner: Iterable[bytes],
        stats: _Stats,
        kind: str,
        bytes_per_s: float | None,
        first_byte_at: float,
    ):
        self._inner = inner
        self._stats = stats
        self._kind = kind
        self._bytes_per_s = bytes_per_s
        self._t0 = first_byte_at
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self._inner:
            if not chunk:
                continue
            if not self._bytes_per_s:
                sent += len(chunk)
                self._add_bytes(len(chunk))
                yield chunk
                continue
            view = memoryview(chunk)
            for start in range(0, len(view), self._PIECE):
                piece = bytes(view[start : start + self._PIECE])
                sent += len(piece)
                wait = self._t0 + sent / self._bytes_per_s - time.monotonic()
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
    """WSGI middleware: latency + throughput emulation, request counting, control API."""

    def __init__(
        self,
        app: Callable[..., Any],
        latency_ms: float = DEFAULT_LATENCY_MS,
        throughput_mbps: float = 0.0,
        fast_range: bool = False,
    ):
        self.app = app
        self.stats = _Stats(latency_ms, throughput_mbps, fast_range)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "") or ""
        if path == CONTROL_PREFIX or path.startswith(CONTROL_PREFIX + "/"):
            return self._control(environ, start_response, path[len(CONTROL_PREFIX) :])

        kind = classify_request(
            environ.get("REQUEST_METHOD", "GET"),
            path,
            environ.get("QUERY_STRING", ""),
            environ.get("HTTP_RANGE"),
        )
        st = self.stats
        with st.lock:
            st.requests[kind] += 1
            st.inflight += 1
            st.max_concurrent = max(st.max_concurrent, st.inflight)
            latency_s = st.latency_ms / 1000.0
            bytes_per_s = st.throughput_mbps * MB or None
            if latency_s > 0 or bytes_per_s:
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
            return (
                start_response(status, headers, exc_info)
                if exc_info
                else start_response(status, headers)
            )

        t0 = time.perf_counter()
        try:
            inner = self.app(environ, counting_start_response)
        except BaseException:
            with st.lock:
                st.inflight -= 1
            raise
        with st.lock:
            st.service_seconds[kind] += time.perf_counter() - t0
        return _CountedBody(inner, st, kind, bytes_per_s, first_byte_at)

    # -- control API ------------------------------------------------------- #
    def _control(
        self, environ: dict[str, Any], start_response: Callable[..., Any], sub: str
    ) -> list[bytes]:
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
            elif sub == "/throughput" and method == "POST":
                mbps = _parse_number(query, "mbps")
                with st.lock:
                    st.throughput_mbps = mbps
                body = {"throughput_mbps": mbps}
            else:
                return _json_response(
                    start_response,
                    "404 Not Found",
                    {"error": f"unknown control request {method} {CONTROL_PREFIX}{sub}"},
                )
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
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
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


def _not_installed(what: str) -> bool:
    """Say on stderr that ``what`` was not installed (moto's internals are not shaped as
    expected); False, for the installer to return."""
    print(f"s3_server: moto internals differ from 5.2.x; {what} not installed", file=sys.stderr)
    return False


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
    if (
        not isinstance(prop, property)
        or prop.fget is None
        or prop.fset is None
        or orig_get_object is None
        or not hasattr(S3Response, "_handle_range_header")
    ):
        return _not_installed("range patch")
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


def install_timestamp_memo() -> bool:
    """Remember moto's conversions of a stored timestamp to its text in a response.

    moto (5.2.x) stores an object's last-modified time as text and, for every response
    that shows it (each object of a LIST, the ``Last-Modified`` header of a HEAD or GET),
    parses it back with dateutil and formats it again: about 0.2 ms of the server's CPU
    each, 4.5 ms for a LIST of 20 objects. The conversion is a pure function of the text
    and the format, so its results are kept (for text and integer inputs, up to 65,536 of
    them; anything else is converted as before). Call it only inside the server process.
    Returns False (and patches nothing) if moto's internals are not shaped as expected."""
    try:
        from moto.core.serialize import TimestampSerializer
    except ImportError:
        return False
    convert = TimestampSerializer.__dict__.get("_convert_timestamp_to_str")
    if convert is None:
        return _not_installed("timestamp memo")
    if getattr(convert, "_raptorx_patched", False):
        return True

    remembered: dict[tuple[type, str | int, str], Any] = {}

    def memo_convert(self: Any, value: Any, timestamp_format: str) -> Any:
        if type(value) not in (str, int):
            return convert(self, value, timestamp_format)
        key = (type(self), value, timestamp_format)
        try:
            return remembered[key]
        except KeyError:
            text = convert(self, value, timestamp_format)
            if len(remembered) < 65536:  # bounded; past it, converted as before
                remembered[key] = text
            return text

    memo_convert._raptorx_patched = True  # type: ignore[attr-defined]
    TimestampSerializer._convert_timestamp_to_str = memo_convert  # type: ignore[method-assign]
    return True


def _dispatcher(create_backend_app: Callable[..., Any]) -> Any:
    """moto's ``DomainDispatcherApplication`` that remembers each host's backend.

    moto looks a request's backend up from its host twice a request, each time going through
    every moto module's name and URL patterns (about 1.4 ms of CPU a request, in a server
    that spends 2.7 to 7 ms on one); the answer depends on the host only, so it is kept."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    class RememberingDispatcher(DomainDispatcherApplication):
        def __init__(self, create_app: Callable[..., Any]) -> None:
            super().__init__(create_app)
            self._backend_by_host: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            try:
                return self._backend_by_host[host]
            except KeyError:
                backend = super().get_backend_for_host(host)
                self._backend_by_host[host] = backend
                return backend

    return RememberingDispatcher(create_backend_app)


def make_app(
    latency_ms: float = DEFAULT_LATENCY_MS,
    throughput_mbps: float = DEFAULT_THROUGHPUT_MBPS,
    fast_range: bool = True,
) -> EmulationMiddleware:
    """Build moto's S3 WSGI app wrapped in :class:`EmulationMiddleware` (server side), with
    moto's per-request look-ups of a host's backend and conversions of timestamps remembered
    (``_dispatcher``, :func:`install_timestamp_memo`: the same responses, less of the
    server's CPU)."""
    from moto.moto_server.werkzeug_app import create_backend_app

    patched = install_range_patch() if fast_range else False
    install_timestamp_memo()
    moto_app = _dispatcher(create_backend_app)
    return EmulationMiddleware(
        moto_app, latency_ms=latency_ms, throughput_mbps=throughput_mbps, fast_range=patched
    )


def _watch_parent(parent_pid: int) -> None:
    """Exit the server process as soon as the process that started it is gone."""
    while True:
        if os.getppid() != parent_pid:
            os._exit(0)
        time.sleep(0.5)


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    latency_ms: float = DEFAULT_LATENCY_MS,
    throughput_mbps: float = DEFAULT_THROUGHPUT_MBPS,
    fast_range: bool = True,
    url_file: str | None = None,
    exit_with_parent: bool = False,
) -> None:
    """Run the server in this process until killed (multi-threaded werkzeug server)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    class QuietHandler(MotoRequestHandler):
        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            """Per-request access logs are dropped (errors are still logged)."""

    app = make_app(latency_ms=latency_ms, throughput_mbps=throughput_mbps, fast_range=fast_range)
    server = make_server(host, port, app, threaded=True, request_handler=QuietHandler)
    server.daemon_threads = True
    url = f"http://{host}:{server.server_port}"
    if exit_with_parent:
        threading.Thread(
            target=_watch_parent, args=(os.getppid(),), daemon=True, name="watch-parent"
        ).start()
    if url_file:
        tmp = url_file + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(url)
        os.replace(tmp, url_file)
    print(url, flush=True)
    server.serve_forever()
