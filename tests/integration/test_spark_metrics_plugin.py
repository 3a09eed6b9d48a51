"""The tiers' counters in Spark's metrics system. A Spark application of its
own (``spark_metrics_app.py``, in a subprocess: the plugin and the Prometheus servlet must be
set before its SparkContext starts) reads a table cold then warm with the fragment result
cache on; Spark's Prometheus servlet (``/metrics/prometheus`` on the UI's port) shows the
plugin's counters with the values the metrics sink holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raptorx_py import native

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def readings(tmp_path_factory):
    if native.jar_path() is None:
        pytest.skip(f"the metrics plugin is in the native jar: {native.BUILD_HINT}")
    root = tmp_path_factory.mktemp("spark-metrics")
    out = root / "result.json"
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.spark_metrics_app", str(root), str(out)],
        cwd=ROOT,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    return json.loads(out.read_text())


def _servlet(reading, name: str) -> float:
    return reading["servlet"][name.replace(".", "_")]


def test_the_servlet_shows_the_tiers_counters_after_each_query(readings):
    cold, warm = readings["readings"]
    assert cold["rows"] == warm["rows"] == 3000
    # cold: three results computed and stored by Python
    assert _servlet(cold, "fragment_cache.stores") == 3
    assert _servlet(cold, "fragment_cache.misses") == 3
    assert _servlet(cold, "fragment_cache.hits") == 0
    assert _servlet(cold, "reader.rows_to_spark") == 3000
    # warm: three hits served by the JVM (its own count), none computed
    assert _servlet(warm, "fragment_cache.jvm_hits") == 3
    assert _servlet(warm, "fragment_cache.hits") == 3
    assert _servlet(warm, "fragment_cache.stores") == 3  # totals: still the cold query's
    assert _servlet(warm, "reader.fragments_computed") == 3
    assert _servlet(warm, "reader.rows_to_spark") == 6000
    # the planner's counts (the driver's own Python process) are there too
    assert _servlet(warm, "planning.scans") >= 2


def test_the_metric_names_are_spelled_as_documented(readings):
    """As README and docs/design/observability.md show them:
    ``<app id>.driver.plugin.<plugin class>.<name>`` (Spark's plugin source), as Prometheus
    text."""
    _, warm = readings["readings"]
    app = readings["app_id"].replace("-", "_")
    line = f"metrics_{app}_driver_plugin_raptorx_CacheMetricsPlugin_fragment_cache_hits_Value"
    assert f'{line}{{type="gauges"}} 3' in warm["lines"]


def test_the_servlet_agrees_with_the_metrics_sink(readings):
    """Every counter the plugin shows equals the sink's total (one application, local mode:
    all of it is the driver's)."""
    from tests.unit.test_spark_metrics import plugin_names

    counters, _ = plugin_names()
    for reading in readings["readings"]:
        shown = {n: _servlet(reading, n) for n in counters}
        assert shown == {n: reading["sink"].get(n, 0) for n in counters}


def test_sizes_are_shown_and_the_files_go_with_the_application(readings):
    _, warm = readings["readings"]
    assert _servlet(warm, "fragment_cache.entries") == 3
    assert _servlet(warm, "fragment_cache.size_bytes") > 0
    assert readings["left_after_stop"] is False
