"""The docs against the code: docs/architecture.md's module table names every module of
``raptorx_py/`` and nothing else, and docs/design/observability.md's counter table names every
counter the code counts and nothing else. A failure says which rows to add or remove, and
where.

What counts as a module: every ``.py`` file under ``raptorx_py/``, spelled as its path below
``raptorx_py/`` (``storage/fs.py``); a package's ``__init__.py`` is spelled as the package
(``cache/``), the top-level one as ``__init__.py``.

What counts as a counter: the first argument of every ``counters.add(...)`` and
``counting_as(...)`` call in ``raptorx_py/``: a string literal is the name; an f-string is a
family of names, written in the doc with ``<...>`` where the f-string has ``{...}``
(``f"affinity.preferred.{location}"`` is ``affinity.preferred.<executor location>``); a
module-level string constant is resolved. ``metrics.py`` itself is skipped: it only puts
back counts it could not flush, under the names they already had.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "raptorx_py"
ARCHITECTURE = "docs/architecture.md"  # the module table
OBSERVABILITY = "docs/design/observability.md"  # the counter table

MODULE_TABLE_HEADER = "| module | one concept | Spark-free? |"
COUNTER_TABLE_HEADER = "| name | counted where |"

# A placeholder in a name: ``{...}`` in an f-string, ``<...>`` in the doc.
PLACEHOLDER = "<>"


def table_first_cells(doc: str, header: str) -> list[tuple[int, list[str]]]:
    """For each row of the table under ``header`` in ``doc``: its line number in the doc and
    the backticked names in its first cell."""
    lines = (REPO / doc).read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == header]
    assert len(starts) == 1, (
        f"{doc} must hold exactly one table with the header {header!r} (found {len(starts)})"
    )
    rows = []
    for i in range(starts[0] + 2, len(lines)):  # past the header and its |---| line
        if not lines[i].startswith("|"):
            break
        first_cell = lines[i].split("|")[1]
        rows.append((i + 1, re.findall(r"`([^`]+)`", first_cell)))
    return rows


# -- modules ---------------------------------------------------------------------------------


def code_modules() -> set[str]:
    modules = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.name != "__init__.py":
            modules.add(rel.as_posix())
        elif rel.parent == Path("."):
            modules.add("__init__.py")
        else:
            modules.add(rel.parent.as_posix() + "/")
    return modules


def test_the_module_table_names_every_module_and_only_those():
    rows = table_first_cells(ARCHITECTURE, MODULE_TABLE_HEADER)
    listed: dict[str, int] = {}
    problems = []
    for line, names in rows:
        if not names:
            problems.append(f"line {line}: the row names no module (put its path in backticks)")
        for name in names:
            if name in listed:
                problems.append(
                    f"line {line}: `{name}` is listed twice (also line {listed[name]}); "
                    "remove one row"
                )
            listed.setdefault(name, line)
    code = code_modules()
    for name in sorted(code - set(listed)):
        problems.append(f"add a row `{name}`: raptorx_py/{name} exists")
    for name in sorted(set(listed) - code):
        problems.append(
            f"line {listed[name]}: remove or rename the row `{name}`: "
            f"there is no raptorx_py/{name}"
            + (" (a package is written `pkg/`, a module `pkg/mod.py`)" if "." not in name else "")
        )
    assert not problems, (
        f"{ARCHITECTURE}, the module table (headed {MODULE_TABLE_HEADER!r}), disagrees with "
        "raptorx_py/:\n  " + "\n  ".join(problems)
    )


# -- counters --------------------------------------------------------------------------------


def _string_constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out[node.targets[0].id] = node.value.value
    return out


def _is_counting_call(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id == "counting_as"
    if isinstance(f, ast.Attribute):
        if f.attr == "counting_as":
            return True
        owner = f.value
        owner_name = (
            owner.id
            if isinstance(owner, ast.Name)
            else owner.attr
            if isinstance(owner, ast.Attribute)
            else None
        )
        return f.attr == "add" and owner_name == "counters"
    return False


def _names_of(arg: ast.expr, constants: dict[str, str]) -> list[str]:
    """The counter names (placeholders as ``<>``) one counting call's argument can take."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr):
        return [
            "".join(
                str(part.value) if isinstance(part, ast.Constant) else PLACEHOLDER
                for part in arg.values
            )
        ]
    return [
        constants[n.id]
        for n in ast.walk(arg)
        if isinstance(n, ast.Name) and n.id in constants and "." in constants[n.id]
    ]


