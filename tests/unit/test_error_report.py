"""How our errors reach a person (``raptorx_py.error_report``), the S3 credentials and
endpoint check before the first request, and the TPC-H load that replaces only its own
tables. The end-to-end view (a user's script, its stderr) is
tests/integration/test_first_hour.py."""

from __future__ import annotations

import socket
import traceback

import pytest

from raptorx_py import error_report
from raptorx_py.errors import AlreadyExistsError, NoSuchObjectError, StorageError


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def _failing_read():
    try:
        raise KeyError("the metastore's own error")
    except KeyError as e:
        raise NoSuchObjectError("table", "db.t", ["db.u"]) from e


@error_report.short_worker_errors
def entry_point():
    _failing_read()


@error_report.short_worker_errors
def generator_entry_point():
    yield 1
    _failing_read()


def test_in_a_spark_worker_our_error_leaves_as_one_line_and_the_log_keeps_it(home, monkeypatch):
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "x")
    for call in (entry_point, lambda: list(generator_entry_point())):
        with pytest.raises(NoSuchObjectError) as info:
            call()
        e = info.value
        assert e.__cause__ is None and e.__suppress_context__
        # What pyspark's worker formats: the wrapper's frame, our line, the note. No cause.
        text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        assert "the metastore's own error" not in text and "_failing_read" not in text
        assert text.splitlines()[-2:] == [
            "raptorx_py.errors.NoSuchObjectError: table 'db.t' does not exist. "
            "Existing tables: db.u",
            f"(full traceback in {home / '.raptorx' / 'logs' / 'errors.log'})",
        ]
    log = (home / ".raptorx" / "logs" / "errors.log").read_text()
    assert log.count('KeyError: "the metastore\'s own error"') == 2  # the cause, each time
    assert log.count("The above exception was the direct cause") == 2


def test_outside_a_worker_the_error_is_untouched(home, monkeypatch):
    monkeypatch.delenv("PYTHON_WORKER_FACTORY_SECRET", raising=False)
    monkeypatch.delenv("PYTHON_WORKER_FACTORY_SOCK_DIR", raising=False)
    with pytest.raises(NoSuchObjectError) as info:
        entry_point()
    assert isinstance(info.value.__cause__, KeyError)
    assert not (home / ".raptorx" / "logs" / "errors.log").exists()


def test_concise_message_finds_our_error_in_a_pyspark_exception():
    ours = NoSuchObjectError("database", "tpch", [])
    assert error_report.concise_message(ours) == (
        "raptorx_py.errors.NoSuchObjectError: database 'tpch' does not exist. "
        "Existing databases: (none)"
    )
    fake = type("AnalysisException", (Exception,), {"__module__": "pyspark.errors.fake"})
    wrapped = fake(
        "[PYTHON_DATA_SOURCE_ERROR] Failed: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "raptorx_py.errors.StorageError: could not connect to http://h:1\n"
        "(full traceback in /l)\n SQLSTATE: 38000"
    )
    assert error_report.concise_message(wrapped) == (
        "raptorx_py.errors.StorageError: could not connect to http://h:1"
    )
    several = fake(
        "[PYTHON_DATA_SOURCE_ERROR] Failed: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "raptorx_py.errors.ConfigErrors: 2 problems in the configuration:\n"
        "  option, property 'a': invalid value 'x'\n"
        "  option, property 'b': invalid value 'y'\n"
        "(full traceback in /l)\n  SQLSTATE: 38000"
    )
    assert error_report.concise_message(several) == (
        "raptorx_py.errors.ConfigErrors: 2 problems in the configuration:\n"
        "  option, property 'a': invalid value 'x'\n"
        "  option, property 'b': invalid value 'y'"
    )
    assert error_report.concise_message(fake("no error of ours")) is None
    assert error_report.concise_message(ValueError("raptorx_py.errors.X: y")) is None


@pytest.fixture
def no_aws_credentials(home, monkeypatch):
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookup


def test_no_credentials_and_a_dead_endpoint_says_could_not_connect(no_aws_credentials, free_port):
    from raptorx_py.storage.fs import check_s3_reachable

    dead = f"http://127.0.0.1:{free_port}"
    with pytest.raises(StorageError, match=rf"^could not connect to {dead} \(hive.s3.endpoint\)"):
        check_s3_reachable(dead, "", "", 1.0)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        live = f"http://127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(StorageError, match=r"^no S3 credentials: set hive.s3.aws-access-key"):
            check_s3_reachable(live, "", "", 1.0)
    check_s3_reachable(dead, "key", "secret", 1.0)  # configured keys: nothing to look up


def test_tpch_load_replaces_only_its_own_tables(tmp_path, tpch_sf001_dir):
    from pathlib import Path

    from raptorx_py.config import load_settings
    from raptorx_py.hive.model import EXTERNAL_TABLE, Column, Table
    from raptorx_py.metastore import open_metastore
    from raptorx_py.tpch.load import load_tpch

    settings = load_settings(overrides={"hive.metastore.url": f"sqlite:///{tmp_path}/ms.db"})
    work = str(Path(tpch_sf001_dir).parent)
    warehouse = tmp_path / "warehouse"
    with open_metastore(settings.metastore_connection, create=True) as ms:
        ms.create_database("tpch")
        ms.create_table(
            Table(
                "tpch", "mine", EXTERNAL_TABLE, "file:///elsewhere/mine", (Column("a", "bigint"),)
            )
        )
    urls = load_tpch(
        0.01, str(warehouse), settings, work_dir=work, progress=False, only_own_tables=True
    )
    # A second load replaces what the first registered; 'mine' is never touched.
    assert (
        load_tpch(
            0.01, str(warehouse), settings, work_dir=work, progress=False, only_own_tables=True
        )
        == urls
    )
    with open_metastore(settings.metastore_connection) as ms:
        assert ms.get_table("tpch", "mine").location == "file:///elsewhere/mine"
        ms.create_table(
            Table(
                "tpch",
                "nation",
                EXTERNAL_TABLE,
                "file:///elsewhere/nation",
                (Column("n", "bigint"),),
            ),
            replace=True,
        )
    with pytest.raises(
        AlreadyExistsError,
        match=r"table tpch.nation already exists at "
        r"file:///elsewhere/nation .* left alone",
    ):
        load_tpch(
            0.01, str(warehouse), settings, work_dir=work, progress=False, only_own_tables=True
        )
    with open_metastore(settings.metastore_connection) as ms:
        assert ms.get_table("tpch", "nation").location == "file:///elsewhere/nation"
        assert ms.get_table("tpch", "lineitem").location == urls["lineitem"]


def test_concise_message_names_the_jvms_changed_file_as_our_error():
    """Spark's reader failing on a changed file after batches of it were handed on fails the
    task with the JVM's exception, inside Spark's stage failure: shown as FileChangedError."""
    fake = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
    stage = fake(
        "An error occurred while calling o1.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage "
        "3.0 failed 1 times, most recent failure: Lost task 0.0 (TID 7) (h executor driver): "
        "raptorx.cache.FileChangedException: s3a://b/t/k=1/f.parquet: planned as version etag:1 "
        "(size 9), but its size is now 4; the file changed after it was listed\n"
        "\tat raptorx.cache.BlockCachingInputStream.changed(BlockCachingFileSystem.scala:1)"
    )
    assert error_report.concise_message(stage) == (
        "raptorx_py.errors.FileChangedError: s3a://b/t/k=1/f.parquet: planned as version "
        "etag:1 (size 9), but its size is now 4; the file changed after it was listed"
    )
