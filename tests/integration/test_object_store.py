"""The local S3 endpoint (devservers/s3_endpoint.py, its server devservers/s3_server.py):
counting, control API, latency bookkeeping, lifecycle, and the ranged-GET patch.
Counts, never timings."""

from __future__ import annotations

import os
import re
import stat
import time

import botocore.exceptions
import pytest
import s3fs

from devservers.s3_endpoint import EndpointStartError, S3Endpoint
from devservers.s3_server import KINDS, classify_request

pytestmark = pytest.mark.s3

DATA = bytes(range(256)) * 40  # 10240 bytes, deterministic


def _fs(endpoint: S3Endpoint) -> s3fs.S3FileSystem:
    """A fresh s3fs instance with no listing cache, so every call hits the endpoint."""
    return s3fs.S3FileSystem(
        skip_instance_cache=True, use_listings_cache=False, **endpoint.storage_options()
    )


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    "method, path, query, rng, kind",
    [
        ("GET", "/bkt", "list-type=2&prefix=a%2F&delimiter=%2F", None, "LIST"),
        ("GET", "/bkt/", "", None, "LIST"),
        ("GET", "/bkt", "location", None, "OTHER"),
        ("GET", "/", "", None, "OTHER"),
        ("HEAD", "/bkt/a/b.parquet", "", None, "HEAD"),
        ("HEAD", "/bkt", "", None, "HEAD"),
        ("GET", "/bkt/a/b.parquet", "x-id=GetObject", None, "GET"),
        ("GET", "/bkt/a/b.parquet", "", "bytes=0-99", "RANGED_GET"),
        ("GET", "/bkt/a/b.parquet", "tagging", None, "OTHER"),
        ("PUT", "/bkt/a/b.parquet", "", None, "PUT"),
        ("PUT", "/bkt/a/b.parquet", "partNumber=2&uploadId=xyz", None, "PUT"),
        ("PUT", "/bkt/a/b.parquet", "acl", None, "OTHER"),
        ("PUT", "/bkt", "", None, "OTHER"),
        ("POST", "/bkt/a/b.parquet", "uploads", None, "OTHER"),
        ("DELETE", "/bkt/a/b.parquet", "", None, "DELETE"),
        ("POST", "/bkt", "delete", None, "DELETE"),
        ("DELETE", "/bkt/a/b.parquet", "uploadId=xyz", None, "OTHER"),
    ],
)
def test_classify_request(method, path, query, rng, kind):
    assert classify_request(method, path, query, rng) == kind


def test_requests_counted_by_kind_with_bytes(s3_endpoint, s3_bucket):
    fs = _fs(s3_endpoint)
    path = f"{s3_bucket}/dt=2024-01-01/part-0.bin"

    fs.pipe_file(path, DATA)
    stats = s3_endpoint.stats()
    assert _nonzero(stats["requests"]) == {"PUT": 1}
    assert stats["status"]["2xx"] == 1

    s3_endpoint.reset_stats()
    assert fs.info(path)["size"] == len(DATA)
    assert _nonzero(s3_endpoint.stats()["requests"]) == {"HEAD": 1}

    s3_endpoint.reset_stats()
    assert fs.ls(f"{s3_bucket}/dt=2024-01-01", detail=False) == [path]
    assert _nonzero(s3_endpoint.stats()["requests"]) == {"LIST": 1}

    s3_endpoint.reset_stats()
    assert fs.cat_file(path, max_concurrency=1) == DATA
    stats = s3_endpoint.stats()
    assert _nonzero(stats["requests"]) == {"GET": 1}
    assert stats["bytes"]["GET"] == len(DATA)
    assert stats["bytes"]["RANGED_GET"] == 0

    s3_endpoint.reset_stats()
    assert fs.cat_file(path, start=1000, end=1250) == DATA[1000:1250]
    assert fs.cat_file(path, start=len(DATA) - 8) == DATA[-8:]
    stats = s3_endpoint.stats()
    assert _nonzero(stats["requests"]) == {"RANGED_GET": 2}
    assert stats["bytes"]["RANGED_GET"] == 250 + 8
    assert stats["bytes"]["GET"] == 0

    s3_endpoint.reset_stats()
    fs.rm_file(path)
    assert _nonzero(s3_endpoint.stats()["requests"]) == {"DELETE": 1}


def test_missing_object_counts_a_4xx(s3_endpoint, s3_bucket):
    client = s3_endpoint.client()
    with pytest.raises(botocore.exceptions.ClientError):
        client.get_object(Bucket=s3_bucket, Key="nope", Range="bytes=0-9")
    stats = s3_endpoint.stats()
    assert _nonzero(stats["requests"]) == {"RANGED_GET": 1}
    assert stats["status"]["4xx"] == 1 and stats["status"]["2xx"] == 0


