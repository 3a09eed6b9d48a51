"""The rule for a partition absent from storage (``storage/absent_partitions.py``), and the
planner's use of it, Spark-free: which empty listings are absent, the error's words, and the
opt-out's warning once per partition. Through Spark and both metastores:
``tests/integration/test_absent_partitions.py``."""

from __future__ import annotations

import logging

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.errors import FileChangedError, PartitionMissingError
from raptorx_py.storage.absent_partitions import absent_reason
from raptorx_py.tables.table_registration import register_external_table
from tests.support.counter_deltas import CounterDeltas


@pytest.mark.parametrize(
    ("exists", "parameters", "reason"),
    [
        (False, {}, "does not exist"),
        (
            False,
            {"numFiles": "2", "numRows": "7"},
            "does not exist, but the metastore records 2 files, 7 rows",
        ),
        (True, {"numRows": "7"}, "holds no data file, but the metastore records 7 rows"),
        (True, {}, None),  # an empty partition
        (True, {"numFiles": "0", "numRows": "0"}, None),
        (False, {"numFiles": "0", "numRows": "0"}, None),  # empty, on an object store
    ],
)
def test_which_empty_listings_are_absent(tmp_path, exists, parameters, reason):
    path = tmp_path / "k=1"
    if exists:
        path.mkdir()
    fs = fsspec.filesystem("file")
    assert absent_reason(fs, str(path), f"file://{path}", parameters) == reason


def test_the_planner_fails_on_an_absent_partition_or_skips_it_warning_once(env, tmp_path, caplog):
    root = tmp_path / "t"
    for k in (1, 2):
        (root / f"k={k}").mkdir(parents=True)
        pq.write_table(pa.table({"id": [k]}), str(root / f"k={k}" / "part-0.parquet"))
    settings = env.settings()
    name = f"{env.unique_db('absent')}.t"
    with env.metastore() as ms:
        table = register_external_table(ms, settings, name, f"file://{root}")
        (root / "k=2" / "part-0.parquet").unlink()  # the directory stays, emptied
        with CounterDeltas() as c, pytest.raises(PartitionMissingError) as info:
            plan_scan(ms, settings, table, table.all_columns, [])
        assert isinstance(info.value, FileChangedError | FileNotFoundError)
        assert (info.value.table, info.value.partition) == (name, "k=2")
        assert info.value.location == f"file://{root}/k=2"
        assert str(info.value).startswith(
            f"partition k=2 of {name}, at file://{root}/k=2, holds no data file, but the "
            "metastore records 1 file, 1 row"
        )
        assert f"`raptorx partition drop {name} k=2`" in str(info.value)
        assert c["planner.partitions_absent"] == 1
        ignoring = env.settings(**{"hive.ignore-absent-partitions": "true"})
        with CounterDeltas() as c, caplog.at_level(logging.WARNING):
            for _ in range(2):
                plan = plan_scan(ms, ignoring, table, table.all_columns, [])
                assert [s.partition_values for s in plan.splits] == [(1,)]
        assert c["planner.partitions_absent_skipped"] == 2
        warned = [r for r in caplog.records if "hive.ignore-absent-partitions" in r.getMessage()]
        assert len(warned) == 1
