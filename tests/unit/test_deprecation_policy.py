"""pyproject.toml's warning filters: a DeprecationWarning from our own code fails the test that
triggers it, one from a third-party module does not (it is shown in pytest's summary)."""

from __future__ import annotations

import warnings

import pytest


def _warn_from(module: str, category: type[Warning] = DeprecationWarning) -> None:
    warnings.warn_explicit(
        f"deprecated, from {module}", category, filename="probe.py", lineno=1, module=module
    )


@pytest.mark.parametrize(
    "module", ["raptorx_py", "raptorx_py.session", "tests.unit.test_x", "benchmarks.report"]
)
def test_a_deprecation_in_our_code_is_an_error(module):
    with pytest.raises(DeprecationWarning, match=module):
        _warn_from(module)
    with pytest.raises(PendingDeprecationWarning):
        _warn_from(module, PendingDeprecationWarning)


@pytest.mark.parametrize("module", ["botocore.auth", "pyspark.sql", "raptorx_pyx"])
def test_a_third_party_deprecation_is_shown_not_raised(module):
    # record=True keeps the filters pytest set from pyproject.toml (pytest.warns would not)
    with warnings.catch_warnings(record=True) as caught:
        _warn_from(module)  # does not raise
    assert [str(w.message) for w in caught] == [f"deprecated, from {module}"]