def test_multipart_parts_count_as_put(s3_endpoint, s3_bucket):
    client = s3_endpoint.client()
    key = "big/object.bin"
    upload = client.create_multipart_upload(Bucket=s3_bucket, Key=key)
    part1 = b"a" * (5 << 20)  # S3's minimum size for a non-final part
    part2 = b"b" * 100
    etags = [
        client.upload_part(
            Bucket=s3_bucket, Key=key, UploadId=upload["UploadId"], PartNumber=n, Body=body
        )["ETag"]
        for n, body in ((1, part1), (2, part2))
    ]
    client.complete_multipart_upload(
        Bucket=s3_bucket,
        Key=key,
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in zip((1, 2), etags)]},
    )
    # create + complete are OTHER, each part is a PUT
    assert _nonzero(s3_endpoint.stats()["requests"]) == {"PUT": 2, "OTHER": 2}
    assert client.head_object(Bucket=s3_bucket, Key=key)["ContentLength"] == len(part1) + 100


def test_reset_zeroes_counters(s3_endpoint, s3_bucket):
    fs = _fs(s3_endpoint)
    fs.pipe_file(f"{s3_bucket}/x", b"hello")
    assert fs.cat_file(f"{s3_bucket}/x", max_concurrency=1) == b"hello"
    assert s3_endpoint.stats()["total_requests"] == 2

    s3_endpoint.reset_stats()
    stats = s3_endpoint.stats()
    assert stats["total_requests"] == 0
    assert stats["requests"] == dict.fromkeys(KINDS, 0)
    assert stats["bytes"] == dict.fromkeys(KINDS, 0)
    assert sum(stats["status"].values()) == 0
    assert stats["delayed_requests"] == 0


def test_control_requests_are_not_counted(s3_endpoint, s3_bucket):
    for _ in range(3):
        s3_endpoint.stats()
    s3_endpoint.set_latency(0)
    s3_endpoint.set_throughput(0)
    assert s3_endpoint._control("GET", "/health")["ok"] is True
    with pytest.raises(RuntimeError, match="HTTP 404"):
        s3_endpoint._control("GET", "/no-such-thing")
    with pytest.raises(RuntimeError, match="HTTP 400.*'ms'"):
        s3_endpoint._control("POST", "/latency?ms=fast")
    stats = s3_endpoint.stats()
    assert stats["total_requests"] == 0
    assert sum(stats["status"].values()) == 0


def test_latency_is_applied_and_reported(s3_endpoint, s3_bucket):
    fs = _fs(s3_endpoint)
    s3_endpoint.set_latency(2)
    try:
        fs.pipe_file(f"{s3_bucket}/k", DATA)
        fs.cat_file(f"{s3_bucket}/k", start=0, end=10)
        fs.cat_file(f"{s3_bucket}/k", start=10, end=20)
        stats = s3_endpoint.stats()
        assert stats["latency_ms"] == 2.0
        assert stats["total_requests"] == 3
        assert stats["delayed_requests"] == 3
        assert stats["injected_delay_seconds"] == pytest.approx(3 * 0.002)
    finally:
        s3_endpoint.set_latency(0)
    s3_endpoint.reset_stats()
    fs.cat_file(f"{s3_bucket}/k", start=0, end=10)
    stats = s3_endpoint.stats()
    assert stats["latency_ms"] == 0.0
    assert (stats["total_requests"], stats["delayed_requests"]) == (1, 0)


def test_throughput_setting_keeps_byte_counts(s3_endpoint, s3_bucket):
    fs = _fs(s3_endpoint)
    fs.pipe_file(f"{s3_bucket}/k", DATA)
    s3_endpoint.set_throughput(100)
    try:
        s3_endpoint.reset_stats()
        assert fs.cat_file(f"{s3_bucket}/k", max_concurrency=1) == DATA
        stats = s3_endpoint.stats()
        assert stats["throughput_mbps"] == 100
        assert stats["delayed_requests"] == 1
        assert stats["bytes"]["GET"] == len(DATA)
    finally:
        s3_endpoint.set_throughput(0)
    assert s3_endpoint.stats()["throughput_mbps"] == 0


NINE_MB = 9 * 10**6


@pytest.mark.parametrize("client", ["boto3", "s3fs"])
def test_throughput_paces_every_response_whatever_the_client(s3_endpoint, s3_bucket, client):
    """At 90 MB/s a 9 MB response cannot arrive in less than 0.1 s (a lower bound, which a
    slow machine cannot break), and a 10 KB one is paced too; the bytes are all counted."""
    s3_endpoint.client().put_object(Bucket=s3_bucket, Key="nine", Body=os.urandom(NINE_MB))
    fs = _fs(s3_endpoint)

    def read(start: int, end: int) -> int:
        if client == "boto3":
            body = s3_endpoint.client().get_object(
                Bucket=s3_bucket, Key="nine", Range=f"bytes={start}-{end - 1}"
            )["Body"]
            return len(body.read())
        return len(fs.cat_file(f"{s3_bucket}/nine", start=start, end=end))

    s3_endpoint.set_throughput(90)
    try:
        s3_endpoint.reset_stats()
        t0 = time.monotonic()
        assert read(0, NINE_MB) == NINE_MB
        elapsed = time.monotonic() - t0
        stats = s3_endpoint.stats()
    finally:
        s3_endpoint.set_throughput(0)
    assert elapsed >= 0.1, f"9 MB at 90 MB/s arrived in {elapsed:.3f} s"
    assert stats["bytes"]["RANGED_GET"] == NINE_MB
    assert stats["requests"]["RANGED_GET"] == 1
    # The pacing slept (at most 0.1 s in all: the first byte time starts the clock).
    assert 0 < stats["injected_delay_seconds"] <= 0.1 + 1e-6


