"""The project's quality gates, run as tests so that `make test` (and CI) runs them: ruff's
lint and its formatter, the import contracts (import-linter: the layers of
docs/architecture.md) and mypy's type check of raptorx_py, configured in pyproject.toml. A
failure prints the tool's own report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_lint_passes():
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_the_tree_unchanged():
    done = _run("ruff", "format", "--no-cache", "--check", ".")
    assert done.returncode == 0, (
        "run `.venv/bin/ruff format .`; these files are not formatted:\n" + done.stdout
    )


def test_imports_follow_the_layers():
    """A module importing from a layer above its own (docs/architecture.md, "Layers") fails
    here, naming the import and its line."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr


def test_mypy_passes():
    """mypy over the package with pyproject.toml's [tool.mypy] (packages, strictness, the
    untyped third-party modules). No cache is written into the tree, as for ruff."""
    done = _run("mypy", "--cache-dir", os.devnull)
    assert done.returncode == 0, done.stdout[-12000:] + done.stderr


def test_test_modules_have_unique_names():
    """The test directories are not packages, so pytest imports each test file by its base
    name: two files of one name (a unit and an integration test of one subject) fail the
    whole run's collection, which a run of one directory never shows."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}
