"""A split's read spec (datasource/read_spec.py) and the JVM hand-off mark
(datasource/fragment_handoff.py), without Spark."""

from __future__ import annotations

import dataclasses
import pickle

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from raptorx_py.datasource import fragment_handoff as handoff
from raptorx_py.datasource.fragment_keys import fragment_key
from raptorx_py.datasource.placement import PlacedPartition
from raptorx_py.datasource.planner import Split
from raptorx_py.datasource.read_spec import ReadSpec, read_specs
from raptorx_py.metastore.model import Column, Table
from raptorx_py.predicates import Comparison

SCHEMA = pa.schema([pa.field("x", pa.int64())])
TABLE = Table("db", "t", "EXTERNAL_TABLE", "file:///t", (Column("x", "bigint"),), id=7)
P1, P2 = Comparison("x", ">", 5), Comparison("x", "<", 50)
PLAIN = Split("file:///t/ds=1/f.parquet", 1000, 1700000000.5, None, ("1",))
SIMPLIFIED = dataclasses.replace(PLAIN, url="file:///t/ds=2/f.parquet", predicates=(P2,))
UNVERSIONED = Split("file:///t/ds=3/f.parquet", 1000, None, None, ("3",))


def test_the_key_hashes_the_fields_the_reader_computes_from():
    ((plain, simplified, unversioned),) = read_specs(
        TABLE, ((PLAIN, SIMPLIFIED, UNVERSIONED),), TABLE.columns, (P1, P2), None, SCHEMA
    )
    # a split evaluates its own residual predicates when statistics dropped some
    assert plain.predicates == (P1, P2) and simplified.predicates == (P2,)
    for spec in (plain, simplified):
        assert spec.key == fragment_key(
            spec.table, spec.split, spec.columns, spec.predicates, spec.aggregation, SCHEMA
        )
    assert plain.key != simplified.key
    assert unversioned.key is None  # never cached


def test_a_spec_survives_pickling_with_its_key():
    spec = ReadSpec.of(TABLE, PLAIN, TABLE.columns, (P1,), None, SCHEMA)
    assert pickle.loads(pickle.dumps(spec)) == spec


def _pickled_mark(partition) -> tuple[bytes, int]:
    data = pickle.dumps(partition)
    return data, data.index(handoff.MARKER.encode())


def test_the_mark_is_verbatim_in_the_pickle_and_its_flags_come_back():
    keys = [bytes(range(20)), None, b"\xff" * 20]
    mark = handoff.handoff_mark("~/.raptorx/fragments é", "/tmp/metrics", keys)
    assert mark.isascii()
    for partition in (InputPartition(("specs",)), PlacedPartition(("specs",), "executor_h_1")):
        handoff.mark_partition(partition, mark)
        data, at = _pickled_mark(partition)
        assert data[at : at + len(mark)] == mark.encode()
        assert handoff.served_by_jvm(pickle.loads(data), 3) == (False, False, False)
        # what the JVM does: stamp the first and last split's flags, same length
        flags = at + len(mark) - 1 - 3
        stamped = bytearray(data)
        stamped[flags] = stamped[flags + 2] = ord(handoff.SERVED)
        assert handoff.served_by_jvm(pickle.loads(bytes(stamped)), 3) == (True, False, True)


def test_no_mark_or_a_mark_for_another_task_serves_nothing():
    assert handoff.served_by_jvm(InputPartition(()), 2) == (False, False)
    partition = handoff.mark_partition(
        InputPartition(()), handoff.handoff_mark("d", None, [b"k" * 20])
    )
    assert handoff.served_by_jvm(partition, 2) == (False, False)
