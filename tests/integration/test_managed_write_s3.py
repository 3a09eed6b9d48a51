"""The managed write path on an object store (the local S3 endpoint): moves are server-side
copies + deletes, an overwrite's empty base exists as an object, and the cleaner works there
too. Spark-free (the managed write of ``raptorx_py.tables`` driven directly), so it checks S3
only."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.storage.acid_layout import base_dir_name, delta_dir_name
from raptorx_py.storage.fs import filesystem_for
from raptorx_py.tables.cleaner import clean_table
from raptorx_py.tables.commit import commit_write
from raptorx_py.tables.commit_files import EMPTY_BASE_FILE
from raptorx_py.tables.heartbeat import TxnHeartbeat
from raptorx_py.tables.task_files import write_task
from raptorx_py.tables.write_job import begin_write
from tests.support.fake_clock import FakeClock
from tests.unit.test_managed_write import COLUMNS, batch, die_after_moving

pytestmark = pytest.mark.s3


def test_append_overwrite_and_clean_on_s3(env, s3_endpoint, s3_bucket, tmp_path):
    settings = env.settings(
        **s3_endpoint.s3_properties(),
        **{
            "hive.metastore.url": f"sqlite:///{tmp_path}/ms.db",
            "hive.metastore.warehouse.dir": f"s3://{s3_bucket}/wh",
        },
    )
    clock = FakeClock()
    ms = Metastore(SqliteBackend(f"{tmp_path}/ms.db"), clock=clock, txn_timeout=300)
    fs, _ = filesystem_for(f"s3://{s3_bucket}", settings)

    def write(ids, overwrite=False):
        job = begin_write(ms, settings, "db", "t", COLUMNS, overwrite, ("region",))
        files = write_task(
            settings,
            job,
            [batch(ids)],
            heartbeat=TxnHeartbeat(settings, job.txn_id, metastore=ms),
        )
        return job, files

    def read_ids():
        t = ms.get_table("db", "t")
        plan = plan_scan(ms, settings, t, t.all_columns, [])
        return sorted(
            i
            for s in plan.splits
            for i in pq.read_table(s.url.removeprefix("s3://"), columns=["id"], filesystem=fs)
            .column("id")
            .to_pylist()
        )

    for ids in (range(0, 6), range(6, 9)):
        commit_write(ms, settings, *write(ids))
    assert read_ids() == list(range(9))
    root = f"{s3_bucket}/wh/db.db/t"
    assert fs.ls(f"{root}/region=EU", refresh=True) == [
        f"{root}/region=EU/{delta_dir_name(1)}",
        f"{root}/region=EU/{delta_dir_name(2)}",
    ]
    assert not [p for p in fs.find(root) if "/.raptorx-staging-" in p]  # staging gone

    commit_write(ms, settings, *write([100], overwrite=True))  # only US gets a row
    assert read_ids() == [100]
    assert fs.exists(f"{root}/region=EU/{base_dir_name(3)}/{EMPTY_BASE_FILE}")

    # a commit that dies after moving its files, on S3: invisible, then cleaned
    job, files = write([7])
    wid = ms.allocate_write_id(job.txn_id, "db", "t")
    dead = f"{root}/region=EU/{delta_dir_name(wid)}"
    assert die_after_moving(settings, ms, job, files, wid) == [dead]
    (placed,) = fs.ls(dead, refresh=True)
    assert read_ids() == [100]
    clock.now += 301
    report = clean_table(ms, settings, "db", "t")
    assert report.removed_aborted == [f"s3://{dead}"] and report.left_unrecorded == []
    assert not fs.exists(placed)
    assert read_ids() == [100]
    ms.close()
