"""SQL statements sent to the metastore to register an external table of N partitions.

``python -m benchmarks.registration_statements [--partitions 10000] [--metastore-url URL]``
writes N one-row Parquet partitions (``p=0 .. p=N-1``) under a temporary directory, registers
them with ``register_external_table`` into a new metastore (a temporary SQLite file, or the
given one) and prints how many statements that sent: the ``metastore.round_trips`` counter,
which counts every ``execute`` and every ``executemany`` (one batch is one statement) and
nothing else. It is a count, not a timing: the same code gives the same number on any
machine; only a change to how partitions are written changes it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

from raptorx_py.config import build_settings
from raptorx_py.metastore.store import Metastore, backend_for_url
from raptorx_py.metrics import counters
from raptorx_py.tables.table_registration import register_external_table

ROUND_TRIPS = "metastore.round_trips"


def write_partitions(root: str, partitions: int) -> None:
    """``root/p=<i>/part-0.parquet``, one row each."""
    table = pa.table({"id": pa.array([1], pa.int64())})
    for i in range(partitions):
        directory = os.path.join(root, f"p={i}")
        os.makedirs(directory)
        pq.write_table(table, os.path.join(directory, "part-0.parquet"))


def registration_statements(metastore_url: str, data_root: str) -> int:
    """Statements sent by registering ``data_root`` as ``bench.t`` (the metastore's schema
    is created before counting, so only the registration is counted)."""
    settings = build_settings({"hive.metastore.url": (metastore_url, "benchmark", None)})
    with Metastore(backend_for_url(metastore_url)) as ms:
        before = counters.snapshot().get(ROUND_TRIPS, 0)
        register_external_table(ms, settings, "bench.t", f"file://{data_root}", replace=True)
        return counters.snapshot().get(ROUND_TRIPS, 0) - before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--metastore-url", help="default: a temporary SQLite file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="raptorx-registration-") as tmp:
        data_root = os.path.join(tmp, "t")
        write_partitions(data_root, args.partitions)
        url = args.metastore_url or f"sqlite:///{tmp}/metastore.db"
        statements = registration_statements(url, data_root)
    print(json.dumps({"partitions": args.partitions, "statements": statements}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
