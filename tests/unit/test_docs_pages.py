"""The pages as pages: each within its size, no sentence too long to read, the references
generated from the code and current, and no two pages stating a fact differently where the
code can say which is right (property names and defaults, command names).

What counts as a page: README.md, BENCHMARKS.md, CONTRIBUTING.md, CHANGELOG.md,
benchmarks/HISTORY.md and every ``.md`` under ``docs/``. A run's own record
(``benchmarks/results/<run>/README.md``) is not a page: it is kept as it was written.

What counts as a sentence: prose outside code blocks, indented code and generated blocks,
each list item and each table cell on its own, split after ``.``, ``!`` or ``?`` followed by
a capital. A backticked span counts as one word.
"""

from __future__ import annotations

import re
from pathlib import Path

from raptorx_py.cli import build_parser
from raptorx_py.config import PROPERTIES_BY_NAME
from tests.support import docs_reference

REPO = Path(__file__).resolve().parents[2]

PAGES = sorted(
    [
        *(REPO / n for n in ("README.md", "BENCHMARKS.md", "CONTRIBUTING.md", "CHANGELOG.md")),
        REPO / "benchmarks" / "HISTORY.md",
        *(REPO / "docs").rglob("*.md"),
    ]
)
# In bytes. The README is the first screen; BENCHMARKS.md the standing table.
MAX_PAGE = 25_000
MAX_README = 10_000
MAX_BENCHMARKS = 15_000
MAX_WORDS = 50


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_every_page_exists():
    for name in ("README.md", "BENCHMARKS.md", "CONTRIBUTING.md", "CHANGELOG.md", "LICENSE"):
        assert (REPO / name).is_file(), name


def test_no_page_is_over_its_size():
    limits = {"README.md": MAX_README, "BENCHMARKS.md": MAX_BENCHMARKS}
    over = [
        f"{rel(p)}: {p.stat().st_size:,} bytes, at most {limits.get(rel(p), MAX_PAGE):,}"
        for p in PAGES
        if p.stat().st_size > limits.get(rel(p), MAX_PAGE)
    ]
    assert not over, "split or trim these pages:\n  " + "\n  ".join(over)


# -- sentences -------------------------------------------------------------------------------

GENERATED = re.compile(r"<!-- BEGIN GENERATED.*?<!-- END GENERATED[^>]*-->", re.S)


def prose_units(text: str) -> list[tuple[int, str]]:
    """(line, text) of each paragraph, list item and table cell outside code and generated
    blocks."""
    text = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    units: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0

    def flush():
        if current:
            units.append((start, " ".join(current)))
            current.clear()

    for i, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or line.startswith("    " * 2):
            flush()
            continue
        if stripped.startswith("|"):
            flush()
            units += [(i, cell) for cell in stripped.strip("|").split(" | ")]
            continue
        if re.match(r"([-*+]|\d+\.)\s", stripped):
            flush()
            stripped = re.sub(r"^([-*+]|\d+\.)\s+", "", stripped)
        if not current:
            start = i
        current.append(stripped)
    flush()
    return units


def sentences(unit: str) -> list[str]:
    unit = re.sub(r"`[^`]*`", "CODE", unit)
    unit = re.sub(r"\]\([^)]*\)", "]", unit)
    unit = re.sub(r"\b(e\.g|i\.e|vs|etc|cf)\.", r"\1", unit)
    return re.split(r"(?<=[.!?])\s+(?=[A-Z(\[*\"])", unit)


def long_sentences(path: Path) -> list[str]:
    found = []
    for line, unit in prose_units(path.read_text(encoding="utf-8")):
        for sentence in sentences(unit):
            words = len(sentence.split())
            if words > MAX_WORDS:
                found.append(f"{rel(path)}:{line}: {words} words: {sentence[:90]}...")
    return found


def test_no_sentence_is_over_fifty_words():
    found = [sentence for page in PAGES for sentence in long_sentences(page)]
    assert not found, f"split these sentences (at most {MAX_WORDS} words):\n  " + "\n  ".join(found)


def test_the_sentence_rule_sees_sentences():
    text = "A short one. Then " + " ".join(["word"] * 59) + ".\n\n```\n" + "x " * 80 + "\n```\n"
    units = prose_units(text)
    assert [len(sentences(u)) for _, u in units] == [2]
    assert [len(s.split()) for _, u in units for s in sentences(u)] == [3, 60]


# -- the generated references ----------------------------------------------------------------


def test_the_api_reference_is_current():
    page = REPO / docs_reference.API_PAGE
    assert page.read_text(encoding="utf-8") == docs_reference.render_api(), (
        f"{docs_reference.API_PAGE} is stale; regenerate it with "
        "`.venv/bin/python -m tests.support.docs_reference`"
    )


def test_the_cli_reference_is_current():
    page = REPO / docs_reference.CLI_PAGE
    assert page.read_text(encoding="utf-8") == docs_reference.render_cli(), (
        f"{docs_reference.CLI_PAGE} is stale; regenerate it with "
        "`.venv/bin/python -m tests.support.docs_reference`"
    )


def test_the_api_reference_covers_every_public_name():
    text = docs_reference.render_api()
    for module, names in docs_reference.public_names().items():
        for name in names:
            assert f"`{module}.{name}`" in text, (module, name)


# -- facts stated on several pages -----------------------------------------------------------

