"""Fixtures shared by the unit tests of the metastore's transactions and locks."""

from __future__ import annotations

import pytest

from tests.support.fake_clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """The metastore's clock, moved by the test (a test module may override it)."""
    return FakeClock()
