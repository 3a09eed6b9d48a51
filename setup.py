"""The wheel's build step for the native jar: ``build_py`` also puts
``raptorx_py/jars/raptorx-native.jar`` into the wheel, so a ``pip install`` of the wheel has the
JVM half (docs/design/planning-and-jvm-provider.md, "The jar inside the wheel"). The rest of
the package's metadata is pyproject.toml's.

The jar is the checkout's ``native/target/raptorx-native.jar`` when that one was built from
exactly these sources (its recorded build identity is the digest of ``native/src/main`` and
``native/build.sh``, computed here as build.sh computes it), for this package version and
against the pyspark of the build environment; otherwise ``native/build.sh`` builds it first,
with this interpreter (the build environment's, which has the pyspark the package requires:
``build_support/raptorx_build_backend.py``). A fresh clone or an sdist therefore builds it; a
checkout after ``make native`` reuses it. An editable install gets no copy: it finds the
checkout's ``native/target/`` (``raptorx_py.native.jar_path``).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version as installed_version
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
NATIVE = ROOT / "native"
BUILT_JAR = NATIVE / "target" / "raptorx-native.jar"
#: Where the wheel carries the jar, relative to the package's install directory's parent.
PACKAGE_JAR = Path("raptorx_py") / "jars" / "raptorx-native.jar"
BUILD_INFO_ENTRY = "raptorx/native-build.properties"


def source_digest() -> str:
    """native/build.sh's build identity of the sources in this tree: sha256 over each file of
    ``src/main`` and ``build.sh`` (its path relative to native/, then ``sha256sum``'s line
    for its content), in byte order of the paths; the first 16 hex digits."""
    files = [p for p in (NATIVE / "src" / "main").rglob("*") if p.is_file()]
    names = sorted(
        [str(p.relative_to(NATIVE)) for p in files] + ["build.sh"], key=lambda n: n.encode()
    )
    h = hashlib.sha256()
    for name in names:
        content = hashlib.sha256((NATIVE / name).read_bytes()).hexdigest()
        h.update(f"{name}\n{content}  -\n".encode())
    return h.hexdigest()[:16]


def recorded(jar: Path) -> dict[str, str]:
    with zipfile.ZipFile(jar) as z:
        text = z.read(BUILD_INFO_ENTRY).decode()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def stale_because(jar: Path, wanted: dict[str, str]) -> str | None:
    """Why ``jar`` is not the jar of these sources (None when it is)."""
    if not jar.is_file():
        return f"{jar} does not exist"
    try:
        have = recorded(jar)
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        return f"{jar} records no build ({e})"
    for key, value in wanted.items():
        if have.get(key) != value:
            return f"{jar} has {key}={have.get(key)}, these sources want {value}"
    return None


def native_jar() -> Path:
    """The jar of these sources: the checkout's, or built now by native/build.sh."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        package_version = tomllib.load(f)["project"]["version"]
    wanted = {
        "raptorx.version": package_version,
        "build.id": source_digest(),
        "pyspark.version": installed_version("pyspark"),
    }
    reason = stale_because(BUILT_JAR, wanted)
    if reason is not None:
        print(f"building the native jar ({reason})", file=sys.stderr)
        subprocess.run(["bash", str(NATIVE / "build.sh"), sys.executable], check=True)
        reason = stale_because(BUILT_JAR, wanted)
        if reason is not None:
            raise RuntimeError(f"native/build.sh did not build the jar of these sources: {reason}")
    return BUILT_JAR


class BuildPyWithJar(build_py):
    """setuptools' ``build_py`` plus the native jar as package data (not for editable
    installs)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / PACKAGE_JAR
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(native_jar(), target)


setup(cmdclass={"build_py": BuildPyWithJar})