def code_counters() -> dict[str, str]:
    """Every counter name (families with ``<>``) the code counts, with where it is counted."""
    found: dict[str, str] = {}
    unresolved = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "metrics.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _string_constants(tree)
        where_file = path.relative_to(REPO).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _is_counting_call(node) and node.args:
                names = _names_of(node.args[0], constants)
                if not names:
                    unresolved.append(f"{where_file}:{node.lineno}")
                for name in names:
                    found.setdefault(name, f"{where_file}:{node.lineno}")
    assert not unresolved, (
        "cannot tell which counter these calls count; name it with a string literal, an "
        "f-string or a module-level constant: " + ", ".join(unresolved)
    )
    return found


def _doc_form(name: str) -> str:
    return re.sub(r"<[^>]*>", PLACEHOLDER, name)


def test_the_counter_table_names_every_counter_and_only_those():
    rows = table_first_cells(OBSERVABILITY, COUNTER_TABLE_HEADER)
    listed: dict[str, tuple[int, str]] = {}
    problems = []
    for line, names in rows:
        if not names:
            problems.append(f"line {line}: the row names no counter (put its name in backticks)")
        for name in names:
            key = _doc_form(name)
            if key in listed:
                problems.append(
                    f"line {line}: `{name}` is listed twice (also line {listed[key][0]}); "
                    "remove one"
                )
            listed.setdefault(key, (line, name))
    code = code_counters()
    for key in sorted(set(code) - set(listed)):
        shown = key.replace(PLACEHOLDER, "<...>")
        problems.append(
            f"add `{shown}` to a row, in full (no `.x` shorthand"
            f"{', `<...>` naming each placeholder' if PLACEHOLDER in key else ''}"
            f"): counted at {code[key]}"
        )
    for key in sorted(set(listed) - set(code)):
        line, name = listed[key]
        problems.append(
            f"line {line}: remove `{name}`: raptorx_py/ counts no such counter (or, if it "
            "was renamed, write its new name)"
        )
    assert not problems, (
        f"{OBSERVABILITY}, the counter table (headed {COUNTER_TABLE_HEADER!r}), disagrees with "
        "raptorx_py/:\n  " + "\n  ".join(problems)
    )


def test_the_readmes_commands_for_any_directory_use_absolute_paths():
    """Under "from any directory", the `pyspark` command once used `$PWD/.venv` and
    relative jar paths, which work only from the clone's root."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Your own queries", 1)[1].split("\n## ", 1)[0]
    assert "from any directory" in section
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert any("pyspark" in b for b in blocks)
    for block in blocks:
        assert "$PWD" not in block, block
        paths = re.findall(r"(?<![\w$/.])(?:\.venv|native)/\S+", block)
        assert paths == [], f"relative paths {paths} in: {block}"
    prose = re.sub(r"```.*?```", "", section, flags=re.S)
    inline = re.findall(r"`([^`]*\.venv/bin/[^`]*)`", prose)
    assert inline and all(c.startswith("$R/") for c in inline), inline


def test_the_readme_names_both_forms_of_the_scan_node():
    """A query by SQL name shows `BatchScan raptorx.<db>.<table>`
    (tests/integration/test_spark_catalog.py checks the name Spark gives it)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"\s+", " ", readme)
    assert "`BatchScan tiered_hive <db.table>`" in text
    assert "`BatchScan raptorx.<db>.<table>`" in text
