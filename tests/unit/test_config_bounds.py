"""Every numeric property is range-checked when the configuration loads
(a lower bound per kind, tighter ones per property), naming the property and the bound,
instead of failing later in a cache, a split or botocore."""

from __future__ import annotations

import pytest

from raptorx_py.config import PROPERTIES, load_settings
from raptorx_py.config.settings import PARSERS
from raptorx_py.errors import ConfigError

NUMERIC = [p for p in PROPERTIES if p.kind in ("int", "count", "size", "duration")]


def below(kind: str, bound: str) -> str:
    if kind in ("int", "count"):
        return str(int(bound) - 1)
    unit = "B" if kind == "size" else "s"
    return f"0{unit}" if PARSERS[kind](bound) > 0 else f"-1{unit}"


@pytest.mark.parametrize("prop", NUMERIC, ids=lambda p: p.name)
def test_every_numeric_property_has_a_lower_bound_checked_at_load(prop, tmp_path):
    assert prop.lower_bound is not None
    settings = load_settings(overrides={prop.name: prop.lower_bound}, env={}, cwd=tmp_path)
    assert getattr(settings, prop.field) == PARSERS[prop.kind](prop.lower_bound)
    with pytest.raises(ConfigError, match=f"property '{prop.name}'"):
        load_settings(
            overrides={prop.name: below(prop.kind, prop.lower_bound)}, env={}, cwd=tmp_path
        )


@pytest.mark.parametrize(
    "name, value, bound",
    [
        ("cache.block-size", "0", "at least 1B"),
        ("hive.s3.max-error-retries", "-7", "at least 0"),
        ("hive.txn.timeout", "0s", "at least 1s"),
        ("hive.max-split-size", "0B", "at least 1B"),
    ],
)
def test_the_values_the_issue_found_are_refused_naming_property_and_bound(
    name, value, bound, tmp_path
):
    with pytest.raises(ConfigError) as e:
        load_settings(overrides={name: value}, env={}, cwd=tmp_path)
    assert f"property '{name}'" in str(e.value) and bound in str(e.value)
