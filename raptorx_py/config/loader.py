"""Load, validate and describe raptorx_py's configuration.

Precedence, lowest to highest (a later layer overrides an earlier one, property by
property):

1. the defaults in ``raptorx_py.config.settings.PROPERTIES``;
2. ``<cwd>/conf/config.properties``, then ``<cwd>/conf/hive.properties`` — the project's
   own conf files, each read only if it exists;
3. the directory given as ``conf_dir`` or, when that is not given, named by the
   environment variable ``RAPTORX_CONF_DIR``: its ``config.properties``, then its
   ``hive.properties``. The directory must exist and hold at least one of the two;
4. ``overrides`` (per-read ``.option(...)`` values, source ``"option"``; ``register``'s
   ``properties``, source ``"register(properties=...)"``; a Spark catalog's conf,
   ``spark.sql.catalog.<name>.<property>``, source ``"Spark conf spark.sql.catalog.<name>"``).

Any property may be set in either file; the file a property belongs in
(``Property.file``) only decides where the generated conf files list it. Values are
strings and are used as written (trimmed): no ``~`` or ``${VAR}`` expansion happens here;
the consumers of path-like values expand them, and ``register()`` makes them absolute in the
client before they travel to Spark's workers (``config/paths.py``).

After changing the property table, regenerate ``conf/*.properties`` and the property list
in ``docs/configuration.md`` with::

    python -c "from raptorx_py.config.loader import main; main(['--write'])"
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raptorx_py.config.properties_file import format_property, read_properties
from raptorx_py.config.settings import PARSERS, PROPERTIES, PROPERTIES_BY_NAME, Settings
from raptorx_py.config.units import FormedParser
from raptorx_py.errors import ConfigError, did_you_mean, raise_config_errors

#: Environment variable naming a configuration directory.
CONF_DIR_ENV = "RAPTORX_CONF_DIR"
#: What errors name as the source of ``register``'s ``properties`` (``session.register``).
PROPERTIES_SOURCE = "register(properties=...)"
#: File names inside a configuration directory, lowest precedence first.
CONF_FILES = ("config.properties", "hive.properties")
#: Property kinds -> the form a value must have (used in error messages and docs).
KIND_FORMS = {
    "str": "text",
    "bool": "true or false",
    "int": "an integer",
    "count": "a non-negative integer",
    "size": "a data size such as 512MB or 1GB",
    "duration": "a duration such as 500ms, 30s or 6h",
}


def kind_form(kind: str) -> str:
    """What a value of this kind looks like, for errors and the docs."""
    form = KIND_FORMS.get(kind)
    if form:
        return form
    parser = PARSERS[kind]
    if not isinstance(parser, FormedParser):
        raise TypeError(
            f"the parser of property kind {kind!r} states no form: make it a FormedParser"
        )
    return parser.form


#: Width of the wrapped descriptions in ``describe_settings``.
DESCRIBE_WIDTH = 96

#: Properties whose value ``describe_settings`` never prints.
SECRET_PROPERTIES = frozenset({"hive.s3.aws-secret-key"})

#: Section headings of the generated conf files, by name prefix (the longest match wins).
SECTIONS: tuple[tuple[str, str], ...] = (
    ("connector.", "Catalog"),
    ("hive.metastore", "Metastore"),
    ("hive.s3.", "Object store (S3)"),
    ("hive.file-status-cache", "File-listing cache"),
    ("hive.partition-versioning", "Metastore"),
    ("hive.parquet.metadata-cache", "Parquet footer cache"),
    ("hive.orc.file-tail-cache", "ORC file tail cache"),
    ("hive.orc.stripe-", "ORC stripe metadata cache"),
    ("hive.file-handle-cache", "File handle cache"),
    ("cache.", "Block (data) cache"),
    ("fragment-result-cache.", "Fragment result cache"),
    ("hive.partition-statistics", "Statistics-based pruning"),
    ("hive.max-split-size", "Splits"),
    ("hive.min-split-count", "Splits"),
    ("hive.node-selection-strategy", "Soft affinity scheduling"),
    ("hive.support.concurrency", "Transactions and locks"),
    ("hive.lock.", "Transactions and locks"),
    ("hive.txn.", "Transactions and locks"),
    ("metrics.", "Metrics"),
)
_OTHER_SECTION = "Other"

Raw = Mapping[str, tuple[Any, str, "int | None"]]


def _value_string(name: str, value: Any, source: str, line: int | None) -> str:
    """Accept strings; also Python bools and ints (``True`` -> ``"true"``) from code."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value.strip()
    raise ConfigError(
        f"value must be a string, got {type(value).__name__} {value!r}",
        source=source,
        line=line,
        key=name,
    )


