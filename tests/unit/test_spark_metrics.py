"""What Python publishes for Spark's metrics system, without Spark: each
process's totals and the node's sizes in one file per process, replaced whole; at most once a
``PUBLISH_INTERVAL`` inside ``deferring_flushes``; the Spark confs ``tiered_session`` adds;
and the plugin's metric names, read from its Scala source, documented. The plugin reading
these files inside Spark: ``tests/integration/test_spark_metrics_plugin.py``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from raptorx_py import metrics
from raptorx_py.jvm_contract import protocol as jvm_protocol
from raptorx_py.metrics import counters
from raptorx_py.session import metrics_plugin_conf, spark_metrics_properties

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "native" / "src" / "main" / "scala" / "raptorx" / "CacheMetricsPlugin.scala"
JVM_SOURCES = PLUGIN.parent.parent  # native/src/main/scala
OBSERVABILITY = ROOT / "docs" / "design" / "observability.md"


def plugin_names() -> tuple[list[str], list[str]]:
    """The plugin's counter and size names, as its Scala source lists them."""
    text = PLUGIN.read_text()

    def listed(name: str) -> list[str]:
        block = re.search(rf"val {name}: Seq\[String\] = Seq\((.*?)\)", text, re.DOTALL)
        assert block, name
        return re.findall(r'"([^"]+)"', block.group(1))

    return listed("CounterNames"), listed("GaugeNames")


@pytest.fixture
def publisher(monkeypatch, tmp_path):
    """A publisher of its own (the process's keeps its time of last publishing), no sizes
    but the test's, and this process's directory under ``tmp_path`` (which the plugin
    makes when it starts)."""
    (tmp_path / metrics.process_directory()).mkdir()
    fresh = metrics._SnapshotPublisher()
    monkeypatch.setattr(metrics, "_publisher", fresh)
    monkeypatch.setattr(metrics, "_node_gauges", {})
    yield fresh
    fresh.final()


def _published(directory) -> dict[str, dict[str, int]]:
    """``{"c": {name: value}, "g": {...}}`` of the one file under ``directory``."""
    (process,) = os.listdir(directory)
    assert process == metrics.process_directory() == "driver"
    (name,) = os.listdir(os.path.join(directory, process))
    assert name.startswith(f"{os.getpid()}-") and name.endswith(jvm_protocol.SNAPSHOT_SUFFIX)
    out: dict[str, dict[str, int]] = {"c": {}, "g": {}}
    with open(os.path.join(directory, process, name), encoding="utf-8") as f:
        for line in f:
            kind, key, value = line.rstrip("\n").split("\t")
            out[kind][key] = int(value)
    return out


def test_a_flush_publishes_the_process_totals_since_it_started(tmp_path, publisher):
    counters.add("test_spark_metrics.published", 3)
    metrics.flush(None, str(tmp_path))
    assert (
        _published(tmp_path)["c"]["test_spark_metrics.published"]
        == (counters.totals()["test_spark_metrics.published"])
    )
    counters.drain()  # what a flush to the sink does: the totals stay
    counters.add("test_spark_metrics.published", 2)
    metrics.flush(None, str(tmp_path))
    published = _published(tmp_path)["c"]["test_spark_metrics.published"]
    assert published == counters.totals()["test_spark_metrics.published"] >= 5


def test_sizes_are_published_and_an_unreadable_one_is_left_out(tmp_path, publisher):
    def broken() -> int:
        raise OSError("gone")

    metrics.node_gauge("test.size_bytes", lambda: 42)
    metrics.node_gauge("test.broken", broken)
    metrics.flush(None, str(tmp_path))
    assert _published(tmp_path)["g"] == {"test.size_bytes": 42}


def test_no_directory_publishes_nothing(tmp_path, publisher):
    counters.add("test_spark_metrics.unpublished")
    metrics.flush(None, None)
    metrics.flush(None, "")
    assert os.listdir(tmp_path / metrics.process_directory()) == []


def test_a_process_directory_the_plugin_removed_is_not_made_again(tmp_path, publisher):
    # After the application stopped (the plugin removed the directory), a late publish (a
    # timer, the process's exit) leaves nothing behind.
    (tmp_path / metrics.process_directory()).rmdir()
    counters.add("test_spark_metrics.late")
    metrics.flush(None, str(tmp_path))
    publisher.final()
    assert os.listdir(tmp_path) == []


def test_inside_deferring_flushes_publishing_waits_its_interval(tmp_path, publisher, monkeypatch):
    """The driver's planner flushes per scan: the first publishes, the next within the
    interval is left to a timer (here never due), and the process's exit publishes it."""
    monkeypatch.setattr(metrics, "PUBLISH_INTERVAL", 3600.0)
    with metrics.deferring_flushes():
        counters.add("test_spark_metrics.deferred")
        metrics.flush(None, str(tmp_path))
        first = _published(tmp_path)["c"]["test_spark_metrics.deferred"]
        counters.add("test_spark_metrics.deferred")
        metrics.flush(None, str(tmp_path))
        assert _published(tmp_path)["c"]["test_spark_metrics.deferred"] == first
    publisher.final()  # at exit
    assert _published(tmp_path)["c"]["test_spark_metrics.deferred"] == first + 1


