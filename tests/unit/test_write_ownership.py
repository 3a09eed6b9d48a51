"""Issue 10, finding 1: a write publishes only into directories it created, and a rollback
removes only what it created. Two metastores over one warehouse directory (e.g. after the
metastore file was re-created) must never read, write into or delete each other's data."""

from __future__ import annotations

import os

import pytest

from raptorx_py.errors import LocationInUseError
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.storage.acid_layout import base_dir_name
from raptorx_py.tables.commit import commit_write
from tests.unit.test_managed_write import batch, read_ids, write, write_settings


@pytest.fixture
def two_metastores(tmp_path):
    """Two metastore files, one warehouse directory."""
    out = []
    for name in ("first", "second"):
        settings = write_settings(tmp_path, name)
        out.append((settings, Metastore(SqliteBackend(f"{tmp_path}/{name}.db"))))
    yield out, tmp_path / "warehouse" / "db.db" / "t"
    for _, ms in out:
        ms.close()


def commit(settings, ms, ids, overwrite):
    job, files = write(settings, ms, [batch(ids)], overwrite=overwrite)
    return commit_write(ms, settings, job, files)


def test_a_new_table_never_adopts_a_directory_holding_another_tables_data(two_metastores):
    ((s1, ms1), (s2, ms2)), table_dir = two_metastores
    commit(s1, ms1, range(4), overwrite=True)
    for overwrite in (False, True):
        with pytest.raises(LocationInUseError, match=r"db\.t at .*db\.db/t.*region=EU"):
            write(s2, ms2, [batch(range(10, 14))], overwrite=overwrite)
    assert "db" not in ms2.list_databases()
    assert read_ids(s1, ms1) == [0, 1, 2, 3]


def test_a_failed_commit_never_deletes_a_directory_it_did_not_create(two_metastores, monkeypatch):
    """Both metastores created their table while the directory was empty (an append of
    nothing creates it); the first overwrote it (base_0000001). The second's overwrite gets
    write id 1 of its own metastore: before, it wrote into the first's base_0000001 and its
    rollback then removed that directory, so the first table read nothing, with no error."""
    ((s1, ms1), (s2, ms2)), table_dir = two_metastores
    for settings, ms in ((s1, ms1), (s2, ms2)):
        job, files = write(settings, ms, [], overwrite=False)
        commit_write(ms, settings, job, files)
    commit(s1, ms1, range(4), overwrite=True)
    committed = sorted(os.listdir(next(table_dir.glob("region=*")) / base_dir_name(1)))

    def dies(*args, **kwargs):
        raise RuntimeError("the metastore went away")

    job, files = write(s2, ms2, [batch(range(10, 14))], overwrite=True)
    monkeypatch.setattr(ms2, "commit_transaction", dies)
    with pytest.raises((LocationInUseError, RuntimeError)) as failure:
        commit_write(ms2, s2, job, files)
    monkeypatch.undo()
    assert isinstance(failure.value, LocationInUseError), failure.value
    assert base_dir_name(1) in str(failure.value)
    assert ms2.get_transaction(job.txn_id).state == "aborted"
    assert read_ids(s1, ms1) == [0, 1, 2, 3]
    assert sorted(os.listdir(next(table_dir.glob("region=*")) / base_dir_name(1))) == committed


def test_a_rollback_removes_only_the_files_it_placed(two_metastores, monkeypatch):
    """A file that appears in the write's own new directory before its commit fails is not
    the write's: the rollback removes its own files and leaves the directory with that one."""
    ((s1, ms1), _), table_dir = two_metastores
    commit(s1, ms1, range(4), overwrite=False)
    job, files = write(s1, ms1, [batch(range(4, 6))], overwrite=False)
    real_commit = ms1.commit_transaction

    def foreign_file_then_die(txn_id):
        delta = table_dir / "region=US" / "delta_0000002_0000002"
        (delta / "foreign.parquet").write_bytes(b"not ours")
        raise RuntimeError("the metastore went away")

    monkeypatch.setattr(ms1, "commit_transaction", foreign_file_then_die)
    with pytest.raises(RuntimeError, match="went away"):
        commit_write(ms1, s1, job, files)
    monkeypatch.setattr(ms1, "commit_transaction", real_commit)
    assert os.listdir(table_dir / "region=US" / "delta_0000002_0000002") == ["foreign.parquet"]
    assert not (table_dir / "region=EU" / "delta_0000002_0000002").exists()
    assert read_ids(s1, ms1) == [0, 1, 2, 3]
