import errno
import multiprocessing
import os
import time

import pytest

from raptorx_py import errors
from raptorx_py.metrics import (
    Counters,
    MetricsSink,
    counters,
    deferring_flushes,
    diff,
    flush,
    process_source,
)


@pytest.mark.parametrize(
    "exc,cls,builtin,text",
    [
        (
            FileNotFoundError("gone"),
            errors.StorageNotFoundError,
            FileNotFoundError,
            "does not exist",
        ),
        (
            OSError(errno.ENOENT, "x"),
            errors.StorageNotFoundError,
            FileNotFoundError,
            "does not exist",
        ),
        (PermissionError("no"), errors.StoragePermissionError, PermissionError, "denied"),
        (ConnectionRefusedError("refused"), errors.StorageError, OSError, "could not connect to"),
        (
            type("EndpointConnectionError", (Exception,), {})("x"),
            errors.StorageError,
            OSError,
            "could not connect to",
        ),
        (RuntimeError("odd"), errors.StorageError, OSError, "RuntimeError: odd"),
    ],
)
def test_storage_error_table(exc, cls, builtin, text):
    out = errors.translate_storage_error(exc, "s3://b/k")
    assert type(out) is cls and isinstance(out, builtin)
    assert "s3://b/k" in str(out) and text in str(out)


def test_a_connection_error_names_the_endpoint():
    from botocore.exceptions import EndpointConnectionError

    exc = EndpointConnectionError(endpoint_url="http://127.0.0.1:9/bucket/key?list-type=2")
    out = errors.translate_storage_error(exc, "s3://bucket/key")
    assert str(out).startswith("could not connect to http://127.0.0.1:9 for s3://bucket/key: ")


def test_our_errors_pass_through_translation():
    e = errors.CorruptFileError("s3://b/k", "bad magic")
    assert errors.translate_storage_error(e, "other") is e
    assert str(e) == "Corrupt or truncated Parquet file s3://b/k: bad magic"


def test_config_error_names_source_line_key():
    e = errors.ConfigError("bad value", source="conf/hive.properties", line=7, key="a.b")
    assert str(e) == "conf/hive.properties:7, property 'a.b': bad value"
    assert isinstance(e, ValueError)


def test_counters_drain():
    c = Counters()
    c.add("a.b")
    c.add("a.b", 4)
    assert c.snapshot() == {"a.b": 5}
    assert c.drain() == {"a.b": 5} and c.snapshot() == {}


def test_counts_of_a_detached_thread_reach_the_scopes_only_when_added():
    """``detached``: a thread's counts go to the process's counts and its own Counter, not
    to the scopes open meanwhile (another scan's planning); ``add_to_scopes`` adds them to
    the scopes open when the work is taken."""
    import threading

    c = Counters()
    with c.scope() as meanwhile:
        done = {}

        def ahead():
            with c.detached() as counted:
                c.add("storage.listings", 2)
            done.update(counted)

        t = threading.Thread(target=ahead)
        t.start()
        t.join()
        c.add("planning.scans")
    assert done == {"storage.listings": 2}
    assert dict(meanwhile) == {"planning.scans": 1}
    assert c.snapshot() == {"storage.listings": 2, "planning.scans": 1}
    with c.scope() as taker:
        c.add_to_scopes(done)
    assert dict(taker) == {"storage.listings": 2}
    assert c.snapshot()["storage.listings"] == 2  # not counted twice


def _child(directory):
    counters.drain()
    counters.add("child.count", 3)
    flush(directory)


def _executor_child(directory, cwd):
    os.chdir(cwd)  # where a standalone worker starts executor 3 of an application
    counters.drain()
    counters.add("child.count", 5)
    flush(directory)


def test_sink_keeps_each_spark_process_apart(tmp_path):
    """An executor's Python worker (working directory ``<work>/app-*/<id>``) counts as
    ``executor <id>``; any other process as ``driver``; ``totals`` sums them all."""
    sink = MetricsSink(str(tmp_path / "m"))
    executor_dir = tmp_path / "work" / "app-20261124001122-0000" / "3"
    executor_dir.mkdir(parents=True)
    counters.drain()
    counters.add("child.count", 2)
    flush(sink.directory)
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_executor_child, args=(sink.directory, str(executor_dir)))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert process_source() == "driver"
    assert sink.totals_by_source() == {
        "driver": {"child.count": 2},
        "executor 3": {"child.count": 5},
    }
    assert sink.totals() == {"child.count": 7}


def test_sink_sums_across_processes(tmp_path):
    sink = MetricsSink(str(tmp_path / "m"))
    counters.drain()
    counters.add("parent.count", 2)
    flush(sink.directory)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_child, args=(sink.directory,)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    totals = sink.totals()
    assert totals["parent.count"] == 2 and totals["child.count"] == 6
    assert diff(totals, {"child.count": 6}) == {"parent.count": 2}
    sink.clear()
    assert sink.totals() == {}