def test_probe_request_cost_restores_settings(s3_endpoint, s3_bucket):
    s3_endpoint.client().put_object(Bucket=s3_bucket, Key="probe", Body=DATA)
    s3_endpoint.set_latency(1.5)
    try:
        result = s3_endpoint.probe_request_cost(s3_bucket, "probe", repeats=2)
        stats = s3_endpoint.stats()
    finally:
        s3_endpoint.set_latency(0)
    assert result["object_size"] == len(DATA)
    assert result["emulated_latency_ms"] == 1.5
    assert result["fast_range"] is True
    assert result["ranged_get_1b_s"] > 0 and result["ranged_get_1mib_s"] > 0
    assert stats["latency_ms"] == 1.5
    # 1 HEAD (object size) + 2 x (1 warm-up + 2 measured) ranged GETs, none delayed
    assert _nonzero(stats["requests"]) == {"PUT": 1, "HEAD": 1, "RANGED_GET": 6}
    assert stats["bytes"]["RANGED_GET"] == 3 * 1 + 3 * len(DATA)


def test_second_endpoint_stock_moto_matches_and_stops_cleanly(s3_endpoint, s3_bucket):
    """A second endpoint gets its own port and process; stock moto (no range patch)
    answers every ranged GET exactly like the patched endpoint; stop() reaps it."""
    body = DATA * 3
    ranges = [
        "bytes=0-0",
        "bytes=100-4195",
        "bytes=30000-",
        "bytes=-17",
        "bytes=30700-99999",
        "bytes=5-2",
        "bytes=0-1,5-6",
        "bytes=40000-40001",
    ]
    with S3Endpoint(latency_ms=0, throughput_mbps=0, fast_range=False) as stock:
        pid = stock.pid
        assert stock.port != s3_endpoint.port
        assert pid != s3_endpoint.pid and _process_exists(pid)
        assert stock.stats()["fast_range"] is False
        stock.create_bucket(s3_bucket)
        answers = {}
        for name, endpoint in (("stock", stock), ("fast", s3_endpoint)):
            client = endpoint.client()
            client.put_object(Bucket=s3_bucket, Key="obj", Body=body)
            for rng in ranges:
                try:
                    resp = client.get_object(Bucket=s3_bucket, Key="obj", Range=rng)
                    answers[name, rng] = (
                        resp["ResponseMetadata"]["HTTPStatusCode"],
                        resp.get("ContentRange"),
                        resp["Body"].read(),
                    )
                except botocore.exceptions.ClientError as exc:
                    answers[name, rng] = (
                        exc.response["ResponseMetadata"]["HTTPStatusCode"],
                        exc.response["Error"]["Code"],
                        None,
                    )
        for rng in ranges:
            assert answers["fast", rng] == answers["stock", rng], rng
        assert answers["fast", "bytes=-17"] == (
            206,
            f"bytes {len(body) - 17}-{len(body) - 1}/{len(body)}",
            body[-17:],
        )
        assert answers["fast", "bytes=40000-40001"][0] == 416
        stock.stop()
        assert not _process_exists(pid)
        stock.stop()  # idempotent


def test_start_fails_clearly_when_server_exits(tmp_path):
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\necho 'boom: cannot bind' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    endpoint = S3Endpoint(python_executable=str(fake), start_timeout=10)
    with pytest.raises(EndpointStartError, match=r"(?s)exited with code 3.*boom: cannot bind"):
        endpoint.start()
    assert endpoint.pid is None


def test_start_fails_clearly_when_server_hangs(tmp_path):
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\necho 'stuck before binding'\nexec sleep 60\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    endpoint = S3Endpoint(python_executable=str(fake), start_timeout=0.5, stop_timeout=2)
    with pytest.raises(
        EndpointStartError, match=r"(?s)not become healthy within 0.5 s.*stuck before binding"
    ) as err:
        endpoint.start()
    assert endpoint.pid is None
    pid = int(re.search(r"\(pid (\d+)\)", str(err.value)).group(1))
    assert not _process_exists(pid)


def test_constructor_rejects_bad_settings():
    with pytest.raises(ValueError, match="latency_ms"):
        S3Endpoint(latency_ms=-1)
    with pytest.raises(ValueError, match="throughput_mbps"):
        S3Endpoint(throughput_mbps=-5)
    with pytest.raises(RuntimeError, match="not started"):
        _ = S3Endpoint().url