def test_a_failed_publish_never_raises(tmp_path, publisher):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    metrics.flush(None, str(blocker / "snapshots"))  # logged, not raised


# --- the Spark confs ---------------------------------------------------------------------------


def test_tiered_session_adds_the_plugin_to_the_callers_plugins_once():
    conf = metrics_plugin_conf({"spark.plugins": "com.example.Other"}, "")
    assert conf == {"spark.plugins": f"com.example.Other,{jvm_protocol.METRICS_PLUGIN_CLASS}"}
    again = metrics_plugin_conf({"spark.plugins": conf["spark.plugins"]}, "")
    assert again["spark.plugins"] == conf["spark.plugins"]


def test_the_plugin_s_directory_is_under_metrics_directory_unless_the_caller_set_one(tmp_path):
    conf = metrics_plugin_conf({}, str(tmp_path / "m"))
    assert conf[jvm_protocol.METRICS_DIR_CONF] == str(tmp_path / "m" / "spark-metrics")
    mine = {jvm_protocol.METRICS_DIR_CONF: "/elsewhere"}
    assert jvm_protocol.METRICS_DIR_CONF not in metrics_plugin_conf(mine, str(tmp_path))


# --- the metric names ------------------------------------------------------------------------


def test_every_metric_of_the_plugin_is_documented():
    """Each counter is a row of docs/design/observability.md's counter table (where it is
    counted) or one the JVM counts (``counts("...")`` in native/'s Scala; the table holds
    Python's), and the section on Spark's metrics names every counter and size."""
    counter_names, gauge_names = plugin_names()
    assert len(counter_names) >= 30 and len(gauge_names) >= 3
    assert len(set(counter_names)) == len(counter_names)
    text = OBSERVABILITY.read_text()
    table = text[text.index("## Counters\n") :]
    table = table.split("\n## ", 1)[0]  # the last section of its page
    jvm = {
        name
        for source in JVM_SOURCES.rglob("*.scala")
        for name in re.findall(r'counts(?:\.add)?\("([^"]+)"', source.read_text())
    }
    assert "fragment_cache.jvm_hits" in jvm
    assert [n for n in counter_names if f"`{n}`" not in table and n not in jvm] == []
    section = text[text.index("## Spark's metrics system") :]
    section = section[: section.index("\n## ")]
    assert [n for n in counter_names + gauge_names if f"`{n}`" not in section] == []


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default=None):
        return self.values.get(key, default)


class _Session:
    """What ``spark_metrics_properties`` reads of a session: its confs."""

    def __init__(self, **values: str) -> None:
        self.conf = _Conf({k.replace("_", "."): v for k, v in values.items()})


def test_register_publishes_under_the_application_s_directory_when_the_plugin_runs():
    plugins = f"com.example.Other,{jvm_protocol.METRICS_PLUGIN_CLASS}"
    on = _Session(spark_plugins=plugins, spark_app_id="app-7")
    assert spark_metrics_properties(on) == {
        "metrics.spark-directory": os.path.join(jvm_protocol.METRICS_DIR_DEFAULT, "app-7")
    }
    on.conf.values[jvm_protocol.METRICS_DIR_CONF] = "/m"
    assert spark_metrics_properties(on) == {"metrics.spark-directory": "/m/app-7"}


def test_register_on_a_session_without_the_plugin_publishes_nothing():
    assert spark_metrics_properties(_Session(spark_app_id="app-7")) == {}
    assert spark_metrics_properties(_Session(spark_plugins="com.example.Other")) == {}


def test_a_flush_deferred_by_the_driver_planner_reaches_the_sink_without_another_flush(
    tmp_path, monkeypatch
):
    """The driver's planner flushes inside ``deferring_flushes``; its counts
    (the metastore cache's, the listing cache's) reached the sink only when the process
    flushed again outside (never, in a user's application) or exited, so `raptorx cache
    stats` showed zeros. A timer thread writes them now."""
    monkeypatch.setattr(metrics, "FLUSH_INTERVAL", 0.0)  # no waiting between writes here
    # Its own flusher and directories: counts are the process's, and a flush writes them all
    # to the first directory noted (another test's session may have noted its own).
    monkeypatch.setattr(metrics, "_flusher", metrics._DeferredFlusher())
    monkeypatch.setattr(metrics, "_deferred", set())  # for the exit flush
    sink = metrics.MetricsSink(str(tmp_path))
    with metrics.deferring_flushes():
        counters.add("listing_cache.test_deferred")
        metrics.flush(str(tmp_path))
    metrics.settle_deferred_flushes()
    assert sink.totals().get("listing_cache.test_deferred") == 1
    # The next one is written too (one timer at a time, started again).
    with metrics.deferring_flushes():
        counters.add("listing_cache.test_deferred", 2)
        metrics.flush(str(tmp_path))
    metrics.settle_deferred_flushes()
    assert sink.totals().get("listing_cache.test_deferred") == 3
