"""The pytest fixture of a Spark standalone cluster on loopback
(``devservers.standalone_cluster``): one master and two workers per test module, stopped
whatever happens. The first worker has 2 cores, the second 1: an application of two 1-core
executors gets one on each (the master spreads an application's executors over the workers),
one of three gets two on the first host, so the tests of both shapes share one cluster. The
master and workers run with ``TEST_JVM_OPTIONS`` (C1 only, the serial collector), as the
applications' drivers and executors do."""

from __future__ import annotations

import pytest

from devservers.standalone_cluster import StandaloneCluster
from tests.support.jvm_options import TEST_JVM_OPTIONS


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    cluster = StandaloneCluster(
        tmp_path_factory.mktemp("cluster"),
        worker_cores=(2, 1),
        daemon_java_options=TEST_JVM_OPTIONS,
    )
    try:
        yield cluster.start()
    finally:
        cluster.stop()
