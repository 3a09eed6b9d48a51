"""The native jar (``native/``): where it is, what it says it is, and whether a JVM can load
its provider.

An installed wheel carries the jar as package data (``raptorx_py/jars/raptorx-native.jar``,
put there by setup.py's build step); a checkout has it in ``native/target/`` after ``make
native``; ``$RAPTORX_NATIVE_JAR`` names another. ``jar_path`` takes the first of those that
exists (``jar_candidates``), and ``tiered_session()`` starts Spark with it
(docs/design/planning-and-jvm-provider.md, "The jar inside the wheel").

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
import zipfile
from dataclasses import dataclass
from pathlib import Path

from raptorx_py.errors import NativeJarError
from raptorx_py.jvm_contract import protocol

PROVIDER_CLASS = "raptorx.TieredHiveProvider"
#: The Spark catalog plugin (``spark.sql.catalog.<name>``): tables by name in SQL.
CATALOG_CLASS = "raptorx.TieredHiveCatalog"
#: The catalog's name unless ``register`` is told another.
DEFAULT_CATALOG_NAME = "raptorx"
#: The jar's check of the Spark internals it uses (its static ``report()``: "" when all there).
COMPATIBILITY_CLASS = "raptorx.NativeCompatibility"
# The two names of the source (jvm_contract.protocol: Protocol.scala spells them on the JVM side).
PUBLIC_NAME = protocol.PUBLIC_NAME
PYTHON_NAME = protocol.PYTHON_NAME
BUILD_HINT = (
    "an installed wheel carries it (raptorx_py/jars/raptorx-native.jar: reinstall the wheel); "
    "in a checkout, build it with `make native` (or native/build.sh); `raptorx jar` prints "
    "where it is and the flags that start Spark with it"
)
JAR_NAME = "raptorx-native.jar"
#: Where the wheel carries the jar (setup.py's build step puts it there): package data.
PACKAGE_JAR = Path(__file__).resolve().parent / "jars" / JAR_NAME
#: Where a checkout's build (``make native``, ``native/build.sh``) leaves it.
CHECKOUT_JAR = Path(__file__).resolve().parent.parent / "native" / "target" / JAR_NAME
#: What ``native/build.sh`` writes into the jar about the build.
BUILD_INFO_ENTRY = "raptorx/native-build.properties"
ENV_JAR = "RAPTORX_NATIVE_JAR"


def jar_candidates() -> list[Path]:
    """Where ``jar_path`` looks, in order: ``$RAPTORX_NATIVE_JAR`` (a jar named on purpose
    wins), the jar inside the installed package (a wheel's), the checkout's
    ``native/target/`` (a source tree, where ``make native`` builds it; an editable install
    has no package jar)."""
    env = os.environ.get(ENV_JAR)
    return [*([Path(env)] if env else []), PACKAGE_JAR, CHECKOUT_JAR]


def jar_path() -> Path | None:
    """The first jar of ``jar_candidates`` that exists, or None."""
    return next((p for p in jar_candidates() if p.is_file()), None)


@dataclass(frozen=True)
class JarInfo:
    """What ``native/build.sh`` recorded in a jar: its version (the package's), its build
    identity (a digest of the sources compiled) and the pyspark it was compiled against;
    "unknown" for what a jar does not record (one built before they were recorded)."""

    path: Path
    version: str
    build_id: str
    pyspark_version: str


def jar_info(path: Path) -> JarInfo:
    """Read ``BUILD_INFO_ENTRY`` from the jar at ``path`` (no JVM). Raises ``NativeJarError``
    naming the file when it is not a readable jar."""
    try:
        with zipfile.ZipFile(path) as jar:
            try:
                text = jar.read(BUILD_INFO_ENTRY).decode("utf-8")
            except KeyError:
                text = ""
    except (OSError, zipfile.BadZipFile) as e:
        raise NativeJarError(f"{path} is not a readable jar: {e}") from e
    props = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and line[:1] != "#"
    )
    return JarInfo(
        path=path,
        version=props.get("raptorx.version", "unknown").strip(),
        build_id=props.get("build.id", "unknown").strip(),
        pyspark_version=props.get("pyspark.version", "unknown").strip(),
    )


def submit_flags(path: Path) -> str:
    """The ``pyspark``/``spark-submit`` flags that start Spark with the jar at ``path``: in
    ``--jars`` (so executors receive it) and on the driver's class path (the provider's
    columnar reader must be loaded by Spark's own class loader)."""
    import shlex

    quoted = shlex.quote(str(path))
    return f"--jars {quoted} --driver-class-path {quoted}"


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