#: Presto/Hive property names that a copied catalog file may hold but that raptorx_py
#: does not read, with what to use instead.
FOREIGN_PROPERTIES: dict[str, str] = {}


def unknown_property_error(name: str, source: str, line: int | None) -> ConfigError:
    """The error for a property name that is not in the table, with the closest name."""
    if name in FOREIGN_PROPERTIES:
        return ConfigError(FOREIGN_PROPERTIES[name], source=source, line=line, key=name)
    close = did_you_mean(name, PROPERTIES_BY_NAME)
    hint = (
        f"did you mean '{close}'?"
        if close
        else "see docs/configuration.md for the list of properties"
    )
    return ConfigError(f"unknown property; {hint}", source=source, line=line, key=name)


def build_settings(
    raw: Raw, errors: list[ConfigError] | None = None, sources: list[str] | None = None
) -> Settings:
    """Validate ``{name: (value, source, line)}`` and build ``Settings``.

    Every name must be in ``PROPERTIES`` and every value must parse as its property's
    kind; otherwise ``ConfigError`` names the source, the line (if known), the property
    and, for a bad value, the expected form (for an unknown name, the closest known one).
    Every bad property is reported, with ``errors`` found before (a file's bad lines), at
    once: one ``ConfigError``, or ``ConfigErrors`` of them all, in the order of ``sources``
    (the files read, then the overrides) and by line.
    Properties not in ``raw`` take their defaults. ``Settings.source`` records the final
    string of every property (defaults included), sorted by name.
    """
    found: list[ConfigError] = list(errors or ())
    strings = {p.name: p.default for p in PROPERTIES}
    values: dict[str, Any] = {}
    for name, (value, source, line) in raw.items():
        prop = PROPERTIES_BY_NAME.get(name)
        try:
            if prop is None:
                raise unknown_property_error(name, source, line)
            strings[name] = _value_string(name, value, source, line)
        except ConfigError as e:
            found.append(e)
    for prop in PROPERTIES:
        text = strings[prop.name]
        try:
            values[prop.field] = PARSERS[prop.kind](text)
            lower = prop.lower_bound
            if lower is not None and values[prop.field] < PARSERS[prop.kind](lower):
                raise ValueError(f"must be at least {lower}")
        except ValueError as e:
            origin = raw.get(prop.name)
            source, line = (origin[1], origin[2]) if origin else ("default", None)
            found.append(
                ConfigError(f"invalid value {text!r}: {e}", source=source, line=line, key=prop.name)
            )
    # In the order the sources were read (``sources``: files, then overrides), each by line.
    rank: dict[str | None, int] = {}
    for source in [*(sources or ()), *(v[1] for v in raw.values())]:
        rank.setdefault(source, len(rank))
    found.sort(key=lambda e: (rank.get(e.source, len(rank)), e.line or 0))
    raise_config_errors(found)
    return Settings(**values, source=tuple(sorted(strings.items())))


def _conf_dir_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise ConfigError(f"configuration directory {what}", source=str(directory))
    files = [directory / name for name in CONF_FILES if (directory / name).is_file()]
    if not files:
        raise ConfigError(
            f"configuration directory holds neither {' nor '.join(CONF_FILES)}",
            source=str(directory),
        )
    return files


