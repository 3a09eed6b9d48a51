"""Shared fixtures: one SparkSession with tiered_hive for the whole run, a session metastore,
the metrics sink, and (from the plugin modules) the S3 endpoint and TPC-H data."""

from __future__ import annotations

import itertools
import os
import sys

import pytest

# Spark's Python workers must run this interpreter; whichever fixture starts the JVM first.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

pytest_plugins = [
    "tests.support.s3_fixtures",
    "tests.support.tpch_fixtures",
    "tests.support.metastore_fixtures",
    "tests.support.postgres_fixtures",
    "tests.support.hms_fixtures",
    "tests.support.wheel_fixtures",
]

_names = itertools.count(1)


class Env:
    """The test session's raptorx configuration: a metastore file, a metrics directory, cache
    directories of its own (never the user's ``~/.raptorx``) and every cache tier off
    (``raptorx_py.config.TIERS_OFF``: the shipped defaults turn them all on; a test that
    wants a tier turns it on itself)."""

    def __init__(self, root):
        from raptorx_py.config import TIERS_OFF

        self.root = str(root)
        self.metastore_path = os.path.join(self.root, "metastore.db")
        self.metrics_dir = os.path.join(self.root, "metrics")
        self.warehouse_dir = os.path.join(self.root, "warehouse")
        self.properties = {
            "hive.metastore.url": f"sqlite:///{self.metastore_path}",
            "hive.metastore.warehouse.dir": self.warehouse_dir,
            "metrics.directory": self.metrics_dir,
            "cache.base-directory": os.path.join(self.root, "cache"),
            "fragment-result-cache.base-directory": os.path.join(self.root, "fragment-cache"),
            **TIERS_OFF,
        }

    def settings(self, **extra):
        from raptorx_py.config import load_settings

        return load_settings(overrides={**self.properties, **extra})

    def metastore(self, **extra):
        from raptorx_py.metastore import open_metastore

        connection = self.settings(**extra).metastore_connection
        return open_metastore(connection, create=True)  # the tests set it up

    def totals(self) -> dict[str, int]:
        from raptorx_py.metrics import MetricsSink

        return MetricsSink(self.metrics_dir).totals()

    def unique_db(self, prefix="db") -> str:
        return f"{prefix}{next(_names)}"


@pytest.fixture(scope="session")
def env(tmp_path_factory) -> Env:
    return Env(tmp_path_factory.mktemp("raptorx"))


@pytest.fixture(scope="session")
def spark(env):
    """A local[2] SparkSession with tiered_hive registered on the session's metastore."""
    from devservers import s3a_jars
    from raptorx_py.session import tiered_session
    from tests.support.jvm_options import spark_java_options

    session = tiered_session(
        master="local[2]",
        app_name="raptorx-tests",
        properties=env.properties,
        spark_conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.memory": "2g",
            "spark.ui.showConsoleProgress": "false",
            # C1 only and the serial collector (tests/support/jvm_options.py).
            "spark.driver.extraJavaOptions": spark_java_options(),
            # hadoop-aws, for Spark's own reader over s3a:// (tests/s3a_fixtures.py).
            "spark.jars": ",".join(s3a_jars.resolve()),
        },
    )
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _no_deferred_sink_write_pending():
    """Each test starts with no metrics-sink write pending that an earlier test's driver
    planner put off (``metrics.deferring_flushes``): that write, up to a second later,
    drains this process's counts, a later test's included, into the earlier test's sink.
    On two xdist workers a module can follow another's Spark queries within that second
    (``test_cli_cache.py`` once saw 2 of its 6 footer misses)."""
    from raptorx_py import metrics

    metrics.settle_deferred_flushes()


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on (bound, then released, by the OS)."""
    from devservers.ports import free_port as free

    return free()


@pytest.fixture
def counted(env):
    """``with counted() as c: ...; c["reader.files_opened"]``: what every process counted
    in the block (through the session's metrics sink; ``tests/support/counter_deltas.py``)."""
    from tests.support.counter_deltas import CounterDeltas, sink_totals

    return lambda: CounterDeltas(read=sink_totals(env.metrics_dir))
