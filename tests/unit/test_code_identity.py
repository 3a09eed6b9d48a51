"""The fragment key holds the identity of the code that computed the
result (``datasource.code_identity``), so a result computed before a fix is never served
after it."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pyarrow as pa
import pytest

from raptorx_py.datasource.planning import code_identity as code
from raptorx_py.datasource.planning import fragment_keys
from tests.support.counter_deltas import CounterDeltas
from tests.unit.test_fragment_cache_tier import SCHEMA, batches, cache, key


@pytest.fixture
def package(tmp_path):
    """A copy of the raptorx_py package's sources (with compiled files, which do not count)."""
    copy = tmp_path / "raptorx_py"
    shutil.copytree(code.PACKAGE_DIR, copy)
    return copy


def test_the_digest_changes_with_any_source_file(package):
    first = code.source_digest(package)
    assert code.source_digest(package) == first
    source = package / "datasource" / "reading" / "scan.py"
    original = source.read_bytes()
    source.write_bytes(original + b"\n# a fix\n")
    assert code.source_digest(package) != first
    source.write_bytes(original)
    assert code.source_digest(package) == first
    (package / "storage" / "new_module.py").write_text("X = 1\n")  # a file added
    added = code.source_digest(package)
    assert added != first
    (package / "storage" / "new_module.py").rename(package / "storage" / "other_name.py")
    assert code.source_digest(package) not in (first, added)  # and renamed


def test_compiled_files_are_not_sources(package):
    first = code.source_digest(package)
    (package / "__pycache__").mkdir(exist_ok=True)
    (package / "__pycache__" / "extra.cpython-311.py").write_text("stale")
    (package / "datasource" / "reading" / "scan.pyc").write_bytes(b"\0")
    assert code.source_digest(package) == first


def test_the_identity_names_the_package_pyarrow_and_python_and_is_one_per_code():
    identity = code.code_identity()
    assert code.source_digest(code.PACKAGE_DIR)[:32] in identity
    assert f"pyarrow:{pa.__version__}" in identity and "python:" in identity
    # Another process running the same files has the same identity: the node's Python
    # workers (and a second application) share entries.
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "from raptorx_py.datasource.planning.code_identity import code_identity;"
            " print(code_identity())",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    assert other == identity


def test_a_result_computed_by_other_code_is_a_miss(tmp_path, monkeypatch):
    c = cache(tmp_path)
    stored = key()
    assert stored is not None and c.put(stored, SCHEMA, batches())
    assert c.get(key()) is not None  # the same code: a hit
    monkeypatch.setattr(fragment_keys, "code_identity", lambda: code.code_identity() + "-fixed")
    changed = key()
    assert changed is not None and changed != stored
    with CounterDeltas() as deltas:
        assert c.get(changed) is None
    assert deltas["fragment_cache.misses"] == 1 and deltas["fragment_cache.hits"] == 0