def config_files(
    conf_dir: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> list[Path]:
    """The properties files ``load_settings`` reads, lowest precedence first."""
    env = os.environ if env is None else env
    base = Path.cwd() if cwd is None else Path(cwd)
    files = [base / "conf" / name for name in CONF_FILES if (base / "conf" / name).is_file()]
    chosen = conf_dir if conf_dir is not None else (env.get(CONF_DIR_ENV) or None)
    if chosen is not None:
        directory = Path(chosen)
        if not directory.is_absolute():
            directory = base / directory
        files += _conf_dir_files(directory)
    return files


def load_settings(
    conf_dir: str | os.PathLike | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    overrides_source: str = "option",
    override_sources: Mapping[str, str] | None = None,
) -> Settings:
    """Load ``Settings`` from defaults, conf files and overrides (see the module docstring).

    ``env`` defaults to ``os.environ`` and ``cwd`` to the current directory; both exist so
    tests can pass their own. A relative ``conf_dir`` (or ``RAPTORX_CONF_DIR``) is taken
    relative to ``cwd``. ``overrides_source`` is what errors about an override name as its
    source (the CLI says ``-p/--property``), ``override_sources`` that of single overrides
    (a catalog's Spark conf). Raises ``ConfigError`` for a missing or empty conf
    directory, a
    malformed file, an unknown property or a bad value, naming the file, line and key.
    """
    raw: dict[str, tuple[Any, str, int | None]] = {}
    errors: list[ConfigError] = []  # every bad line of every file, reported together
    files = config_files(conf_dir, env, cwd)
    for path in files:
        for name, (value, line) in read_properties(path, errors).items():
            raw[name] = (value, str(path), line)
    sources = {**(override_sources or {})}
    for name, value in (overrides or {}).items():
        raw[name] = (value, sources.get(name, overrides_source), None)
    return build_settings(
        raw, errors, [*(str(p) for p in files), *sorted(set(sources.values())), overrides_source]
    )


def _mask(name: str, value: str) -> str:
    if name in SECRET_PROPERTIES and value:
        return "<hidden>"
    return mask_url_password(value) if "://" in value else value


def mask_url_password(url: str, hidden: str = "<hidden>") -> str:
    """``url`` with the password of its ``user:password@`` part and any ``password=`` query
    option replaced by ``hidden`` (a PostgreSQL metastore URL carries one). Masks up to
    the last ``@``, so an unencoded ``@`` or ``/`` in a password leaks no piece of it (at
    worst it masks too much of a malformed URL). The one masking of URLs: the CLI, the
    benchmark and the PostgreSQL backend's errors all use it."""
    url = re.sub(r"^([^:/]*://[^/:@]*:).*@", lambda m: m.group(1) + hidden + "@", url)
    return re.sub(r"(password=)[^&#]*", lambda m: m.group(1) + hidden, url)


def _differs(prop, value: str) -> bool:
    """Whether ``value`` means something else than the default (``local`` is ``LOCAL``)."""
    try:
        return PARSERS[prop.kind](value) != PARSERS[prop.kind](prop.default)
    except ValueError:
        return True


def _shown(value: str) -> str:
    return value if value else '""'


def describe_settings(settings: Settings) -> str:
    """A plain-text table of every property: name, value and default, with its description
    wrapped on the lines below.

    Rows whose value differs from the default start with ``*``, in a column of its own (a
    value may itself be ``*``); an empty value shows as ``""``; secret values are masked.
    """
    current = settings.properties()
    rows = [("", "name", "value", "default", "description")]
    for p in PROPERTIES:
        value = current.get(p.name, p.default)
        mark = "*" if _differs(p, value) else ""
        rows.append((mark, p.name, _shown(_mask(p.name, value)), _shown(p.default), p.doc))
    widths = [max(len(r[i]) for r in rows) for i in range(1, 4)]
    lines = []
    # Each description wrapped under its row: on the row itself lines ran to 500 characters.
    for i, row in enumerate(rows):
        lines.append(row[0].ljust(2) + "  ".join(c.ljust(w) for c, w in zip(row[1:4], widths)))
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
        else:
            lines += textwrap.wrap(
                row[4],
                width=DESCRIBE_WIDTH,
                initial_indent="    ",
                subsequent_indent="    ",
                break_on_hyphens=False,
                break_long_words=False,
            )
    lines.append(
        '(* before a name: its value differs from the default; "": empty; '
        "under each property, what it does)"
    )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def settings_records(settings: Settings) -> list[dict[str, Any]]:
    """Every property as a record (``raptorx config show --json``): its name, value (secret
    values masked), default, whether the value differs from the default, its file and what
    it does."""
    current = settings.properties()
    out = []
    for p in PROPERTIES:
        value = current.get(p.name, p.default)
        out.append(
            {
                "name": p.name,
                "value": _mask(p.name, value),
                "default": p.default,
                "differs": _differs(p, value),
                "file": f"{p.file}.properties",
                "description": p.doc,
            }
        )
    return out


def section_of(name: str) -> str:
    """The heading a property is listed under in the conf files and the docs."""
    best = ""
    title = _OTHER_SECTION
    for prefix, heading in SECTIONS:
        if name.startswith(prefix) and len(prefix) > len(best):
            best, title = prefix, heading
    return title


def _grouped(props) -> list[tuple[str, list]]:
    groups: dict[str, list] = {}
    for p in props:
        groups.setdefault(section_of(p.name), []).append(p)
    return list(groups.items())


_FILE_TITLES = {
    "hive": ("hive.properties", "Connector properties (RaptorX / Presto Hive connector names)."),
    "config": ("config.properties", "Engine-wide properties."),
}


def render_conf_file(file: str) -> str:
    """The text of ``conf/<file>.properties``: every property of that file at its default.

    Each property is an active ``name=default`` line after a ``# description`` comment,
    grouped under section headers in table order. ``file`` is ``"hive"`` or ``"config"``.
    """
    if file not in _FILE_TITLES:
        raise ValueError(f"expected file 'hive' or 'config', got {file!r}")
    filename, title = _FILE_TITLES[file]
    out = [
        f"# raptorx_py {filename}: {title}",
        "# Generated from raptorx_py/config/settings.py by",
        "#   python -c \"from raptorx_py.config.loader import main; main(['--write'])\"",
        "# Every line below is the default. Edit values here, or override them in",
        f"# $RAPTORX_CONF_DIR/{filename} or per read with .option(name, value).",
        "# Sizes: B, kB, MB, GB, TB, PB (binary). Durations: ns, us, ms, s, m, h, d.",
    ]
    for heading, props in _grouped(p for p in PROPERTIES if p.file == file):
        out += ["", f"# ---- {heading} " + "-" * max(4, 72 - len(heading)), ""]
        for p in props:
            out.append(f"# {p.doc}")
            out.append(format_property(p.name, p.default))
    return "\n".join(out) + "\n"


DOCS_BEGIN = "<!-- BEGIN GENERATED PROPERTY LIST (see raptorx_py/config/loader.py) -->"
DOCS_END = "<!-- END GENERATED PROPERTY LIST -->"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render_property_docs() -> str:
    """The property list of ``docs/configuration.md`` (between the generated markers)."""
    out = [DOCS_BEGIN]
    for heading, props in _grouped(PROPERTIES):
        out += [
            "",
            f"### {heading}",
            "",
            "| property | default | form | file | description |",
            "|---|---|---|---|---|",
        ]
        for p in props:
            default = f"`{p.default}`" if p.default else "(empty)"
            out.append(
                f"| `{p.name}` | {_md(default)} | {kind_form(p.kind)} | "
                f"{p.file}.properties | {_md(p.doc)} |"
            )
    out += ["", DOCS_END]
    return "\n".join(out)


def _replace_docs_block(text: str) -> str:
    start, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if start < 0 or end < start:
        raise ValueError("docs/configuration.md lacks the generated-property-list markers")
    return text[:start] + render_property_docs() + text[end + len(DOCS_END) :]


def write_generated(root: str | os.PathLike) -> list[Path]:
    """Rewrite ``conf/*.properties`` and the docs' property list under ``root``."""
    root = Path(root)
    written = []
    for file in ("config", "hive"):
        path = root / "conf" / f"{file}.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_conf_file(file), encoding="utf-8")
        written.append(path)
    docs = root / "docs" / "configuration.md"
    if docs.exists():
        docs.write_text(_replace_docs_block(docs.read_text(encoding="utf-8")), encoding="utf-8")
        written.append(docs)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"] or (len(args) == 2 and args[0] == "--write"):
        root = args[1] if len(args) == 2 else Path(__file__).resolve().parents[2]
        for path in write_generated(root):
            print(f"wrote {path}")
        return 0
    if args in ([], ["--show"]):
        sys.stdout.write(describe_settings(load_settings()))
        return 0
    print("usage: main([]) | main(['--show']) | main(['--write', ROOT])", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())


def with_overrides(
    settings: Settings, overrides: dict[str, str], origin: str = "option"
) -> Settings:
    """``settings`` with ``overrides`` applied over the properties they were built from,
    checked as at load (``origin`` is what an error names as their source)."""
    merged = settings.properties()
    merged.update(overrides)
    return build_settings({k: (v, origin, None) for k, v in merged.items()})
