"""A Spark application of its own for ``test_spark_metrics_plugin.py`` (run as
``python -m tests.support.spark_metrics_app <root> <out.json>``): the metrics plugin
(``spark.plugins``) and Spark's Prometheus servlet must be configured before a SparkContext
starts, and the test run's shared session has neither.

It writes a table of three daily Parquet files under ``<root>``, starts ``tiered_session``
(which adds the plugin) with the UI on a port the OS picks (``spark.ui.port=0``; the bound
one is read back) and the Prometheus servlet at ``/metrics/prometheus``, reads the table
twice with the fragment result cache on (cold: three results stored by Python; warm: three
hits served by the JVM), and writes to ``<out.json>`` what the servlet shows for the plugin's
metrics after each read, next to the metrics sink's totals of the same moment.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.request

import pyarrow as pa
import pyarrow.parquet as pq

from tests.support.jvm_options import spark_java_options

DAYS = ["2021-01-01", "2021-01-02", "2021-01-03"]
ROWS = 1000
PLUGIN_SOURCE = "CacheMetricsPlugin"


def write_table(root: str) -> None:
    for i, day in enumerate(DAYS):
        d = os.path.join(root, f"ds={day}")
        os.makedirs(d, exist_ok=True)
        ids = range(i * ROWS, (i + 1) * ROWS)
        pq.write_table(
            pa.table({"x": pa.array(ids, pa.int64()), "s": pa.array([f"s{j}" for j in ids])}),
            os.path.join(d, "part-0.parquet"),
        )


def plugin_metrics(url: str) -> tuple[dict[str, float], list[str]]:
    """The plugin's metrics in the servlet's text, by name with its dots as ``_`` (as the
    servlet spells them): ``fragment_cache_hits`` -> value; and the plugin's lines as they
    are."""
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    lines = []
    for line in text.splitlines():
        if line.startswith("#") or PLUGIN_SOURCE not in line:
            continue
        lines.append(line)
        key, _, value = line.rpartition(" ")
        name = re.sub(r"\{.*\}$", "", key).split(PLUGIN_SOURCE + "_", 1)[1]
        if name.endswith("_Value"):
            out[name[: -len("_Value")]] = float(value)
    return out, lines


def main(root: str, out_path: str) -> None:
    from raptorx_py import metrics
    from raptorx_py.config import TIERS_OFF, load_settings
    from raptorx_py.metastore import open_metastore
    from raptorx_py.metrics import MetricsSink
    from raptorx_py.session import tiered_session
    from raptorx_py.tables.table_registration import register_external_table

    properties = {
        "hive.metastore.url": f"sqlite:///{os.path.join(root, 'metastore.db')}",
        "hive.metastore.warehouse.dir": os.path.join(root, "warehouse"),
        "metrics.directory": os.path.join(root, "metrics"),
        **TIERS_OFF,
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": os.path.join(root, "fragments"),
        # The Python reader stores each split's fragment at the first query, which the second
        # one's counts are checked against (AUTO would store at the second).
        "hive.parquet.reader": "PYTHON",
    }
    table_root = os.path.join(root, "t")
    write_table(table_root)
    settings = load_settings(overrides=properties)
    with open_metastore(settings.metastore_connection, create=True) as ms:
        register_external_table(ms, settings, "db.t", table_root)
    spark = tiered_session(
        master="local[2]",
        app_name="raptorx-metrics-plugin",
        properties=properties,
        spark_conf={
            "spark.ui.enabled": "true",
            "spark.ui.port": "0",
            "spark.ui.showConsoleProgress": "false",
            "spark.ui.prometheus.enabled": "true",
            "spark.metrics.conf.*.sink.prometheusServlet.class": (
                "org.apache.spark.metrics.sink.PrometheusServlet"
            ),
            "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.extraJavaOptions": spark_java_options(),
        },
    )
    try:
        # What register() made of the plugin: where this application's processes publish.
        published = spark.conf.get("spark.raptorx.metrics.dir")
        app_id = spark.sparkContext.applicationId
        url = spark.sparkContext.uiWebUrl.rstrip("/") + "/metrics/prometheus"
        sink = MetricsSink(properties["metrics.directory"])
        spark.read.format("tiered_hive").load("db.t").createOrReplaceTempView("t")
        readings = []
        for _ in range(2):
            rows = spark.sql("SELECT x, s FROM t").collect()
            # The driver's own Python process (its planner defers) publishes now.
            metrics.flush(properties["metrics.directory"], os.path.join(published, app_id))
            shown, lines = plugin_metrics(url)
            readings.append(
                {"rows": len(rows), "servlet": shown, "lines": lines, "sink": sink.totals()}
            )
        result = {"app_id": app_id, "metrics_dir": published, "readings": readings}
    finally:
        spark.stop()
    result["left_after_stop"] = os.path.exists(os.path.join(published, app_id))
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
