"""The wheel's build backend: setuptools' own, and pyspark as a build requirement of the wheel
only, because setup.py's build step compiles the native jar against the pyspark the package
requires (``native/build.sh``, with the Scala compiler inside pyspark's jars). An sdist and an
editable install (``pip install -e .``, which uses the checkout's ``native/target/``) need no
pyspark to build (docs/design/planning-and-jvm-provider.md, "The jar inside the wheel")."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import build_meta as _setuptools

# Every hook setuptools' backend has, unchanged (its __all__, not a list kept by hand here),
# but the one below.
from setuptools.build_meta import *  # noqa: F403


def pyspark_requirement(pyproject: Path = Path("pyproject.toml")) -> str:
    """The package's own pyspark requirement (``pyspark==X``): the jar is compiled against
    the pyspark the wheel will run with."""
    with open(pyproject, "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    found = [d for d in deps if d.replace(" ", "").startswith("pyspark==")]
    if len(found) != 1:
        raise RuntimeError(f"{pyproject}: expected one pinned pyspark==X dependency, got {deps}")
    return found[0]


def get_requires_for_build_wheel(config_settings=None):
    return [*_setuptools.get_requires_for_build_wheel(config_settings), pyspark_requirement()]
