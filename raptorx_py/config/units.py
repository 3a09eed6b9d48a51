"""Airlift-style values: data sizes, durations, booleans and integers.

Every property value is a string; this module turns the strings into Python values and
back. The accepted forms follow Airlift's ``DataSize`` and ``Duration`` (what Presto and
RaptorX configuration files use), so an existing Presto catalog file parses unchanged.

Data sizes (``parse_data_size``) -> ``int`` bytes
    ``<number><unit>`` with unit ``B``, ``kB``, ``MB``, ``GB``, ``TB`` or ``PB``, spelled
    exactly so (Airlift is case sensitive). Units are binary: ``1kB`` = 1024 B,
    ``1MB`` = 1024 kB, and so on. The number may have a fraction (``1.5GB``) as long as the
    result is a whole number of bytes; ``1.1kB`` (1126.4 bytes) is rejected rather than
    silently rounded. A plain integer without a unit (``4096``) is a number of bytes.
    Whitespace between number and unit is allowed (``100 MB``). Negative sizes are not.

Durations (``parse_duration``) -> ``float`` seconds
    ``<number><unit>`` with unit ``ns``, ``us``, ``ms``, ``s``, ``m``, ``h`` or ``d``
    (case sensitive, as in Airlift). The number may have a fraction (``1.5h``). A unit is
    required — a bare ``30`` is ambiguous and rejected — except for ``0``, which means
    zero in any unit. Negative durations are not allowed.

Booleans (``parse_bool``)
    ``true`` or ``false`` in any letter case; nothing else (not ``yes``, ``1`` or ``on``).

Integers (``parse_int``)
    An optional sign and decimal digits (``-3``, ``42``); no fractions, no underscores.

All parsers ignore surrounding whitespace and raise ``ValueError`` whose message states the
expected form and repeats the offending value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

#: Data size units, smallest first, with their size in bytes (binary, as in Airlift).
DATA_SIZE_UNITS: dict[str, int] = {
    "B": 1,
    "kB": 1024,
    "MB": 1024**2,
    "GB": 1024**3,
    "TB": 1024**4,
    "PB": 1024**5,
}

#: Duration units, smallest first, with their length in nanoseconds.
DURATION_UNITS_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3_600 * 1_000_000_000,
    "d": 86_400 * 1_000_000_000,
}

_NS_PER_SECOND = 1_000_000_000

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)[ \t]*([A-Za-z]*)$")
_INTEGER = re.compile(r"^[+-]?[0-9]+$")

_SIZE_FORM = "a data size such as 512MB or 1GB (units: B, kB, MB, GB, TB, PB)"
_DURATION_FORM = "a duration such as 500ms, 30s or 6h (units: ns, us, ms, s, m, h, d)"


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected {what} as a string, got {type(value).__name__} {value!r}")
    return value.strip()


def _number_and_unit(
    value: object, what: str, form: str, units: Mapping[str, object]
) -> tuple[str, str]:
    """An Airlift quantity's number (as written) and unit (``""`` when it has none); a
    ``ValueError`` naming ``form`` when it is malformed or its unit is not one of ``units``."""
    m = _QUANTITY.match(_text(value, what))
    if not m:
        raise ValueError(f"expected {form}, got {value!r}")
    number, unit = m.group(1), m.group(2)
    if unit and unit not in units:
        raise ValueError(f"expected {form}, got {value!r} (unknown unit {unit!r})")
    return number, unit


def parse_data_size(value: str) -> int:
    """Parse an Airlift data size (``"100MB"``, ``"1.5GB"``, ``"4096"``) into bytes.

    Raises ``ValueError`` for an unknown unit, a negative or malformed number, or a value
    that is not a whole number of bytes.
    """
    number, unit = _number_and_unit(value, "a data size", _SIZE_FORM, DATA_SIZE_UNITS)
    if unit == "":
        if "." in number:
            raise ValueError(
                f"expected {_SIZE_FORM}, got {value!r} "
                "(a number without a unit must be a whole number of bytes)"
            )
        return int(number)
    nbytes = Fraction(number) * DATA_SIZE_UNITS[unit]
    if nbytes.denominator != 1:
        raise ValueError(
            f"expected {_SIZE_FORM}, got {value!r} "
            f"(that is {float(nbytes):g} bytes, not a whole number)"
        )
    return int(nbytes)


def parse_duration(value: str) -> float:
    """Parse an Airlift duration (``"500ms"``, ``"6h"``, ``"1.5d"``, ``"0"``) into seconds.

    Raises ``ValueError`` for a missing or unknown unit, or a negative or malformed number.
    """
    number, unit = _number_and_unit(value, "a duration", _DURATION_FORM, DURATION_UNITS_NS)
    if unit == "":
        if Fraction(number) == 0:
            return 0.0
        raise ValueError(
            f"expected {_DURATION_FORM}, got {value!r} (a unit is required for anything but 0)"
        )
    return float(Fraction(number) * DURATION_UNITS_NS[unit] / _NS_PER_SECOND)


def parse_bool(value: str) -> bool:
    """Parse ``true`` / ``false`` (any letter case). Anything else raises ``ValueError``."""
    text = _text(value, "a boolean")
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError(f"expected a boolean, true or false, got {value!r}")


def parse_int(value: str) -> int:
    """Parse a decimal integer with an optional sign (``"42"``, ``"-1"``)."""
    text = _text(value, "an integer")
    if not _INTEGER.match(text):
        raise ValueError(f"expected an integer such as 0, 3 or 100, got {value!r}")
    return int(text)


def parse_count(value: str) -> int:
    """Parse a non-negative decimal integer (a size, a number of retries)."""
    n = parse_int(value)
    if n < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return n


@dataclass(frozen=True)
class FormedParser:
    """A property-value parser that also states, for error messages and the generated docs,
    the form of value it accepts. Calling it parses like ``parse``."""

    parse: Callable[[str], str]
    form: str

    def __call__(self, value: str) -> str:
        return self.parse(value)


def choice(*values: str, aliases: dict[str, str] | None = None) -> FormedParser:
    """A parser accepting one of ``values`` (any letter case) or an alias of one; it returns
    the canonical upper-case value. ``form`` on the parser lists what is accepted."""
    aliases = dict(aliases or {})
    accepted = {v.upper(): v for v in values}
    accepted.update({a.upper(): v for a, v in aliases.items()})
    form = "one of " + ", ".join(list(values) + list(aliases))

    def parse(value: str) -> str:
        text = _text(value, form)
        try:
            return accepted[text.upper()]
        except KeyError:
            raise ValueError(f"expected {form}, got {value!r}") from None

    return FormedParser(parse, form)


THRIFT_URIS_FORM = "empty, or thrift://host:port (a comma-separated list of them)"


def split_thrift_uris(value: str) -> list[tuple[str, int]]:
    """``thrift://h1:9083,thrift://h2:9083`` as ``[(host, port), ...]``, in order; empty: none.
    Each part needs the scheme, a host and a port (1-65535): ``thrift//h:9083``, ``h:9083``,
    ``http://h:9083`` and ``thrift://h`` are refused (``ValueError`` naming the part)."""
    from urllib.parse import urlsplit

    text = _text(value, THRIFT_URIS_FORM)
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            parsed = urlsplit(part)
            host, port = parsed.hostname, parsed.port
        except ValueError:  # a port that is not a number, or out of range
            host, port = None, None
        if (
            parsed.scheme != "thrift"
            or not host
            or port is None
            or not 0 < port < 65536
            or parsed.path not in ("", "/")
        ):
            raise ValueError(f"{part!r} is not thrift://host:port (expected {THRIFT_URIS_FORM})")
        out.append((host, port))
    return out


