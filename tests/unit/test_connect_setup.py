"""What travels to a Spark Connect server, without starting one: path-like properties made
absolute in the client (``~`` is the client's home), and the command that starts pyspark's
bundled server with the jar and an interpreter that has raptorx_py."""

from __future__ import annotations

import sys

import pytest

from raptorx_py import cli
from raptorx_py.config import load_settings
from raptorx_py.config.paths import absolute_paths
from raptorx_py.connect import SERVER_CLASS, server_command, server_env
from raptorx_py.errors import ConnectServerError


def test_tilde_and_relative_paths_become_absolute_in_the_client():
    settings = load_settings(
        overrides={"hive.metastore.warehouse.dir": "wh", "metrics.directory": "~/m"}
    )
    out = absolute_paths(settings, home="/home/client", cwd="/work/dir")
    assert out.metastore_url == "sqlite:////home/client/.raptorx/metastore.db"
    assert out.warehouse_dir == "/work/dir/wh"
    assert out.cache_base_directory == "/home/client/.raptorx/cache"
    assert out.fragment_cache_base_directory == "/home/client/.raptorx/fragment-cache"
    assert out.metrics_directory == "/home/client/m"
    # And they travel as such: the strings shipped to the workers are the absolute ones.
    assert out.properties()["hive.metastore.url"] == "sqlite:////home/client/.raptorx/metastore.db"


def test_urls_empty_values_and_absolute_paths_are_left_alone():
    given = {
        "hive.metastore.url": "postgresql://u:p@db:5432/hms",
        "hive.metastore.warehouse.dir": "s3://bucket/wh",
        "cache.base-directory": "/var/cache/raptorx",
        "fragment-result-cache.base-directory": "/var/cache/raptorx-fragments",
        "metrics.directory": "",
    }
    settings = load_settings(overrides=given)
    assert absolute_paths(settings, home="/h", cwd="/c") is settings
    local = load_settings(
        overrides={
            "hive.metastore.warehouse.dir": "file://~/wh",
            "hive.metastore.url": "sqlite:///db/ms.db",
        }
    )
    out = absolute_paths(local, home="/h", cwd="/c")
    assert out.warehouse_dir == "file:///h/wh"
    assert out.metastore_url == "sqlite:////c/db/ms.db"


def test_server_command_puts_the_jar_on_both_classpaths(tmp_path):
    jar = tmp_path / "raptorx-native.jar"
    jar.write_bytes(b"PK")
    cmd = server_command(
        15123,
        jar=jar,
        python="/opt/py/bin/python",
        master="local[2]",
        conf={"spark.ui.enabled": "false"},
    )
    assert cmd[0].endswith("/bin/spark-submit") and cmd[-1] == "spark-internal"
    assert cmd[cmd.index("--class") + 1] == SERVER_CLASS
    assert cmd[cmd.index("--jars") + 1] == str(jar)
    assert cmd[cmd.index("--driver-class-path") + 1] == str(jar)
    confs = {cmd[i + 1] for i, c in enumerate(cmd) if c == "--conf"}
    assert {
        "spark.connect.grpc.binding.port=15123",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "spark.pyspark.python=/opt/py/bin/python",
        "spark.ui.enabled=false",
    } <= confs
    env = server_env(python="/opt/py/bin/python", env={})
    assert env == {"PYSPARK_PYTHON": "/opt/py/bin/python", "SPARK_LOCAL_IP": "127.0.0.1"}


def test_a_missing_jar_is_named(tmp_path):
    missing = tmp_path / "nope.jar"
    with pytest.raises(ConnectServerError, match=f"{missing} does not exist.*make native"):
        server_command(15002, jar=missing)


def test_cli_prints_the_start_command(tmp_path, capsys):
    jar = tmp_path / "raptorx-native.jar"
    jar.write_bytes(b"PK")
    assert (
        cli.main(["connect-server", "--port", "15124", "--jar", str(jar), "--print-command"]) == 0
    )
    line = capsys.readouterr().out
    assert f"PYSPARK_PYTHON={sys.executable}" in line and f"--jars {jar}" in line
    assert "spark.connect.grpc.binding.port=15124" in line
    assert cli.main(["connect-server", "--jar", str(tmp_path / "x.jar"), "--print-command"]) == 2
