"""Getting a SparkSession that reads ``tiered_hive``: ``tiered_session()`` or ``register(spark)``.

``register`` resolves the configuration once, on the driver (so a wrong property fails here,
naming its file and line), registers the data source with that configuration attached, and
switches on what the source needs (filter pushdown to Python sources).

Both work on a Spark Connect client session too (``tiered_session(remote="sc://host:port")``,
see ``raptorx_py.connect``): the server must have the raptorx jar, and path-like properties
are made absolute here, in the client, before they travel (``config/paths.py``).

Spark's metrics system: ``tiered_session`` starts the SparkContext with the native jar's
metrics plugin (``spark.plugins``, ``protocol.METRICS_PLUGIN_CLASS``) and, when
``metrics.directory`` is set, the plugin's directory under it. ``register`` finds out whether
the session's SparkContext runs the plugin and, if so, has every process publish its totals
where the plugin reads them (``metrics.spark-directory``). ``spark.plugins`` is read once,
when the SparkContext starts: ``register`` on a session started without the plugin cannot
turn it on; the counters then stay where they always are (the metrics sink).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings

from raptorx_py import connect, native
from raptorx_py.config import PROPERTIES_SOURCE, load_settings
from raptorx_py.config.paths import absolute_paths
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planning.driver_planner import register_planner
from raptorx_py.datasource.source import configured_source_class
from raptorx_py.error_report import install_excepthook
from raptorx_py.errors import ConfigError, ConnectServerError
from raptorx_py.jvm_contract.protocol import (
    METRICS_DIR_CONF,
    METRICS_DIR_DEFAULT,
    METRICS_PLUGIN_CLASS,
)

_warned_no_jar = False

#: Spark settings tiered_hive relies on; a caller's spark_conf may override the others.
REQUIRED_SPARK_CONF = {
    "spark.sql.python.filterPushdown.enabled": "true",
}


def register(
    spark,
    conf_dir: str | None = None,
    properties: dict[str, str] | None = None,
    catalog_name: str | None = native.DEFAULT_CATALOG_NAME,
) -> Settings:
    """Register ``tiered_hive`` on ``spark``; returns the settings it will use.

    ``conf_dir`` defaults to Spark conf ``spark.raptorx.conf.dir``, then env
    ``RAPTORX_CONF_DIR``; ``properties`` override single properties. On a Spark Connect
    session, raises ``ConnectServerError`` when the server cannot load the JVM provider.
    Raises ``NativeJarError`` when the jar does not match the running Spark's internals.

    With the native jar, the metastore's tables are also reachable by name in SQL through
    the Spark catalog ``catalog_name`` (``SELECT ... FROM raptorx.db.t``; ``None``: no
    catalog), set as ``spark.sql.catalog.<catalog_name>``; a ``ConfigError`` when the
    session already has another catalog under that name.
    """
    # An uncaught error that carries one of ours is printed as that error, on one line.
    install_excepthook()
    conf_dir = conf_dir or spark.conf.get("spark.raptorx.conf.dir", None) or None
    check_catalog_name(catalog_name)
    properties = {**(properties or {}), **spark_metrics_properties(spark)}
    settings = session_settings(spark, conf_dir, properties)
    for key, value in REQUIRED_SPARK_CONF.items():
        spark.conf.set(key, value)
    if connect.is_connect(spark):
        # No fallback here: a server without the jar was not started for raptorx, and its
        # Python workers would most likely lack raptorx_py too (failing later, in a worker).
        if not connect.provider_on_server(spark):
            raise ConnectServerError(
                f"the Spark Connect server of this session cannot load {native.PROVIDER_CLASS}"
                f" (the raptorx jar is not on its classpath), so it cannot read "
                f"{native.PUBLIC_NAME}: {connect.START_HINT}"
            )
        native.require_compatible(connect.compatibility_report_on_server(spark))
        source = configured_source_class(settings, name=native.PYTHON_NAME, pushdown=True)
        register_catalog(spark, catalog_name)
    elif native.provider_loadable(spark):
        # A jar built against another pyspark fails here, naming what it misses, not in the
        # first query that reads.
        native.require_compatible(native.compatibility_report(spark))
        source = configured_source_class(settings, name=native.PYTHON_NAME, pushdown=True)
        # The application's one planner, in this (the driver's) process: every scan is
        # planned here, with one metastore and listing cache, instead of in Python workers.
        register_planner(spark)
        register_catalog(spark, catalog_name)
    else:
        global _warned_no_jar
        if not _warned_no_jar:
            _warned_no_jar = True
            warnings.warn(
                "raptorx_py: the native jar is not on this session's classpath, so tiered_hive "
                "reads without filter pushdown or partition pruning (same results, slower); "
                f"{native.BUILD_HINT}",
                RuntimeWarning,
                stacklevel=2,
            )
        # Without the JVM provider nothing tells the Python source the session's setting at
        # read time: it carries the one the session has now (datasource/planning/column_names.py).
        source = configured_source_class(
            settings,
            name=native.PUBLIC_NAME,
            pushdown=False,
            case_sensitive=case_sensitive_analysis(spark),
        )
    spark.dataSource.register(source)
    return settings


_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_catalog_name(catalog_name: str | None) -> None:
    """A catalog name Spark SQL takes unquoted, or ``None``."""
    if catalog_name is not None and not _CATALOG_NAME.fullmatch(catalog_name):
        raise ConfigError(
            f"catalog_name={catalog_name!r} is not a catalog name: letters, digits and '_', "
            f"not starting with a digit (or None for no catalog)",
            source="register()",
        )


def register_catalog(spark, catalog_name: str | None) -> None:
    """Make ``catalog_name`` the Spark catalog of the metastore's tables
    (``native/.../TieredHiveCatalog.scala``): ``spark.sql.catalog.<name>``, a session conf
    Spark reads when the name is first used. A catalog of another class already there is
    an error, not replaced."""
    if catalog_name is None:
        return
    key = f"spark.sql.catalog.{catalog_name}"
    current = spark.conf.get(key, None)
    if current and current != native.CATALOG_CLASS:
        raise ConfigError(
            f"the session already has the catalog {catalog_name!r} ({current}); register "
            f"tiered_hive's under another name (catalog_name=...) or none (catalog_name=None)",
            source="register()",
        )
    spark.conf.set(key, native.CATALOG_CLASS)


#: The property naming where this application's processes publish their totals.
SPARK_METRICS_PROPERTY = "metrics.spark-directory"


def _plugins(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def spark_metrics_properties(spark) -> dict[str, str]:
    """``{"metrics.spark-directory": <spark.raptorx.metrics.dir>/<application id>}`` when the
    session's SparkContext runs raptorx's metrics plugin, else ``{}`` (nothing published:
    the plugin is started with the SparkContext or not at all)."""
    if METRICS_PLUGIN_CLASS not in _plugins(spark.conf.get("spark.plugins", None)):
        logging.getLogger(__name__).info(
            "raptorx's Spark metrics plugin is not on in this session (spark.plugins, read "
            "when the SparkContext starts): counters are not published to Spark's metrics"
        )
        return {}
    app_id = spark.conf.get("spark.app.id", None)
    if not app_id:
        return {}
    root = spark.conf.get(METRICS_DIR_CONF, None) or METRICS_DIR_DEFAULT
    return {SPARK_METRICS_PROPERTY: os.path.join(root, app_id)}


def metrics_plugin_conf(spark_conf: dict[str, str], metrics_directory: str) -> dict[str, str]:
    """The Spark confs that start raptorx's metrics plugin with a SparkContext: ``spark.plugins``
    with the plugin added to the caller's, and, unless the caller set it, the plugin's
    directory (``spark.raptorx.metrics.dir``) under raptorx's ``metrics.directory`` when that
    is set (else the plugin's default, ``~/.raptorx/spark-metrics``)."""
    plugins = _plugins(spark_conf.get("spark.plugins"))
    if METRICS_PLUGIN_CLASS not in plugins:
        plugins.append(METRICS_PLUGIN_CLASS)
    out = {"spark.plugins": ",".join(plugins)}
    if METRICS_DIR_CONF not in spark_conf and metrics_directory:
        out[METRICS_DIR_CONF] = os.path.join(
            os.path.abspath(os.path.expanduser(metrics_directory)), "spark-metrics"
        )
    return out


def case_sensitive_analysis(spark) -> bool:
    """The session's ``spark.sql.caseSensitive`` (Spark's default: false)."""
    return str(spark.conf.get("spark.sql.caseSensitive", "false")).strip().lower() == "true"


def session_settings(
    spark, conf_dir: str | None = None, properties: dict[str, str] | None = None
) -> Settings:
    """The settings for ``spark``: ``load_settings``, with what only the driver knows filled
    in (``hive.min-split-count=0``: the application's task slots), and path-like values made
    absolute against this process's home and working directory."""
    settings = load_settings(
        conf_dir=conf_dir, overrides=properties, overrides_source=PROPERTIES_SOURCE
    )
    if settings.min_split_count == 0:
        slots = str(
            connect.default_parallelism(spark)
            if connect.is_connect(spark)
            else spark.sparkContext.defaultParallelism
        )
        settings = load_settings(
            conf_dir=conf_dir,
            overrides={**(properties or {}), "hive.min-split-count": slots},
            overrides_source=PROPERTIES_SOURCE,
        )
    return absolute_paths(settings)


def tiered_session(
    conf_dir: str | None = None,
    master: str = "local[2]",
    app_name: str = "raptorx",
    spark_conf: dict[str, str] | None = None,
    properties: dict[str, str] | None = None,
    remote: str | None = None,
    catalog_name: str | None = native.DEFAULT_CATALOG_NAME,
):
    """A SparkSession (created or reused) with ``tiered_hive`` registered, and its tables by
    name in SQL under the catalog ``catalog_name`` (``register``).

    ``remote="sc://host:port"``: a Spark Connect client session of that server instead (which
    must have the raptorx jar: ``raptorx connect-server``); ``master`` and ``app_name`` are
    then the server's business and ignored, ``spark_conf`` holds session (SQL) confs only.
    """
    from pyspark.sql import SparkSession

    if remote is not None:
        builder = SparkSession.builder.remote(remote)
        for key, value in {**REQUIRED_SPARK_CONF, **(spark_conf or {})}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        register(spark, conf_dir=conf_dir, properties=properties, catalog_name=catalog_name)
        return spark

    # Spark's Python planner and workers start PYSPARK_PYTHON (default: "python3" from PATH),
    # which must be this interpreter, the one with raptorx_py and pyarrow installed. The JVM
    # reads it from its environment, so it has to be set before the JVM starts.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # A bad configuration (a malformed hive.metastore.uri, an unknown property) fails here,
    # before a JVM starts, naming its file and line; register() checks it again with what
    # only the session knows.
    early = load_settings(
        conf_dir=conf_dir or (spark_conf or {}).get("spark.raptorx.conf.dir") or None,
        overrides=properties,
        overrides_source=PROPERTIES_SOURCE,
    )
    local = master.startswith("local")
    if local:
        # A local session talks to itself only: keep it on loopback rather than whatever
        # address the host name resolves to.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    conf = {
        # Python workers must run this interpreter, which has raptorx_py installed.
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **(
            {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
            if local
            else {}
        ),
        **REQUIRED_SPARK_CONF,
        **(spark_conf or {}),
    }
    jar = native.jar_path()
    if jar is not None:
        conf["spark.jars"] = ",".join(filter(None, [conf.get("spark.jars"), str(jar)]))
        conf["spark.driver.extraClassPath"] = os.pathsep.join(
            filter(None, [conf.get("spark.driver.extraClassPath"), str(jar)])
        )
        # Spark's metrics system shows the tiers' counters (the plugin is in the jar).
        conf.update(metrics_plugin_conf(conf, early.metrics_directory))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if local:
        quiet_task_failure_logs(spark)
    register(spark, conf_dir=conf_dir, properties=properties, catalog_name=catalog_name)
    return spark


#: Spark loggers that print a failed task's exception with its JVM stack (the executor's
#: ERROR, the scheduler's "Lost task" WARN): 80 lines before the driver raises it again.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
)


def quiet_task_failure_logs(spark) -> None:
    """In local mode the driver raises every failed task's exception itself (and an error of
    ours lands in ``~/.raptorx/logs/errors.log`` in full), so the two loggers that print it
    again are limited to FATAL. Best effort: a JVM without log4j2's core keeps its logging."""
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        fatal = jvm.org.apache.logging.log4j.Level.FATAL
        for name in TASK_FAILURE_LOGGERS:
            configurator.setLevel(name, fatal)
    except Exception as exc:  # noqa: BLE001 - logging is not worth failing a session for
        logging.getLogger(__name__).debug("task-failure loggers left as they are: %s", exc)
