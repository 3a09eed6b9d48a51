"""One snapshot per query, not per scan. A query with two scans of one
managed table, with a commit landing between the planning of the two (made by a hook in the
first scan's planning, so the order is deterministic), reads the same snapshot in both."""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from raptorx_py import native
from raptorx_py.datasource.reader import TieredHiveReader
from raptorx_py.datasource.source import configured_source_class
from raptorx_py.hive.model import Column
from raptorx_py.metastore import open_metastore
from raptorx_py.session import register
from raptorx_py.tables.commit import commit_write
from raptorx_py.tables.heartbeat import TxnHeartbeat
from raptorx_py.tables.task_files import write_task
from raptorx_py.tables.write_job import begin_write

pytestmark = pytest.mark.spark

COLUMNS = [Column("id", "bigint")]


def append(settings, database, ids):
    with open_metastore(settings.metastore_connection, create=True) as ms:
        job = begin_write(ms, settings, database, "t", COLUMNS, False)
        batch = pa.RecordBatch.from_pydict({"id": pa.array(ids, pa.int64())})
        files = write_task(
            settings, job, [batch], heartbeat=TxnHeartbeat(settings, job.txn_id, metastore=ms)
        )
        commit_write(ms, settings, job, files)


@pytest.fixture
def hooked_source(spark, env):
    """The Python source, with a reader whose planning commits ``[100]`` to the table once,
    right after the first scan planned (a marker file says it happened)."""

    def install(database, marker):
        # The hook's classes and helpers go to the planning workers by value (this test
        # module is not importable there).
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        settings = env.settings()
        base = configured_source_class(settings, name=native.PYTHON_NAME, pushdown=True)

        class CommittingReader(TieredHiveReader):
            def partitions(self):
                planned = super().partitions()
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    return planned
                append(self.settings, database, [100])
                return planned

        class Hooked(base):
            def reader(self, schema):
                return CommittingReader(
                    self.settings, self.database, self.table_name, schema, pushdown=self._pushdown
                )

        spark.dataSource.register(Hooked)

    yield install
    register(spark, properties=env.properties)  # the session's own source again
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_two_scans_of_one_table_in_one_query_read_one_snapshot(spark, env, tmp_path, hooked_source):
    database = env.unique_db("qs")
    append(env.settings(), database, [1, 2, 3])
    hooked_source(database, str(tmp_path / "committed"))
    df = spark.read.format("tiered_hive").load(f"{database}.t")
    union = sorted(r.id for r in df.union(df).collect())
    assert os.path.exists(tmp_path / "committed")  # the commit landed between the two scans
    assert union == [1, 1, 2, 2, 3, 3]
    self_join = df.alias("a").join(df.alias("b"), "id", "full_outer").collect()
    assert sorted(r.id for r in self_join) == [1, 2, 3, 100]  # a new query sees the commit


def test_a_spark_read_of_a_missing_metastore_fails_naming_it(spark, tmp_path):
    """A typo in the SQLite path fails, instead of reading a new, empty metastore."""
    typo = tmp_path / "metastor.db"
    with pytest.raises(Exception, match=f"no SQLite metastore at {typo}"):
        spark.read.format("tiered_hive").option("hive.metastore.url", f"sqlite:///{typo}").load(
            "db.t"
        ).collect()
    assert not typo.exists()
