"""pytest plugin: fixtures for the local S3 endpoint (devservers.s3_endpoint).

Load it with ``pytest_plugins = ["tests.support.s3_fixtures"]`` in a conftest.py, or
``pytest -p tests.support.s3_fixtures``.

* ``s3_endpoint`` (session): one :class:`~devservers.s3_endpoint.S3Endpoint`
  with latency 0 and unlimited throughput, started on first use and stopped at the end of
  the session.
  Tests that change its latency or throughput must restore them.
* ``s3_bucket`` (function): a freshly created, uniquely named bucket on that
  endpoint; the request counters are reset after the bucket is created, so a
  test sees only its own requests.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from devservers.s3_endpoint import S3Endpoint

_bucket_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """A moto-backed S3 endpoint in its own process, latency 0, unlimited throughput, shared
    by the session."""
    endpoint = S3Endpoint(latency_ms=0.0, throughput_mbps=0.0)
    endpoint.start()
    try:
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture
def s3_bucket(s3_endpoint: S3Endpoint) -> str:
    """Name of a new empty bucket; the endpoint's counters are reset afterwards."""
    name = f"raptorx-test-{os.getpid()}-{next(_bucket_numbers)}"
    s3_endpoint.create_bucket(name)
    s3_endpoint.reset_stats()
    return name
