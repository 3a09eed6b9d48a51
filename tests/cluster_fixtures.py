"""The pytest fixture of a Spark standalone cluster on loopback
(``devservers.standalone_cluster``): one master and two workers per test module, stopped
whatever happens."""

from __future__ import annotations

import pytest

from devservers.standalone_cluster import StandaloneCluster


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()
