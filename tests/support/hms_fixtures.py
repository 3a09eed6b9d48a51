"""A real Hive Metastore 2.3.10 (Thrift, embedded Derby) for the tests, one per test session.

``hms_server`` starts ``devservers.hive_metastore.HiveMetastoreServer`` with the test
notification listener (about 10-30 s), logs in a temporary directory, and stops it at the end
of the session. ``hms_uri`` is its ``thrift://`` URI. Each test that needs isolation uses its
own database names (HMS has one catalogue per server; Derby cannot be reset cheaply).
``hms_server_without_listener`` is a second server whose notification log stays empty;
``hms_server_without_listener_launched`` starts its process without waiting, so that a module
(``test_thrift_metastore.py``) can run other tests while it starts.
"""

from __future__ import annotations

import pytest

from devservers.hive_metastore import HiveMetastoreServer
from tests.support.jvm_options import TEST_JVM_OPTIONS


@pytest.fixture(scope="session")
def hms_server(tmp_path_factory):
    server = HiveMetastoreServer(
        tmp_path_factory.mktemp("hms"), java_options=TEST_JVM_OPTIONS
    ).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def hms_uri(hms_server) -> str:
    return hms_server.uri


@pytest.fixture(scope="session")
def hms_server_without_listener_launched(tmp_path_factory):
    server = HiveMetastoreServer(
        tmp_path_factory.mktemp("hms-nolog"),
        notification_listener=False,
        java_options=TEST_JVM_OPTIONS,
    ).launch()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def hms_server_without_listener(hms_server_without_listener_launched):
    return hms_server_without_listener_launched.wait_ready()
