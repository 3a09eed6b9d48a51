"""The metastore backends every metastore test runs against.

``metastore_url`` is parametrised over the backends: each test that takes it runs once on an
SQLite file and once on a PostgreSQL database (a real server, started once per test session
by ``tests/support/postgres_fixtures.py``; each test gets a fresh database).
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


#: The catalogue backends: the two databases, and a Hive Metastore over Thrift (a real HMS
#: 2.3.10, one per test session: tests/support/hms_fixtures.py).
CATALOG_BACKENDS = (*BACKENDS, "thrift")


@pytest.fixture(params=CATALOG_BACKENDS)
def catalog_settings(request, tmp_path):
    """Settings whose metastore is one backend of ``CATALOG_BACKENDS``, empty (for the Hive
    Metastore: every database but ``default`` dropped first), for the tests whose subject
    every backend has (tables, partitions, statistics, external tables in the cache)."""
    from raptorx_py.config import build_settings

    if request.param == "thrift":
        from raptorx_py.metastore.thrift_store import ThriftMetastore

        uri = request.getfixturevalue("hms_uri")
        with ThriftMetastore(uri, timeout=120) as hms:
            for db in hms.list_databases():
                if db != "default":
                    hms.drop_database(db, cascade=True)
        props = {"hive.metastore.uri": uri, "hive.metastore-timeout": "120s"}
    elif request.param == "sqlite":
        props = {"hive.metastore.url": f"sqlite:///{tmp_path}/metastore.db"}
    else:
        props = {"hive.metastore.url": request.getfixturevalue("postgres_database_url")}
    props["hive.metastore-cache-ttl"] = "1h"
    return build_settings({k: (v, "test", None) for k, v in props.items()})
