"""A Java ``.properties`` reader that remembers the line every property came from.

The grammar is ``java.util.Properties.load``'s, so a Presto catalog file reads unchanged:

* Lines end with ``\\n``, ``\\r\\n`` or ``\\r``. Leading whitespace (space, tab, form feed) is
  ignored. A line whose first other character is ``#`` or ``!`` is a comment; an empty line
  is ignored.
* A line ending in an odd number of backslashes continues on the next line; the next
  line's leading whitespace is dropped. An empty line ends the continuation. A comment line
  never continues, and a continuation line starting with ``#`` is not a comment.
* The key runs to the first unescaped ``=``, ``:`` or whitespace. Whitespace around the
  separator is skipped, so ``key=value``, ``key = value``, ``key: value`` and ``key value``
  are the same. A key with no separator and nothing after it (``key``) has the empty value.
* Escapes in keys and values: ``\\t \\n \\r \\f``, ``\\uXXXX`` (exactly four hex digits;
  surrogate pairs are joined), and a backslash before any other character stands for that
  character (``\\\\``, ``\\=``, ``\\:``, ``\\#``, ``\\ ``).
* Like Presto's loader (Airlift), keys and values are trimmed after unescaping.

Stricter than Java, because a silent surprise in a configuration file is worse than an
error: a line with an empty key (``=value``), a malformed ``\\uXXXX`` escape, a key set twice
in one file, and a file that is not UTF-8 all raise ``ConfigError`` naming the file and the
line. Files are read as UTF-8 (an initial byte-order mark is ignored).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from raptorx_py.errors import ConfigError, raise_config_errors

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"
#: What Java's ``String.trim`` (and so Airlift) removes: every char up to U+0020.
_TRIMMED = "".join(chr(c) for c in range(0x21))
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")

Entries = dict[str, tuple[str, int]]


def _continues(line: str) -> bool:
    """True if ``line`` ends with an odd number of backslashes."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str):
    """Yield ``(first_line_number, logical_line)`` for every non-blank, non-comment line."""
    lines = _LINE_BREAK.split(text)
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _continues(line):
            parts.append(line[:-1])
            if i >= len(lines):
                line = ""
                break
            line = lines[i].lstrip(_WHITESPACE)
            i += 1
        parts.append(line)
        yield number, "".join(parts)


def _unescape(raw: str, source: str, number: int, what: str, key: str | None = None) -> str:
    out: list[str] = []
    i = 0
    n = len(raw)
    while i < n:
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:  # a lone trailing backslash (only at end of file): Java drops it
            i += 1
            continue
        e = raw[i + 1]
        if e == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or not set(digits) <= _HEX:
                raise ConfigError(
                    f"malformed \\uXXXX escape '\\u{digits}' in the {what}: "
                    "expected exactly four hexadecimal digits",
                    source=source,
                    line=number,
                    key=key,
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_SIMPLE_ESCAPES.get(e, e))
        i += 2
    text = "".join(out)
    try:  # join \uD83D\uDE00-style surrogate pairs into one character
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"invalid \\uXXXX escape in the {what}: unpaired surrogate",
            source=source,
            line=number,
            key=key,
        ) from e


def _split_line(logical: str) -> tuple[str, str]:
    """Split a logical line into its raw (still escaped) key and value, as Java does."""
    i = 0
    n = len(logical)
    while i < n:
        c = logical[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key = logical[: min(i, n)]
    while i < n and logical[i] in _WHITESPACE:
        i += 1
    if i < n and logical[i] in "=:":
        i += 1
        while i < n and logical[i] in _WHITESPACE:
            i += 1
    return key, logical[i:]


def parse_properties_text(
    text: str, source: str, errors: list[ConfigError] | None = None
) -> Entries:
    """Parse the text of a ``.properties`` file into ``{key: (value, line_number)}``.

    ``source`` names the file in error messages. ``line_number`` is 1-based and is the
    first physical line of a continued property. Every bad line (an empty key, a malformed
    escape, a key set twice) is a ``ConfigError`` naming ``source``, the line and the key
    when known: all of them are raised together (``ConfigErrors``), or appended to
    ``errors`` when given (the good lines are still returned).
    """
    entries: Entries = {}
    found: list[ConfigError] = []
    for number, logical in _logical_lines(text):
        try:
            key, value = _parse_line(logical, source, number, entries)
        except ConfigError as e:
            found.append(e)
            continue
        entries[key] = (value, number)
    if errors is None:
        raise_config_errors(found)
    else:
        errors.extend(found)
    return entries


def _parse_line(logical: str, source: str, number: int, entries: Entries) -> tuple[str, str]:
    raw_key, raw_value = _split_line(logical)
    key = _unescape(raw_key, source, number, "property name").strip(_TRIMMED)
    if not key:
        raise ConfigError(
            f"line has no property name (expected 'name=value', got {logical.strip()!r})",
            source=source,
            line=number,
        )
    value = _unescape(raw_value, source, number, "value", key).strip(_TRIMMED)
    if key in entries:
        first = entries[key][1]
        raise ConfigError(
            f"duplicate property: set on line {first} and again on line {number}",
            source=source,
            line=number,
            key=key,
        )
    return key, value


def read_properties(path: str | os.PathLike, errors: list[ConfigError] | None = None) -> Entries:
    """Read a ``.properties`` file into ``{key: (value, line_number)}``.

    Raises ``ConfigError`` naming the file if it is missing, unreadable or not UTF-8, and
    whatever ``parse_properties_text`` raises for its contents (``errors``: see there).
    """
    source = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError as e:
        raise ConfigError("properties file does not exist", source=source) from e
    except IsADirectoryError as e:
        raise ConfigError("expected a properties file, found a directory", source=source) from e
    except OSError as e:
        raise ConfigError(f"cannot read properties file: {e.strerror or e}", source=source) from e
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})",
            source=source,
            line=line,
        ) from e
    return parse_properties_text(text, source, errors)


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif is_key and (c in "=:" or (i == 0 and c in "#!")):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def format_property(key: str, value: str) -> str:
    """Render one ``key=value`` line that ``parse_properties_text`` reads back exactly.

    Values are trimmed on reading, so ``value`` must not have leading or trailing
    whitespace (``ValueError``). ``=`` and ``:`` are left unescaped in values (URLs stay
    readable); they are only special in keys.
    """
    if not key:
        raise ValueError("a property name cannot be empty")
    if key != key.strip(_TRIMMED) or value != value.strip(_TRIMMED):
        raise ValueError(
            f"property {key!r}: leading or trailing whitespace in the name or "
            f"value {value!r} would be trimmed when read back"
        )
    return f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}"
