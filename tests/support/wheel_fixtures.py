"""The wheel a user installs, built once per test session, and one fresh virtualenv outside
the checkout with it installed (``tests/integration/test_wheel.py``, and the standalone
cluster's test in ``test_soft_affinity_cluster.py``).

The wheel is built as from a fresh clone after ``make native``: the working tree's files
that git would clone (tracked, and untracked but not ignored) are copied into a temporary
directory with the checkout's up-to-date ``native/target/raptorx-native.jar`` (``make test``
builds it first), and ``python -m build --wheel`` runs there without isolation, in this
interpreter's environment (it has the pyspark the jar is compiled against; setup.py reuses
the jar when it was built from these sources, else compiles it). The virtualenv has no pip of
its own: this interpreter's pip installs into it (``--python``), from pip's cache, without
compiling .pyc files, which takes about 17 s instead of about 60 s with ensurepip and
compilation (measured on the 2-core CI machine).

Under pytest-xdist the wheel and its virtualenv are made once per run, not once per worker:
the first worker that asks makes them in the run's shared temporary directory, under a file
lock, and the others reuse them (``made_once``); the tests only read them."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
BUILT_JAR = CHECKOUT / "native" / "target" / "raptorx-native.jar"
#: What a subprocess of the wheel's virtualenv must not inherit from the test session: an
#: import path, a jar named by hand, the session's PYSPARK_PYTHON (the checkout's venv).
HIDDEN_ENV = ("PYTHONPATH", "VIRTUAL_ENV", "RAPTORX_NATIVE_JAR", "PYSPARK_PYTHON", "SPARK_HOME")


def clone_files(root: Path) -> list[str]:
    """The files a clone of ``root`` would have, with the working tree's changes: tracked
    and untracked-not-ignored files that exist."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    )
    names = [n for n in done.stdout.decode().split("\0") if n]
    return [n for n in names if (root / n).is_file()]


@dataclass(frozen=True)
class WheelVenv:
    root: Path
    wheel: Path
    #: Seconds pip took to install the wheel and its dependencies (printed, not asserted).
    install_seconds: float

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in HIDDEN_ENV}
        env["PATH"] = os.pathsep.join([str(self.root / "bin"), env.get("PATH", "")])
        return env

    def run(self, args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=timeout
        )


@pytest.fixture(scope="session")
def clone_copy(tmp_path_factory) -> Path:
    """The checkout as a fresh clone would have it, plus its built jar (see above)."""
    src = tmp_path_factory.mktemp("wheel-build") / "src"
    for name in clone_files(CHECKOUT):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CHECKOUT / name, src / name)
    if BUILT_JAR.is_file():
        (src / "native" / "target").mkdir(parents=True)
        shutil.copy2(BUILT_JAR, src / "native" / "target" / BUILT_JAR.name)
    return src


def build(src: Path, kind: str) -> Path:
    """``python -m build --<kind> --no-isolation`` in ``src``: the one file it made."""
    dist = src.parent / f"dist-{kind}"
    done = subprocess.run(
        [sys.executable, "-m", "build", f"--{kind}", "--no-isolation", "--outdir", str(dist), "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (made,) = dist.iterdir()
    return made


def made_once(tmp_path_factory, name: str, make) -> Path:
    """The directory ``name`` of this test run, filled by ``make(directory)`` once: by this
    process, or by another xdist worker of the same run (their temporary directories share
    a parent, unique to the run), which this one waits for under an ``flock``. A ``make``
    that fails leaves the directory unmarked, so the next caller makes it again."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    directory = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / f"{name}.done"
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)  # what a failed make left
            directory.mkdir()
            make(directory)
            done.touch()
    return directory


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory, clone_copy) -> Path:
    """``raptorx_py-<version>-py3-none-any.whl``, built from a copy of the checkout (once
    per run, ``made_once``)."""

    def make(directory: Path) -> None:
        shutil.copy2(build(clone_copy, "wheel"), directory)

    (wheel,) = made_once(tmp_path_factory, "built-wheel", make).glob("*.whl")
    return wheel


@pytest.fixture(scope="session")
def built_sdist(clone_copy) -> Path:
    """``raptorx_py-<version>.tar.gz``, built from the same copy."""
    return build(clone_copy, "sdist")


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory, built_wheel) -> WheelVenv:
    """A fresh virtualenv (in the run's temporary directory, outside the checkout) with the
    wheel and its dependencies installed by pip, as a user's ``pip install`` does (once per
    run, ``made_once``)."""
    import time

    took: list[float] = []

    def make(directory: Path) -> None:
        root = directory / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(root / "bin" / "python"),
                "install",
                "--quiet",
                "--no-compile",
                "--disable-pip-version-check",
                str(built_wheel),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        took.append(time.monotonic() - started)

    root = made_once(tmp_path_factory, "wheel-venv", make) / "venv"
    venv = WheelVenv(root, built_wheel, took[0] if took else 0.0)
    print(f"wheel installed into {root} in {venv.install_seconds:.1f}s (0: by another worker)")
    return venv
