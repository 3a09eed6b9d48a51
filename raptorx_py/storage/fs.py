"""Filesystems for table URLs: ``file://`` (or a plain path) and ``s3://``, configured from
properties, and a counting file wrapper that is the reader's view of remote I/O.

Contract:
- ``filesystem_for(url, settings)`` returns an fsspec filesystem and the URL's path in that
  filesystem's form. Filesystems are cached per process by their configuration.
- Nothing here caches listings or data: s3fs's own listings cache is switched off, so every
  listing reaches the store and the file-listing tier (a later module) is the only cache.
- Storage failures surface as ``raptorx_py.errors.StorageError`` subclasses naming the URL.
"""

from __future__ import annotations

import functools
import io
import os
from urllib.parse import urlparse

import fsspec

from raptorx_py.config.settings import Settings
from raptorx_py.errors import StorageError
from raptorx_py.metrics import counters

SUPPORTED_SCHEMES = ("file", "s3", "s3a")


def split_url(url: str) -> tuple[str, str]:
    """``(scheme, path)``: ``s3://b/k`` -> ``("s3", "b/k")``; ``/x`` -> ``("file", "/x")``."""
    parsed = urlparse(url)
    scheme = parsed.scheme or "file"
    if scheme not in SUPPORTED_SCHEMES:
        raise StorageError(
            f"unsupported URL scheme '{scheme}' in {url}: "
            f"expected one of {', '.join(SUPPORTED_SCHEMES)}"
        )
    if scheme == "file":
        return "file", parsed.path if parsed.scheme else url
    return "s3", f"{parsed.netloc}{parsed.path}".rstrip("/")


def as_url(location: str) -> str:
    """A location as a URL: a local path (``/x/y``, ``x/y``, ``~/x``) becomes
    ``file:///abs/x/y``; a URL loses only a trailing slash."""
    if not urlparse(location).scheme:
        return "file://" + os.path.abspath(os.path.expanduser(location))
    return location.rstrip("/")


def join_url(scheme: str, path: str) -> str:
    return f"file://{path}" if scheme == "file" else f"s3://{path}"


def filesystem_for(url: str, settings: Settings) -> tuple[fsspec.AbstractFileSystem, str]:
    scheme, path = split_url(url)
    if scheme == "file":
        return local_fs(), path
    return _s3_fs(
        settings.s3_endpoint,
        settings.s3_access_key,
        settings.s3_secret_key,
        settings.s3_region,
        settings.s3_path_style_access,
        settings.s3_connect_timeout,
        settings.s3_socket_timeout,
        settings.s3_max_error_retries,
    ), path


@functools.cache
def local_fs() -> fsspec.AbstractFileSystem:
    """This process's one local filesystem (``file://``)."""
    return fsspec.filesystem("file")


def check_s3_reachable(endpoint: str, key: str, secret: str, connect_timeout: float) -> None:
    """Without configured keys, find credentials the way botocore will, before any request:
    none at all would surface as botocore's ``NoCredentialsError`` at the first request,
    which hides a more basic fault, an endpoint nothing listens on. So then the endpoint is
    tried first (``could not connect to <endpoint>``), else the missing credentials are named."""
    if key and secret:
        return
    import botocore.session

    if botocore.session.get_session().get_credentials() is not None:
        return
    if endpoint:
        import socket

        parsed = urlparse(endpoint)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            socket.create_connection((parsed.hostname or "", port), timeout=connect_timeout).close()
        except OSError as e:
            raise StorageError(
                f"could not connect to {endpoint} (hive.s3.endpoint): {e.strerror or e}"
            ) from e
    raise StorageError(
        "no S3 credentials: set hive.s3.aws-access-key and hive.s3.aws-secret-key, or provide "
        "them the AWS way (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, ~/.aws/credentials)"
        + (f"; endpoint {endpoint}" if endpoint else "")
    )


@functools.lru_cache(maxsize=32)
def _s3_fs(endpoint, key, secret, region, path_style, connect_timeout, socket_timeout, retries):
    import s3fs

    check_s3_reachable(endpoint, key, secret, connect_timeout)
    client_kwargs = {}
    if endpoint:
        client_kwargs["endpoint_url"] = endpoint
    if region:
        client_kwargs["region_name"] = region
    config_kwargs = {
        "connect_timeout": connect_timeout,
        "read_timeout": socket_timeout,
        "retries": {"max_attempts": retries + 1, "mode": "standard"},
    }
    if path_style:
        config_kwargs["s3"] = {"addressing_style": "path"}
    fs = s3fs.S3FileSystem(
        key=key or None,
        secret=secret or None,
        client_kwargs=client_kwargs,
        config_kwargs=config_kwargs,
        use_listings_cache=False,
        skip_instance_cache=True,
        default_cache_type="none",
        # Compare each ranged GET's ETag with the one the file was opened with (the listing's),
        # so bytes of an object overwritten mid-query are never mixed with the old ones.
        local_expiry_check=True,
    )
    # s3fs retries on top of botocore with its own back-off; keep the total bounded so an
    # unreachable endpoint fails in seconds, not minutes.
    fs.retries = max(1, retries)
    return fs


class CountingFile(io.RawIOBase):
    """A read-only view of an fsspec file that counts reads and bytes for the reader tier.

    Counts ``reader.read_calls`` and ``reader.bytes_read``; with ``remote`` (the file is the
    store's own, not the block cache's) also ``storage.remote_requests`` and
    ``storage.remote_bytes``, which the block cache counts itself for what it fetches.
    Everything else is passed through. The wrapped file is closed with this one.
    """

    def __init__(self, raw, remote: bool = False):
        super().__init__()
        self._raw = raw
        self._remote = remote

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        counters.add("reader.read_calls")
        counters.add("reader.bytes_read", len(data))
        if self._remote:
            counters.add("storage.remote_requests")
            counters.add("storage.remote_bytes", len(data))
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()

    @property
    def size(self) -> int:
        return self._raw.size
