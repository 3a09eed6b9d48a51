"""The Java .properties reader (raptorx_py.config.properties_file)."""

from __future__ import annotations

import os

import pytest

from raptorx_py.config.properties_file import (
    format_property,
    parse_properties_text,
    read_properties,
)
from raptorx_py.errors import ConfigError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", {}),
        ("\n\n   \n\t\n", {}),
        ("a=1", {"a": ("1", 1)}),
        ("a = 1", {"a": ("1", 1)}),
        ("a:1", {"a": ("1", 1)}),
        ("a : 1", {"a": ("1", 1)}),
        ("a 1", {"a": ("1", 1)}),
        ("a\t1", {"a": ("1", 1)}),
        ("   a=1   ", {"a": ("1", 1)}),
        ("a", {"a": ("", 1)}),
        ("a=", {"a": ("", 1)}),
        ("a   ", {"a": ("", 1)}),
        ("a==b", {"a": ("=b", 1)}),
        ("a=b=c", {"a": ("b=c", 1)}),
        ("a :=b", {"a": ("=b", 1)}),
        ("a=x # not a comment", {"a": ("x # not a comment", 1)}),
        ("url=sqlite:///~/x.db", {"url": ("sqlite:///~/x.db", 1)}),
        ("# comment\na=1", {"a": ("1", 2)}),
        ("! comment\na=1", {"a": ("1", 2)}),
        ("   # indented comment\na=1", {"a": ("1", 2)}),
        ("a=1\n\n# c\nb=2", {"a": ("1", 1), "b": ("2", 4)}),
        ("a=1\r\nb=2\rc=3\n", {"a": ("1", 1), "b": ("2", 2), "c": ("3", 3)}),
        # continuation lines
        ("a=one\\\n    two", {"a": ("onetwo", 1)}),
        ("a=one \\\n  two \\\n  three\nb=4", {"a": ("one two three", 1), "b": ("4", 4)}),
        ("a=x\\\n# not a comment", {"a": ("x# not a comment", 1)}),
        ("a=x\\\n\nb=2", {"a": ("x", 1), "b": ("2", 3)}),
        ("a=x\\", {"a": ("x", 1)}),
        ("a=x\\\\\nb=2", {"a": ("x\\", 1), "b": ("2", 2)}),
        ("# comment \\\na=1", {"a": ("1", 2)}),
        ("na\\\n  me=v", {"name": ("v", 1)}),
        # escapes
        ("a=x\\ty", {"a": ("x\ty", 1)}),
        ("a=x\\ny", {"a": ("x\ny", 1)}),
        ("a=x\\\\y", {"a": ("x\\y", 1)}),
        ("a=x\\=y\\:z", {"a": ("x=y:z", 1)}),
        ("a=\\u00e9t\\u00E9", {"a": ("été", 1)}),
        ("a=\\uD83D\\uDE00", {"a": ("\U0001f600", 1)}),
        ("a=\\q", {"a": ("q", 1)}),
        ("a\\=b=c", {"a=b": ("c", 1)}),
        ("a\\:b c", {"a:b": ("c", 1)}),
        ("a\\ b=c", {"a b": ("c", 1)}),
        ("\\#a=1", {"#a": ("1", 1)}),
        ("été=ü", {"été": ("ü", 1)}),
    ],
)
def test_parse(text, expected):
    assert parse_properties_text(text, "f.properties") == expected


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("=value", 1, "line has no property name (expected 'name=value', got '=value')"),
        ("a=1\n  : value", 2, "line has no property name"),
        ("a=1\nb=2\n\n= x", 4, "line has no property name"),
        ("a=\\u00g1", 1, "malformed \\uXXXX escape '\\u00g1' in the value"),
        ("a=\\u12", 1, "malformed \\uXXXX escape"),
        ("a\\u=1", 1, "in the property name"),
        ("a=\\uD83D", 1, "unpaired surrogate"),
        ("# c\na=1\nb=2\na=3", 4, "duplicate property: set on line 2 and again on line 4"),
        ("a=1\na : 1", 2, "duplicate property: set on line 1 and again on line 2"),
    ],
)
def test_parse_errors(text, line, fragment):
    with pytest.raises(ConfigError) as info:
        parse_properties_text(text, "conf/x.properties")
    err = info.value
    assert err.source == "conf/x.properties"
    assert err.line == line
    assert str(err).startswith(f"conf/x.properties:{line}")
    assert fragment in str(err)


def test_duplicate_names_key_file_and_both_lines():
    with pytest.raises(ConfigError) as info:
        parse_properties_text("hive.s3.region=a\n\nhive.s3.region=b\n", "conf/hive.properties")
    assert str(info.value) == (
        "conf/hive.properties:3, property 'hive.s3.region': "
        "duplicate property: set on line 1 and again on line 3"
    )
    assert info.value.key == "hive.s3.region"


def test_read_properties(tmp_path):
    path = tmp_path / "hive.properties"
    path.write_bytes("\ufeff# c\nhive.s3.region = eu-west-1\nx=é\n".encode("utf-8"))
    assert read_properties(path) == {"hive.s3.region": ("eu-west-1", 2), "x": ("é", 3)}
    assert read_properties(str(path)) == read_properties(path)


def test_read_missing_file(tmp_path):
    path = tmp_path / "nope.properties"
    with pytest.raises(ConfigError) as info:
        read_properties(path)
    assert str(info.value) == f"{path}: properties file does not exist"
    assert info.value.source == str(path)


def test_read_directory(tmp_path):
    with pytest.raises(ConfigError, match="expected a properties file, found a directory") as info:
        read_properties(tmp_path)
    assert info.value.source == str(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_read_unreadable_file(tmp_path):
    path = tmp_path / "secret.properties"
    path.write_text("a=1\n")
    path.chmod(0)
    with pytest.raises(ConfigError, match="cannot read properties file") as info:
        read_properties(path)
    assert info.value.source == str(path)


def test_read_not_utf8(tmp_path):
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"a=1\nb=caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        read_properties(path)
    assert str(info.value) == f"{path}:2: not valid UTF-8 (byte 0xe9 at offset 9)"


def test_parse_error_in_file_names_the_file(tmp_path):
    path = tmp_path / "config.properties"
    path.write_text("a=1\n=oops\n")
    with pytest.raises(ConfigError) as info:
        read_properties(path)
    assert info.value.source == str(path)
    assert info.value.line == 2


@pytest.mark.parametrize(
    "key, value, line",
    [
        ("a", "1", "a=1"),
        ("a", "", "a="),
        ("hive.metastore.url", "sqlite:///~/x.db", "hive.metastore.url=sqlite:///~/x.db"),
        ("a", "x=y:z # w", "a=x=y:z # w"),
        ("a", "back\\slash", "a=back\\\\slash"),
        ("a", "tab\there\nnewline", "a=tab\\there\\nnewline"),
        ("a", "in side", "a=in side"),
        ("we=ird:key name", "v", "we\\=ird\\:key\\ name=v"),
        ("#k", "v", "\\#k=v"),
        ("!k", "#v", "\\!k=#v"),
        ("k", "été", "k=été"),
    ],
)
def test_format_property_round_trips(key, value, line):
    assert format_property(key, value) == line
    assert parse_properties_text(line, "f") == {key: (value, 1)}


@pytest.mark.parametrize("key, value", [("", "v"), (" k", "v"), ("k", " v"), ("k", "v ")])
def test_format_property_rejects_what_cannot_round_trip(key, value):
    with pytest.raises(ValueError):
        format_property(key, value)