PROPERTY_PREFIXES = tuple(
    sorted({name.split(".")[0] + "." for name in PROPERTIES_BY_NAME if "." in name})
)
# A backticked property name, perhaps with a value: `cache.enabled`, `cache.enabled=false`.
# Names of modules, files and functions under the same prefixes (`metrics.counters`,
# `cache.db`) are told apart by form: a property's last part is lower case with hyphens,
# and a name that is no property is checked only when it has a hyphen or a value.
PROPERTY_TOKEN = re.compile(
    r"`((?:" + "|".join(map(re.escape, PROPERTY_PREFIXES)) + r")[a-z0-9.-]+)(?:=([^`]*))?`"
)
# "`name` ... default `value`" or "(default: value)" in the same sentence, soon after the name.
DEFAULT_AFTER = re.compile(
    r"^[^.;]{0,60}?\(?\bdefault(?:s to| is|:|,)?\s+`?([^`),;:\s]+(?: ?[KMGT]i?B)?)`?"
)
# Hyphenated names under those prefixes that are no property, on purpose: a misspelling the
# loader's suggestion answers (docs/configuration.md, "Errors").
NOT_PROPERTIES = frozenset({"cache.max-size"})


def _normal(value: str) -> str:
    return value.strip().strip("`").rstrip(".").lower()


def property_mentions():
    """(page, line, name, value or None, stated default or None) for each backticked
    property name on every page."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        text = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for i, line in enumerate(text.splitlines(), start=1):
            for m in PROPERTY_TOKEN.finditer(line):
                name = m.group(1).rstrip(".")
                after = DEFAULT_AFTER.match(line[m.end() :])
                stated = after.group(1) if after and m.group(2) is None else None
                yield rel(page), i, name, m.group(2), stated


def test_every_property_the_pages_name_exists():
    problems = [
        f"{page}:{line}: `{name}` is no property (raptorx_py/config/settings.py)"
        for page, line, name, value, _ in property_mentions()
        if name not in PROPERTIES_BY_NAME
        and name not in NOT_PROPERTIES
        and ("-" in name.split(".")[-1] or value is not None)
    ]
    assert not problems, "\n  ".join(["rename or remove:", *problems])


def test_every_default_the_pages_state_is_the_codes():
    problems = []
    for page, line, name, _, stated in property_mentions():
        prop = PROPERTIES_BY_NAME.get(name)
        if prop is None or stated is None:
            continue
        if _normal(stated) not in {_normal(prop.default), "(empty)"} | (
            {"empty", "off", "unset"} if not prop.default else set()
        ):
            problems.append(
                f"{page}:{line}: `{name}` stated default {stated!r}, the code's is {prop.default!r}"
            )
    assert not problems, "\n  ".join(["the pages disagree with the code:", *problems])


def _commands() -> dict[str, set[str]]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    groups: dict[str, set[str]] = {}
    for name, group in sub.choices.items():
        inner = [a for a in group._actions if a.__class__.__name__ == "_SubParsersAction"]
        groups[name] = set(inner[0].choices) if inner else set()
    return groups


def _in_block(text: str, line: int) -> bool:
    """Whether line ``line`` (from 1) of ``text`` is inside a fenced code block."""
    fences = [i for i, s in enumerate(text.splitlines(), start=1) if s.lstrip().startswith("```")]
    return sum(1 for f in fences if f < line) % 2 == 1


COMMAND = re.compile(r"(?<![\w/.-])raptorx ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")


def test_every_command_the_pages_name_exists():
    groups = _commands()
    problems = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        # Commands as the pages write them: in code spans and code blocks, not in prose.
        for i, line in enumerate(text.splitlines(), start=1):
            spans = re.findall(r"`([^`]+)`", line) if not _in_block(text, i) else [line]
            for m in (m for span in spans for m in COMMAND.finditer(span)):
                group, command = m.group(1), m.group(2)
                if group not in groups:
                    problems.append(f"{rel(page)}:{i}: `raptorx {group}`: no such command")
                elif groups[group] and command is not None and command not in groups[group]:
                    problems.append(
                        f"{rel(page)}:{i}: `raptorx {group} {command}`: {group} has "
                        f"{', '.join(sorted(groups[group]))}"
                    )
    assert not problems, "\n  ".join(["rename or remove:", *problems])


def test_the_cli_reference_names_every_command():
    text = (REPO / docs_reference.CLI_PAGE).read_text(encoding="utf-8")
    for group, commands in _commands().items():
        for command in sorted(commands) or [""]:
            assert f"## raptorx {group} {command}".rstrip() in text, (group, command)


def test_the_readme_keeps_the_two_commands_and_links_the_rest():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = {line.split("#")[0].strip() for line in readme.splitlines()}
    assert {"make bench", "make test"} <= lines
    ci = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci and all(c in lines for c in ci), ci
    for link in re.findall(r"\]\(([^)#]+)\)", readme):
        if not link.startswith("http"):
            assert (REPO / link).exists(), link
    assert "BENCHMARKS.md" in readme


def test_the_pages_links_resolve():
    problems = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            target = link.split("#", 1)[0]
            if not target or re.match(r"[a-z]+:", target):
                continue
            if not (page.parent / target).exists():
                problems.append(f"{rel(page)}: ({link})")
    assert not problems, "\n  ".join(["broken links:", *problems])
