"""The jars Spark needs to read ``s3a://`` URLs (hadoop-aws and the AWS SDK v2 modules it
uses), resolved from Maven Central into a project-local directory, and the Spark settings
that point s3a at the local S3 endpoint.

Why: the benchmark's baseline that users would pick instead of ``tiered_hive`` is Spark's
own Parquet reader over ``s3a://`` on the same store; its jars are not on PyPI.

Contract
--------
* :func:`resolve` returns the jar paths, running Maven (``mvn dependency:copy-dependencies``
  on ``devservers/s3a/pom.xml``) only when the directory is missing or was resolved from
  another pom. The copy goes to a temporary directory first and replaces the jar directory
  with ``os.replace``, so a failed or interrupted resolution leaves no half directory.
* The jar directory is ``<sys.prefix>/s3a-jars`` (the project's virtualenv, so ``make
  clean`` removes it), or ``$RAPTORX_S3A_JARS``.
* Artifacts that pyspark's own ``jars/`` already holds (slf4j-api, httpclient, ...) are not
  copied: one copy of each library on the class path. Nothing is written into pyspark's
  directory.
* hadoop-aws must be exactly pyspark's Hadoop client version: :func:`resolve` raises
  :class:`S3aJarsError` naming both versions when they differ, and when Maven is missing or
  fails (with the tail of its output).
* :func:`spark_conf` gives the ``spark.jars`` entry and the ``spark.hadoop.fs.s3a.*``
  settings for an endpoint (``S3Endpoint.s3a_settings``); they must be set before the
  SparkContext starts, or (the Hadoop ones) on ``sparkContext._jsc.hadoopConfiguration()``
  before the first ``s3a://`` access.

Command line: ``python -m devservers.s3a_jars`` resolves and prints the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "POM",
    "S3aJarsError",
    "hadoop_version_of_pom",
    "jar_dir",
    "pyspark_hadoop_version",
    "resolve",
    "spark_conf",
]

POM = Path(__file__).resolve().parent / "s3a" / "pom.xml"
#: Written last into the jar directory: the pom digest and the jars it resolved to.
MANIFEST = "resolved.json"
ENV_DIR = "RAPTORX_S3A_JARS"
# "name-1.2.3.jar", "name-4.2.13.Final.jar", "name-2.0.76.Final-linux-x86_64.jar" -> "name"
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-\d[^/]*\.jar$")


class S3aJarsError(RuntimeError):
    """The s3a jars could not be resolved (Maven missing or failing, a Hadoop mismatch)."""


def jar_dir() -> Path:
    """Where the jars live: ``$RAPTORX_S3A_JARS`` or ``<sys.prefix>/s3a-jars``."""
    return Path(os.environ.get(ENV_DIR) or os.path.join(sys.prefix, "s3a-jars"))


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def pyspark_hadoop_version() -> str:
    """The version of the Hadoop client inside pyspark's wheel (``hadoop-client-api-*.jar``)."""
    for jar in sorted(_pyspark_jars().glob("hadoop-client-api-*.jar")):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise S3aJarsError(
        f"no hadoop-client-api jar in {_pyspark_jars()}: cannot tell pyspark's Hadoop version"
    )


def hadoop_version_of_pom(pom: Path = POM) -> str:
    match = re.search(r"<hadoop\.version>([^<]+)</hadoop\.version>", pom.read_text("utf-8"))
    if not match:
        raise S3aJarsError(f"{pom} has no <hadoop.version> property")
    return match.group(1).strip()


#: Artifacts pyspark replaces with a jar of another name holding the same classes.
_SHIPPED_AS = {"jcl-over-slf4j": "commons-logging"}


def _artifacts_pyspark_ships() -> list[str]:
    jars = _pyspark_jars().glob("*.jar")
    names = {m.group("artifact") for j in jars if (m := _JAR_NAME.match(j.name))}
    return sorted(names | {_SHIPPED_AS[n] for n in names if n in _SHIPPED_AS})


def _digest(pom: Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def _resolved(directory: Path, digest: str) -> list[str] | None:
    """The jars of an earlier resolution of the same pom, or None."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    jars = [str(directory / name) for name in manifest.get("jars", [])]
    if manifest.get("pom_sha256") != digest or not jars or not all(map(os.path.isfile, jars)):
        return None
    return jars


def resolve(*, pom: Path = POM, directory: Path | None = None) -> list[str]:
    """The s3a jars' paths, resolving them with Maven first when needed (module docstring)."""
    directory = directory or jar_dir()
    digest = _digest(pom)
    found = _resolved(directory, digest)
    if found is not None:
        return found
    wanted, ships = hadoop_version_of_pom(pom), pyspark_hadoop_version()
    if wanted != ships:
        raise S3aJarsError(
            f"{pom} resolves hadoop-aws {wanted}, but pyspark ships the Hadoop {ships} client; "
            f"hadoop-aws must match it exactly: set hadoop.version to {ships} and awssdk.version "
            f"to hadoop-project {ships}'s aws-java-sdk-v2.version"
        )
    mvn = shutil.which("mvn")
    if mvn is None:
        raise S3aJarsError(
            "Maven (mvn) is needed to fetch hadoop-aws and the AWS SDK from Maven Central for "
            "s3a://; install it (Debian: apt-get install maven)"
        )
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".s3a-jars-", dir=directory.parent))
    try:
        command = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
            f"-DexcludeArtifactIds={','.join(_artifacts_pyspark_ships())}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
            raise S3aJarsError(
                f"Maven could not resolve the s3a jars of {pom} (exit {done.returncode}):\n{tail}"
            )
        jars = sorted(p.name for p in staging.glob("*.jar"))
        if not any(name.startswith(f"hadoop-aws-{wanted}") for name in jars):
            raise S3aJarsError(f"Maven resolved {pom} without hadoop-aws-{wanted}.jar: {jars}")
        manifest = {"pom_sha256": digest, "hadoop": wanted, "jars": jars}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1), "utf-8")
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return [str(directory / name) for name in jars]


def spark_conf(s3a_settings: Mapping[str, str], jars: list[str] | None = None) -> dict[str, str]:
    """Spark settings for reading ``s3a://`` with these Hadoop ``fs.s3a.*`` settings (for
    example ``S3Endpoint.s3a_settings()``): ``spark.jars`` and ``spark.hadoop.<key>``."""
    jars = resolve() if jars is None else jars
    return {
        "spark.jars": ",".join(jars),
        **{f"spark.hadoop.{key}": value for key, value in s3a_settings.items()},
    }


def main() -> int:
    print(f"resolving the s3a jars of {POM} into {jar_dir()} (Maven Central)", flush=True)
    try:
        jars = resolve()
    except S3aJarsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    # make compares the manifest's time with the pom's and this module's: mark it current.
    os.utime(jar_dir() / MANIFEST)
    print(f"{len(jars)} jars in {jar_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