def _parse_thrift_uris(value: str) -> str:
    split_thrift_uris(value)
    return _text(value, THRIFT_URIS_FORM)


#: ``hive.metastore.uri``'s kind: checked when the configuration is loaded, so a malformed
#: URI fails with its file and line, not at the first table access.
thrift_uris = FormedParser(_parse_thrift_uris, THRIFT_URIS_FORM)


def _shortest(quantity: Fraction, units: dict[str, int]) -> str:
    """Write ``quantity`` (in the smallest unit) in the largest unit giving a whole number.

    If no unit gives a whole number (a fraction of the smallest unit), the smallest unit is
    used with a decimal fraction (``quantity`` then always has a power-of-ten denominator).
    """
    for unit, factor in reversed(units.items()):
        scaled = quantity / factor
        if scaled.denominator == 1:
            return f"{scaled.numerator}{unit}"
    smallest = next(iter(units))
    with localcontext() as ctx:
        ctx.prec = 200
        text = f"{(Decimal(quantity.numerator) / Decimal(quantity.denominator)).normalize():f}"
    return f"{text}{smallest}"


def format_data_size(nbytes: int) -> str:
    """Format a byte count exactly, in the largest unit that divides it (``1048576`` -> ``1MB``).

    ``parse_data_size(format_data_size(n)) == n`` for every ``n >= 0``. ``1536`` gives
    ``1536B`` (not ``1.5kB``): whole numbers in the largest exact unit are what the conf
    files use.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"expected a non-negative whole number of bytes, got {nbytes!r}")
    if nbytes == 0:
        return "0B"
    return _shortest(Fraction(nbytes), DATA_SIZE_UNITS)


def format_duration(seconds: float) -> str:
    """Format a duration in seconds exactly, in the largest unit that gives a whole number.

    ``300`` -> ``5m``, ``0.5`` -> ``500ms``, ``5400`` -> ``90m``, ``0`` -> ``0s``. The float is
    read by its shortest decimal representation (``0.1`` is 100ms, not 100.000000000000005ms),
    so ``parse_duration(format_duration(s)) == s`` for durations parsed from text.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValueError(f"expected a duration in seconds as a number, got {seconds!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"expected a finite, non-negative duration in seconds, got {seconds!r}")
    # repr() gives the shortest decimal that reads back as the same float.
    quantity = Fraction(repr(seconds)) * _NS_PER_SECOND
    if quantity == 0:
        return "0s"
    return _shortest(quantity, DURATION_UNITS_NS)