def test_flush_without_directory_keeps_counts():
    counters.drain()
    counters.add("x.y")
    flush("")
    # Only this test's key: a Spark session of an earlier test in this process keeps its
    # planner's metastore refresher counting (hive.metastore-refresh-interval, 1s).
    assert counters.snapshot()["x.y"] == 1
    counters.drain()


def test_a_deferred_flush_keeps_the_counts_until_the_next_flush(tmp_path, monkeypatch):
    """Inside ``deferring_flushes`` (the driver's planner) a flush writes nothing; the next
    flush outside it ships everything counted meanwhile.

    The deferred flusher's timer would write them on its own thread at once (its last write
    is ``FLUSH_INTERVAL`` old), racing the first reading on a loaded machine: here it has
    just written and the interval is an hour, so only the flush outside the block writes."""
    from raptorx_py import metrics

    flusher = metrics._DeferredFlusher()
    flusher._last = time.monotonic()
    monkeypatch.setattr(metrics, "FLUSH_INTERVAL", 3600.0)
    monkeypatch.setattr(metrics, "_flusher", flusher)
    directory = str(tmp_path / "m")
    sink = MetricsSink(directory)
    flush(directory)  # whatever earlier tests left in this process
    before = sink.totals()
    try:
        with deferring_flushes():
            counters.add("deferred.count", 3)
            flush(directory)
            assert diff(sink.totals(), before) == {}
        flush(directory)
        assert diff(sink.totals(), before) == {"deferred.count": 3}
    finally:
        if flusher._timer is not None:
            flusher._timer.cancel()


def test_unwritable_sink_never_raises_and_keeps_counts(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    counters.drain()
    counters.add("x.y", 2)
    flush(str(blocker / "sub"))  # a file where the directory should be
    assert counters.snapshot()["x.y"] == 2  # (another test's refresher may count beside it)
    counters.drain()


@pytest.mark.parametrize(
    "exc,expected",
    [
        (ConnectionRefusedError("refused"), True),
        (TimeoutError("slow"), True),
        (type("EndpointConnectionError", (Exception,), {})("x"), True),
        (type("ClientError", (Exception,), {})("403"), True),
        (type("FileExpired", (OSError,), {})("etag"), True),
        (ValueError("Parquet magic bytes not found"), False),
        (EOFError("short read"), False),
    ],
)
def test_storage_failures_are_told_from_bad_bytes(exc, expected):
    assert errors.is_storage_failure(exc) is expected


def test_the_jvms_appended_counts_are_folded_in(tmp_path):
    """The JVM (FragmentHits.scala) appends ``source<TAB>name<TAB>value`` lines to its own
    file under ``jvm-counters/``; a line still being written (no newline) is not read yet."""
    sink = MetricsSink(str(tmp_path / "m"))
    sink.write({"fragment_cache.hits": 2})
    jvm = tmp_path / "m" / MetricsSink.JVM_COUNTS_DIR
    jvm.mkdir()
    (jvm / "a.tsv").write_text(
        "executor 1\tfragment_cache.hits\t3\nexecutor 1\tfragment_cache.jvm_hits\t3\n"
        "executor 1\tfragment_cache.hits\t9"
    )
    (jvm / "b.tsv").write_text("driver\tfragment_cache.jvm_hits\t1\n")
    assert sink.totals()["fragment_cache.hits"] == 5
    assert sink.totals()["fragment_cache.jvm_hits"] == 4
    by_source = sink.totals_by_source()
    assert by_source["executor 1"] == {"fragment_cache.hits": 3, "fragment_cache.jvm_hits": 3}
    assert by_source["driver"]["fragment_cache.jvm_hits"] == 1
    sink.clear()
    assert sink.totals() == {}


def test_a_listed_files_not_found_and_range_not_satisfiable_are_a_changed_file():
    """The translation table, with and without a listed identity."""
    import errno as errno_

    from raptorx_py.errors import (
        CorruptFileError,
        FileChangedError,
        StorageError,
        StorageNotFoundError,
        is_storage_failure,
        translate_storage_error,
    )

    url = "s3://b/t/m=1/part-0.parquet"
    gone = FileNotFoundError("The specified key does not exist.")
    short = OSError(errno_.EINVAL, "The requested range is not satisfiable")
    assert is_storage_failure(gone) and is_storage_failure(short)
    assert isinstance(translate_storage_error(gone, url, listed=True), FileChangedError)
    assert isinstance(translate_storage_error(short, url, listed=True), FileChangedError)
    assert "shorter than when it was listed" in str(
        translate_storage_error(short, url, listed=True)
    )
    # Without a listed identity: a missing path, a refused request.
    assert type(translate_storage_error(gone, url)) is StorageNotFoundError
    assert type(translate_storage_error(short, url)) is StorageError
    ours = StorageNotFoundError(f"{url} does not exist")
    assert isinstance(translate_storage_error(ours, url, listed=True), FileChangedError)
    assert translate_storage_error(ours, url) is ours
    # Bytes that are not Parquet stay corrupt.
    assert not is_storage_failure(OSError("Parquet magic bytes not found"))
    assert CorruptFileError(url, "x").path == url
