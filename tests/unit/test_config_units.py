"""Airlift-style value parsing and formatting (raptorx_py.config.units)."""

from __future__ import annotations

import pytest

from raptorx_py.config.units import (
    format_data_size,
    format_duration,
    parse_bool,
    parse_data_size,
    parse_duration,
    parse_int,
)

KB, MB, GB, TB, PB = 1024, 1024**2, 1024**3, 1024**4, 1024**5


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0", 0),
        ("0B", 0),
        ("4096", 4096),
        ("1B", 1),
        ("1kB", KB),
        ("100MB", 100 * MB),
        ("1GB", GB),
        ("1600GB", 1600 * GB),
        ("2TB", 2 * TB),
        ("1PB", PB),
        ("1.5GB", 3 * GB // 2),
        ("0.5kB", 512),
        ("100 MB", 100 * MB),
        ("  64MB  ", 64 * MB),
        ("1.25kB", 1280),
    ],
)
def test_parse_data_size(text, expected):
    assert parse_data_size(text) == expected


@pytest.mark.parametrize(
    "text, detail",
    [
        ("", "got ''"),
        ("abc", "got 'abc'"),
        ("MB", "got 'MB'"),
        ("-1MB", "got '-1MB'"),
        ("1kb", "unknown unit 'kb'"),
        ("1KB", "unknown unit 'KB'"),
        ("1mb", "unknown unit 'mb'"),
        ("1 MiB", "unknown unit 'MiB'"),
        ("1.1kB", "1126.4 bytes, not a whole number"),
        ("0.3B", "not a whole number"),
        ("1.5", "must be a whole number of bytes"),
        ("1e3MB", "got '1e3MB'"),
        ("1,000MB", "got '1,000MB'"),
        ("1 M B", "got '1 M B'"),
        (".5GB", "got '.5GB'"),
    ],
)
def test_parse_data_size_errors(text, detail):
    with pytest.raises(ValueError) as info:
        parse_data_size(text)
    message = str(info.value)
    assert "expected a data size such as 512MB or 1GB" in message
    assert detail in message


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("0", 0.0),
        ("0s", 0.0),
        ("0.0", 0.0),
        ("1ns", 1e-9),
        ("250us", 0.00025),
        ("500ms", 0.5),
        ("5s", 5.0),
        ("30s", 30.0),
        ("10m", 600.0),
        ("6h", 21600.0),
        ("2d", 172800.0),
        ("1.5h", 5400.0),
        ("0.5m", 30.0),
        (" 7 s ", 7.0),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds
    assert isinstance(parse_duration(text), float)


@pytest.mark.parametrize(
    "text, detail",
    [
        ("30", "a unit is required for anything but 0"),
        ("1.5", "a unit is required"),
        ("", "got ''"),
        ("s", "got 's'"),
        ("-5s", "got '-5s'"),
        ("5S", "unknown unit 'S'"),
        ("5sec", "unknown unit 'sec'"),
        ("1w", "unknown unit 'w'"),
        ("1y", "unknown unit 'y'"),
        ("5 m s", "got '5 m s'"),
        ("1h30m", "got '1h30m'"),
        ("PT5S", "got 'PT5S'"),
    ],
)
def test_parse_duration_errors(text, detail):
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    message = str(info.value)
    assert "expected a duration such as 500ms, 30s or 6h" in message
    assert detail in message


@pytest.mark.parametrize(
    "text, expected",
    [
        ("true", True),
        ("false", False),
        ("TRUE", True),
        ("False", False),
        (" true ", True),
    ],
)
def test_parse_bool(text, expected):
    assert parse_bool(text) is expected


@pytest.mark.parametrize("text", ["", "yes", "no", "1", "0", "on", "off", "t", "truee"])
def test_parse_bool_errors(text):
    with pytest.raises(ValueError, match=r"expected a boolean, true or false, got "):
        parse_bool(text)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0", 0),
        ("2", 2),
        ("-1", -1),
        ("+7", 7),
        (" 42 ", 42),
        ("007", 7),
    ],
)
def test_parse_int(text, expected):
    assert parse_int(text) == expected


@pytest.mark.parametrize("text", ["", "1.0", "1e3", "1_000", "ten", "0x10", "- 1", "1 2"])
def test_parse_int_errors(text):
    with pytest.raises(ValueError, match=r"expected an integer such as 0, 3 or 100, got "):
        parse_int(text)


@pytest.mark.parametrize("parse", [parse_data_size, parse_duration, parse_bool, parse_int])
@pytest.mark.parametrize("value", [None, 5, 1.5, True])
def test_parsers_reject_non_strings(parse, value):
    with pytest.raises(ValueError, match=r"as a string, got "):
        parse(value)


@pytest.mark.parametrize(
    "nbytes, text",
    [
        (0, "0B"),
        (1, "1B"),
        (1023, "1023B"),
        (1024, "1kB"),
        (1536, "1536B"),
        (MB, "1MB"),
        (100 * MB, "100MB"),
        (1600 * GB, "1600GB"),
        (3 * TB, "3TB"),
        (PB, "1PB"),
        (2048 * PB, "2048PB"),
        (GB + 1, f"{GB + 1}B"),
    ],
)
def test_format_data_size(nbytes, text):
    assert format_data_size(nbytes) == text
    assert parse_data_size(text) == nbytes


@pytest.mark.parametrize("value", [-1, 1.5, "1MB", None, True])
def test_format_data_size_errors(value):
    with pytest.raises(ValueError, match=r"expected a non-negative whole number of bytes"):
        format_data_size(value)


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0, "0s"),
        (0.0, "0s"),
        (1e-9, "1ns"),
        (1.5e-9, "1.5ns"),
        (0.00025, "250us"),
        (0.1, "100ms"),
        (0.5, "500ms"),
        (5.0, "5s"),
        (90, "90s"),
        (300, "5m"),
        (5400.0, "90m"),
        (21600.0, "6h"),
        (172800.0, "2d"),
        (86400 * 365, "365d"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("value", [-1, -0.5, float("inf"), float("nan"), "5s", None, True])
def test_format_duration_errors(value):
    with pytest.raises(ValueError, match=r"duration in seconds"):
        format_duration(value)


@pytest.mark.parametrize("text", ["1ns", "2us", "3ms", "59s", "61s", "59m", "25h", "7d", "1.5h"])
def test_duration_round_trip(text):
    assert parse_duration(format_duration(parse_duration(text))) == parse_duration(text)
