"""The JVM contract in the layout: every module of ``raptorx_py/jvm_contract/`` has its Scala
twin of the same name in CamelCase in ``native/src/main/scala/raptorx/contract/`` (one Scala
package, ``raptorx.contract``), that package depends on nothing else of the jar's, and
docs/design/jvm-contract.md names every file of it, so the mirror cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "raptorx_py" / "jvm_contract"
SCALA = ROOT / "native" / "src" / "main" / "scala" / "raptorx" / "contract"
PAGE = ROOT / "docs" / "design" / "jvm-contract.md"


def camel(module: str) -> str:
    """``jvm_read_handoff`` -> ``JvmReadHandoff``."""
    return "".join(part.capitalize() for part in module.split("_"))


def python_modules() -> list[str]:
    return sorted(p.stem for p in PYTHON.glob("*.py") if p.stem != "__init__")


def scala_files() -> list[Path]:
    return sorted(SCALA.glob("*.scala"))


def test_every_python_module_has_its_scala_twin() -> None:
    modules = python_modules()
    assert len(modules) >= 6
    assert [m for m in modules if not (SCALA / f"{camel(m)}.scala").is_file()] == []


def test_the_scala_contract_is_one_package_below_the_rest() -> None:
    """Each file is in ``raptorx.contract`` and imports none of the jar's other packages (nor
    Spark's execution internals): the glue that needs them calls the contract, not the other
    way round."""
    files = scala_files()
    assert len(files) >= len(python_modules())
    problems = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        if not text.startswith("package raptorx.contract\n"):
            problems.append(f"{path.name}: not in package raptorx.contract")
        for name in re.findall(r"^import\s+(?:_root_\.)?([\w.]+)", text, re.MULTILINE):
            if name.startswith("raptorx.") and not name.startswith("raptorx.contract"):
                problems.append(f"{path.name}: imports {name}")
            if name.startswith("org.apache.spark.sql.execution"):
                problems.append(f"{path.name}: imports {name}")
    assert problems == []


def test_the_page_names_every_scala_file_of_the_contract() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert [p.name for p in scala_files() if f"`{p.name}`" not in page] == []


def test_camel_case_names_the_twins() -> None:
    assert camel("jvm_read_handoff") == "JvmReadHandoff"
    assert camel("protocol") == "Protocol"
