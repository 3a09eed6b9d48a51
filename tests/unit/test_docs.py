"""The docs against the code: docs/architecture.md's module table names every module of
``raptorx_py/`` and nothing else, and docs/design/observability.md's counter table names every
counter the code counts and nothing else; docs/overview.md and the pages under docs/design/
show only modules, classes and functions the code has (the last section below). A failure
says which rows or names to add, rename or remove, and where.

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


def test_the_own_queries_commands_for_any_directory_use_absolute_paths():
    """Under "from any directory" (docs/howto/own-queries.md, which the README links), the
    `pyspark` command once used `$PWD/.venv` and relative jar paths, which work only from
    the clone's root."""
    section = (REPO / "docs" / "howto" / "own-queries.md").read_text(encoding="utf-8")
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


def test_the_metrics_page_names_both_forms_of_the_scan_node():
    """A query by SQL name shows `BatchScan raptorx.<db>.<table>` (docs/howto/metrics.md;
    tests/integration/test_spark_catalog.py checks the name Spark gives it)."""
    readme = (REPO / "docs" / "howto" / "metrics.md").read_text(encoding="utf-8")
    text = re.sub(r"\s+", " ", readme)
    assert "`BatchScan tiered_hive <db.table>`" in text
    assert "`BatchScan raptorx.<db>.<table>`" in text


# -- names the overview and the design pages show ------------------------------------------
#
# docs/overview.md (its Mermaid picture, its walkthrough and its tables) and the pages under
# docs/design/ name modules and classes; a rename in the code must fail here until the docs
# follow. A module path is checked as written (``raptorx_py/cache/block_store.py``, or
# ``cache/block_store.py`` as the module table spells it). A class is checked by name only:
# Python's ``class``/``def`` under ``raptorx_py/`` (and the dev servers and benchmarks the
# pages describe), Scala's ``class``/``object``/``trait`` under ``native/src/main/scala``,
# wherever its file is. A member written after it (``FragmentHits.verified``) must be defined
# in our code too. The names of Spark, Hadoop, Arrow and the other libraries the pages show
# are listed in ``FOREIGN``; a name listed there must not be ours and must still be shown.

OVERVIEW = "docs/overview.md"
DESIGN_PAGES = sorted(
    p.relative_to(REPO).as_posix() for p in (REPO / "docs" / "design").glob("*.md")
)
NATIVE_SOURCES = REPO / "native" / "src" / "main" / "scala"
# Repository code outside the package that the pages describe (the emulated S3 store, the
# benchmark's report).
OTHER_PYTHON = ("devservers", "benchmarks")

FOREIGN = frozenset(
    """
    AcidUtils AppendData ArrowColumnVector ArrowPythonRunner ArrowUtils ArrowWriter BatchScan
    BatchScanExec BatchedPythonArrowInput BigDecimal BigInteger BroadcastHashJoin
    CatalystTypeConverters
    ColumnarBatch ColumnarToRow
    CommonsCompressionFactory DataSource DataSourceRegister DataType DbNotificationListener
    DefaultSource DriverPlugin ExecutorPlugin FileMetaData FileScan HashAggregate
    InputPartition InvalidRange MapInBatchEvaluator MapInBatchEvaluatorFactory MessageFactory
    MethodHandles NoCredentialsError NoSuchKey NoSuchMethodError NoSuchNamespaceException
    NoSuchTableException OperationalError OrcFileFormat ParquetFileFormat
    PartitionFilters PartitioningUtils
    PostgreSQL Py4J PluginContext PostScanFilters ProcedureCatalog PushedAggregates PushedFilters
    PushedGroupByExpressions Py4JException PythonClient PythonCustomMetric PythonDataSourceV2
    PythonException PythonInputPartition PythonPartitionReaderFactory PythonPlannerRunner
    PythonScan PythonScanBuilder PythonWriteBuilder QueryExecution QueryPlanningTracker
    RawStore ReadSchema ReuseExchangeAndSubquery ReusedExchange SimpleAWSCredentialsProvider
    SparkConnectServer SparkFiles SparkPlugin
    SparkSession SupportsMetadata SupportsNamespaces SupportsPushDownAggregates
    SupportsPushDownFilters SupportsPushDownRequiredColumns SupportsReportStatistics
    TableCatalog TableProvider ThriftHiveMetastore TieredHiveScan TxnIdUtils UnsafeRow
    UserDefinedPythonDataSource UserDefinedPythonDataSourceFilterPushdownRunner
    UserDefinedPythonDataSourceRunner V2ScanRelationPushDown
    """.split()
)

# A class as a page writes it: CamelCase with two humps or more, perhaps after a lower-case
# package (``raptorx.cache.``), perhaps followed by one member and ``()``.
CLASS_NAME = re.compile(
    r"^(?:[a-z][a-z0-9]*\.)*([A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+)(?:\.(\w+))?(?:\(\))?$"
)
# A function of ours as the overview writes it: ``plan_scan``, ``_fragment_planned_before``.
FUNCTION_NAME = re.compile(r"^(_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?:\(\))?$")
MODULE_PATH = re.compile(r"raptorx_py/(?:[\w]+/)*[\w]+\.py|raptorx_py/(?:[\w]+/)+")
# Made by the wheel's build, not in the tree (the jar inside the package).
BUILT = ("raptorx_py/jars/",)


def _subpackages() -> set[str]:
    return {p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.glob("*/__init__.py")}


