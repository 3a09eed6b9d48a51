"""No function-local imports of the project's own modules (issue 51, "two halves and one
contract"): a module imports what it uses at its top, where import-linter's contracts see
it and where a circle shows at once instead of being closed by an import inside a function.

The scan reads every module of ``raptorx_py/`` with ``ast`` and fails on an ``import`` or
``from ... import`` of ``raptorx_py`` (or a relative one) inside a function's body, anywhere
but the places ``ALLOWED`` names with their reason."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "raptorx_py"

#: Where a function-local import of the package is allowed, by path (a directory ends in
#: ``/``) or ``path::function``, with why.
ALLOWED = {
    "raptorx_py/cli/": "the CLI loads a command's modules when the command runs, so that "
    "`raptorx --help` and a light command do not import pyspark, pyarrow or the metastore",
    "raptorx_py/__init__.py::__getattr__": "PEP 562: `register` and `tiered_session` load "
    "`session` (pyspark, pyarrow) on first use, so `import raptorx_py` stays light",
}


def _is_project_import(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == "raptorx_py" or a.name.startswith("raptorx_py.") for a in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return node.level > 0 or module == "raptorx_py" or module.startswith("raptorx_py.")
    return False


def _local_imports(tree: ast.Module) -> list[tuple[str, int]]:
    """(the innermost function's name, line) of each project import inside a function."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = child.name
            elif isinstance(child, ast.Lambda):
                inner = "<lambda>"
            if function is not None and _is_project_import(child):
                found.append((function, child.lineno))
            visit(child, inner)

    visit(tree, None)
    return found


def _allowed_by(path: str, function: str) -> str | None:
    for place in ALLOWED:
        if place.endswith("/") and path.startswith(place):
            return place
        if place == f"{path}::{function}":
            return place
    return None


def _scan() -> tuple[list[str], set[str]]:
    offending: list[str] = []
    used: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
        for function, line in _local_imports(tree):
            place = _allowed_by(relative, function)
            if place is None:
                offending.append(f"{relative}:{line} in {function}()")
            else:
                used.add(place)
    return offending, used


def test_no_function_local_imports_of_the_package_outside_the_allowed_places():
    offending, _ = _scan()
    assert not offending, (
        "import these at the module's top (import-linter's layers say where a module may "
        "import from); a circle is a layering to fix, not a reason to defer an import:\n"
        + "\n".join(offending)
    )


def test_every_allowed_place_still_has_a_local_import():
    """An allowance nothing uses any more is removed, so the list stays the exceptions."""
    _, used = _scan()
    assert set(ALLOWED) - used == set()


def test_the_scan_sees_imports_inside_functions_methods_and_nested_functions():
    tree = ast.parse(
        "import raptorx_py.errors\n"
        "def f():\n"
        "    from raptorx_py import names\n"
        "class C:\n"
        "    def m(self):\n"
        "        import raptorx_py.metrics\n"
        "        def g():\n"
        "            from .x import y\n"
        "        import json\n"
    )
    assert _local_imports(tree) == [("f", 3), ("m", 6), ("g", 8)]
