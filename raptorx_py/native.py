"""The native jar (``native/``): where it is, and whether a JVM can load its provider.

With the jar on the classpath, Spark's ``tiered_hive`` is the JVM provider
``raptorx.TieredHiveProvider``, which wraps the Python source (registered as
``tiered_hive_python``) and gives every scan its own read plan. Without it, the Python source
registers itself as ``tiered_hive`` with filter pushdown off: results are the same, reads are
slower (no pruning), because pyspark 4.3 shares one read plan among all scans of a DataFrame
and a pushed-down plan would leak into scans it does not belong to.

The jar also uses pyspark internals (fields read by reflection, private constructors and
methods); ``raptorx.NativeCompatibility`` in the jar checks that the running Spark has each of
them, and ``require_compatible`` turns its report into an error when the source is registered,
so a jar built against another pyspark fails at ``tiered_session()``, not in a query.
"""

from __future__ import annotations

import os
from pathlib import Path

from raptorx_py import jvm_protocol
from raptorx_py.errors import NativeJarError

PROVIDER_CLASS = "raptorx.TieredHiveProvider"
#: The Spark catalog plugin (``spark.sql.catalog.<name>``): tables by name in SQL.
CATALOG_CLASS = "raptorx.TieredHiveCatalog"
#: The catalog's name unless ``register`` is told another.
DEFAULT_CATALOG_NAME = "raptorx"
#: The jar's check of the Spark internals it uses (its static ``report()``: "" when all there).
COMPATIBILITY_CLASS = "raptorx.NativeCompatibility"
# The two names of the source (jvm_protocol: Protocol.scala spells them on the JVM side).
PUBLIC_NAME = jvm_protocol.PUBLIC_NAME
PYTHON_NAME = jvm_protocol.PYTHON_NAME
BUILD_HINT = "build it with `make native` (or native/build.sh) and start Spark with it"


def jar_path() -> Path | None:
    """The built jar: ``$RAPTORX_NATIVE_JAR``, else ``native/target/`` of this checkout."""
    env = os.environ.get("RAPTORX_NATIVE_JAR")
    candidates = [Path(env)] if env else []
    candidates.append(
        Path(__file__).resolve().parent.parent / "native" / "target" / "raptorx-native.jar"
    )
    return next((p for p in candidates if p.is_file()), None)


def provider_loadable(spark) -> bool:
    """Whether the session's JVM can load the provider class."""
    jvm = spark.sparkContext._jvm
    return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(PROVIDER_CLASS))


def compatibility_report(spark) -> str:
    """The jar's report of the Spark internals it uses that this session's JVM lacks (empty
    when it has them all); the provider must be loadable."""
    return str(spark.sparkContext._jvm.raptorx.NativeCompatibility.report())


def require_compatible(report: str) -> None:
    """Raise ``NativeJarError`` with ``report`` (``compatibility_report``) unless it is empty."""
    if report:
        raise NativeJarError(report)
