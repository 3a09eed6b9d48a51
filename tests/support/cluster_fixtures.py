"""The pytest fixture of a Spark standalone cluster on loopback
(``devservers.standalone_cluster``): one master and two workers per test module, stopped
whatever happens. The first worker has 2 cores, the second 1: an application of two 1-core
executors gets one on each (the master spreads an application's executors over the workers),
one of three gets two on the first host, so the tests of both shapes share one cluster."""

from __future__ import annotations

import pytest

from devservers.standalone_cluster import StandaloneCluster


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("cluster"), worker_cores=(2, 1))
    try:
        yield cluster.start()
    finally:
        cluster.stop()
