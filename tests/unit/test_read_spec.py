"""A split's read spec (datasource/read_spec.py), the JVM hand-off mark
(jvm_contract/fragment_handoff.py) and a fallback task's reads, without Spark."""

from __future__ import annotations

import dataclasses
import os
import pickle

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import InputPartition

from raptorx_py.cache.fragment_cache import fragment_cache_for
from raptorx_py.config import load_settings
from raptorx_py.datasource.planning.fragment_keys import fragment_key
from raptorx_py.datasource.planning.planner import Split
from raptorx_py.datasource.planning.read_spec import ReadSpec, read_specs
from raptorx_py.datasource.reader import TieredHiveReader
from raptorx_py.hive.column_types import arrow_schema_for_spark
from raptorx_py.hive.model import Column, Table
from raptorx_py.jvm_contract import fragment_handoff as handoff
from raptorx_py.jvm_contract.placement import PlacedPartition
from raptorx_py.predicates import Comparison
from raptorx_py.storage.file_versions import stat_version
from tests.support.counter_deltas import CounterDeltas

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


def test_a_fallback_task_neither_reads_nor_fills_the_fragment_cache(tmp_path):
    """A soft-affinity task running away from its preferred host computes its splits:
    the entries of this node's cache are not read (a planted entry is not served) and none
    is stored; on its preferred executor the same task is served from the cache."""
    path = tmp_path / "t" / "f.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"x": pa.array(range(100), pa.int64())}), path)
    st = os.stat(path)
    table = Table("db", "t", "EXTERNAL_TABLE", f"file://{path.parent}", TABLE.columns, id=1)
    split = Split(f"file://{path}", st.st_size, stat_version(st), None, ())
    settings = load_settings(
        overrides={
            "fragment-result-cache.enabled": "true",
            "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
        }
    )
    schema = arrow_schema_for_spark(table.columns)
    spec = ReadSpec.of(table, split, table.columns, (), None, schema)
    cache = fragment_cache_for(settings.fragment_cache)
    planted = pa.record_batch([pa.array([-1], pa.int64())], schema)
    assert cache.put(spec.key, schema, [planted])
    reader = object.__new__(TieredHiveReader)  # what read() uses of a planned reader
    reader.settings, reader.aggregation, reader.output_names = settings, None, None

    def run(flag: str) -> list[int]:
        partition = PlacedPartition((spec,), "executor_h_1")
        partition.placement = partition.placement[:-1] + flag
        return [x for b in reader.read(partition) for x in b.column(0).to_pylist()]

    deltas = CounterDeltas()
    assert run("F") == list(range(100))
    assert deltas["fragment_cache.hits"] == deltas["fragment_cache.stores"] == 0
    assert deltas["reader.fragments_computed"] == 1 and len(cache) == 1
    assert run("P") == [-1]  # the same task on its preferred executor: served
