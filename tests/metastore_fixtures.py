"""The metastore backends every metastore test runs against.

``metastore_url`` is parametrised over the backends: each test that takes it runs once on an
SQLite file and once on a PostgreSQL database (a real server, started once per test session
by ``tests/postgres_fixtures.py``; each test gets a fresh database).
"""

from __future__ import annotations

import pytest

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(params=BACKENDS)
def metastore_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/metastore.db"
    if request.param == "postgresql":
        # Requested lazily: SQLite-only runs (-k sqlite) never start the server.
        return request.getfixturevalue("postgres_database_url")
    raise AssertionError(f"unknown metastore backend {request.param}")