def _defined_python(roots) -> tuple[set[str], set[str]]:
    """Classes and functions, and every name defined or assigned at any depth."""
    classes: set[str] = set()
    members: set[str] = set()
    for root in roots:
        for path in root.rglob("*.py"):
            if ".venv" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            classes |= set(re.findall(r"^\s*(?:class|def|async def)\s+(\w+)", text, re.M))
            members |= set(re.findall(r"^\s*(?:class|def|async def)\s+(\w+)", text, re.M))
            members |= set(re.findall(r"^\s*(?:self\.)?(\w+)\s*(?::[^=\n]*)?=", text, re.M))
    return classes, members


def _defined_scala() -> tuple[set[str], set[str]]:
    classes: set[str] = set()
    members: set[str] = set()
    for path in NATIVE_SOURCES.rglob("*.scala"):
        text = path.read_text(encoding="utf-8")
        classes |= set(re.findall(r"\b(?:class|object|trait)\s+(\w+)", text))
        members |= set(re.findall(r"\b(?:def|val|var|lazy val|object|class)\s+(\w+)", text))
    return classes, members


def _mermaid_blocks(text: str) -> list[tuple[int, str]]:
    return [
        (text[: m.start()].count("\n") + 1, m.group(1))
        for m in re.finditer(r"```mermaid\n(.*?)```", text, re.S)
    ]


def _shown(doc: str, pictures: bool = True):
    """(line, name) of every backticked name in ``doc`` and, with ``pictures``, of every
    word of its Mermaid pictures. A file name (``FragmentHits.scala``) is not a name: files
    move between directories, their classes stay."""
    text = (REPO / doc).read_text(encoding="utf-8")
    shown = [
        (i, token.strip())
        for i, line in enumerate(text.splitlines(), start=1)
        for token in re.findall(r"`([^`\n]+)`", line)
    ]
    if pictures:
        shown += [
            (start + 1 + j, word)
            for start, block in _mermaid_blocks(text)
            for j, line in enumerate(block.splitlines())
            for word in re.findall(r"[A-Za-z_][\w.]*[\w]", line)
        ]
    return [(i, name) for i, name in shown if not name.endswith((".scala", ".py", ".md"))]


def test_the_overview_has_a_picture():
    text = (REPO / OVERVIEW).read_text(encoding="utf-8")
    blocks = _mermaid_blocks(text)
    assert len(blocks) == 1 and blocks[0][1].startswith("flowchart"), (
        f"{OVERVIEW} must hold one Mermaid flowchart, the picture of the system as it runs"
    )


def test_the_module_paths_the_overview_and_design_pages_show_exist():
    subpackages = _subpackages()
    problems = []
    for doc in [OVERVIEW, *DESIGN_PAGES, ARCHITECTURE]:
        text = (REPO / doc).read_text(encoding="utf-8")
        for i, line in enumerate(text.splitlines(), start=1):
            paths = set(MODULE_PATH.findall(line))
            for token in re.findall(r"`([^`\n]+)`", line):
                first = token.split("/", 1)[0]
                if first in subpackages and re.fullmatch(r"[\w/]+(?:\.py|/)", token):
                    paths.add("raptorx_py/" + token)
            for path in sorted(paths):
                if not path.startswith(BUILT) and not (REPO / path).exists():
                    problems.append(f"{doc}:{i}: `{path}` does not exist")
    assert not problems, "rename or remove these module paths:\n  " + "\n  ".join(problems)


def test_the_classes_the_overview_and_design_pages_show_exist():
    py_classes, py_members = _defined_python([PACKAGE, *(REPO / d for d in OTHER_PYTHON)])
    scala_classes, scala_members = _defined_scala()
    # A Scala constant shown as a name (``CacheMetrics.CounterNames``) counts as ours too.
    ours = py_classes | scala_classes | {m for m in scala_members if m[0].isupper()}
    members = py_members | scala_members
    problems = []
    foreign_shown: set[str] = set()
    for doc in [OVERVIEW, *DESIGN_PAGES]:
        for line, token in _shown(doc):
            m = CLASS_NAME.match(token)
            if not m:
                continue
            name, member = m.group(1), m.group(2)
            if name in FOREIGN:
                foreign_shown.add(name)
            elif name not in ours:
                problems.append(
                    f"{doc}:{line}: `{name}` is no class of ours (Python under raptorx_py/, "
                    "Scala under native/src/main/scala); rename it, or list it in FOREIGN if "
                    "it is a library's"
                )
            elif member and member not in members:
                problems.append(f"{doc}:{line}: `{name}.{member}`: no `{member}` in our code")
    for name in sorted(FOREIGN & ours):
        problems.append(f"FOREIGN lists `{name}`, which is ours: remove it from FOREIGN")
    for name in sorted(FOREIGN - foreign_shown):
        problems.append(f"FOREIGN lists `{name}`, which no page shows: remove it")
    assert not problems, "\n  ".join(["the pages' classes disagree with the code:", *problems])


def test_the_functions_the_overview_names_exist():
    _, py_members = _defined_python([PACKAGE])
    problems = [
        f"{OVERVIEW}:{line}: `{token}`: no such function in raptorx_py/"
        for line, token in _shown(OVERVIEW, pictures=False)
        if (m := FUNCTION_NAME.match(token)) and m.group(1) not in py_members
    ]
    assert not problems, "\n  ".join(["rename or remove:", *problems])
