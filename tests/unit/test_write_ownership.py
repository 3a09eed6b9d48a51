"""A write publishes only into directories it created, and a rollback
removes only what it created. Two metastores over one warehouse directory (e.g. after the
metastore file was re-created) must never read, write into or delete each other's data."""

from __future__ import annotations

import os

import pytest

from raptorx_py.errors import LocationInUseError
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.metastore.write_paths import write_paths_of_table
from raptorx_py.storage.acid_layout import base_dir_name
from raptorx_py.tables.cleaner import clean_table
from raptorx_py.tables.commit import commit_write
from raptorx_py.tables.rollback import abort_write
from tests.unit.test_managed_write import (
    batch,
    die_after_moving,
    read_ids,
    write,
    write_settings,
)


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


def test_the_cleaner_removes_only_what_its_own_metastore_placed(two_metastores):
    """The cleaner once removed every directory of an aborted write id's number.
    The first metastore's write ids 1 and 2 are aborted; the second metastore committed its
    own write ids 1 and 2 into the same table directory. The first's cleaner removes the
    files its dead write 2 placed (its records name them) and leaves the second's data,
    reporting the directories of its aborted numbers that no record of its own names."""
    ((s1, ms1), (s2, ms2)), table_dir = two_metastores
    for settings, ms in ((s1, ms1), (s2, ms2)):
        job, files = write(settings, ms, [], overwrite=False)
        commit_write(ms, settings, job, files)  # both create db.t while it is empty
    # The first metastore: write id 1 aborted before it moved anything ...
    job1, _ = write(s1, ms1, [batch(range(100, 102))], overwrite=False)
    assert ms1.allocate_write_id(job1.txn_id, "db", "t") == 1
    abort_write(ms1, s1, job1)
    # ... and write id 2 died after moving its files into region=US (then expired: aborted).
    job2, files2 = write(s1, ms1, [batch([200], region_of=lambda i: "US")], overwrite=False)
    assert ms1.allocate_write_id(job2.txn_id, "db", "t") == 2
    (dead,) = die_after_moving(s1, ms1, job2, files2, 2)
    ms1.abort_transaction(job2.txn_id)
    # The second metastore commits its write ids 1 (both regions) and 2 (region=EU only).
    commit(s2, ms2, range(4), overwrite=False)
    commit(s2, ms2, [11, 13], overwrite=False)
    theirs = sorted(str(p) for p in table_dir.glob("region=*/delta_*") if str(p) != dead)
    assert len(theirs) == 3 and dead.endswith("region=US/delta_0000002_0000002")

    report = clean_table(ms1, s1, "db", "t")

    assert report.removed_aborted == [f"file://{dead}"] and not os.path.exists(dead)
    assert sorted(str(p) for p in table_dir.glob("region=*/delta_*")) == theirs
    assert read_ids(s2, ms2) == [0, 1, 2, 3, 11, 13]  # before: the second read nothing
    assert sorted(report.left_unrecorded) == [f"file://{p}" for p in theirs]
    # The records of the first's finished writes are done with; a second run changes nothing.
    assert write_paths_of_table(ms1, "db", "t") == []
    again = clean_table(ms1, s1, "db", "t")
    assert again.removed_aborted == [] and read_ids(s2, ms2) == [0, 1, 2, 3, 11, 13]


def test_a_recorded_directory_holding_a_foreign_file_is_kept(two_metastores):
    """The cleaner removes the files a dead write placed, and its directory only once empty:
    a file no record names (someone else's) keeps it, reported."""
    ((s1, ms1), _), table_dir = two_metastores
    commit(s1, ms1, range(4), overwrite=False)
    job, files = write(s1, ms1, [batch([200], region_of=lambda i: "US")], overwrite=False)
    wid = ms1.allocate_write_id(job.txn_id, "db", "t")
    (dead,) = die_after_moving(s1, ms1, job, files, wid)
    ms1.abort_transaction(job.txn_id)
    placed = os.listdir(dead)
    with open(os.path.join(dead, "foreign.parquet"), "wb") as f:
        f.write(b"not ours")
    report = clean_table(ms1, s1, "db", "t")
    assert report.removed_aborted == [] and report.left_foreign == [f"file://{dead}"]
    assert os.listdir(dead) == ["foreign.parquet"] and len(placed) == 1
    assert read_ids(s1, ms1) == [0, 1, 2, 3]


def test_the_cleaner_leaves_another_metastores_staging_of_the_same_number(two_metastores, capsys):
    """Staging directories are named after a transaction number, which each metastore hands
    out on its own: the first's cleaner (its transaction 2 committed) left the second's
    running write (its transaction 2) without its staged files. It removes only staging its
    own records name."""
    ((s1, ms1), (s2, ms2)), table_dir = two_metastores
    for settings, ms in ((s1, ms1), (s2, ms2)):
        job, files = write(settings, ms, [], overwrite=False)
        commit_write(ms, settings, job, files)  # transaction 1 in each
    running, staged = write(s2, ms2, [batch(range(20, 24))], overwrite=False)
    assert running.txn_id == 2
    # The first's transaction 2 (into another partition: write ids collide by number too).
    job, files = write(s1, ms1, [batch(range(4), region_of=lambda i: "ASIA")], overwrite=False)
    assert job.txn_id == 2 and commit_write(ms1, s1, job, files).write_id == 1

    report = clean_table(ms1, s1, "db", "t")

    assert report.removed_staging == [] and report.left_unrecorded == [running.staging_url]
    assert os.path.isdir(running.staging_url.removeprefix("file://"))
    # The command says what it left, and why.
    from raptorx_py.cli import main

    assert main(["table", "clean", "db.t", "-p", f"hive.metastore.url={s1.metastore_url}"]) == 0
    out = capsys.readouterr().out
    assert f"left {running.staging_url}: its write id is aborted in this metastore" not in out
    assert f"left {running.staging_url}: no record of this metastore" in out
    assert "0 directories removed" in out
    commit_write(ms2, s2, running, staged)  # its staged files are all there
    assert read_ids(s2, ms2) == [20, 21, 22, 23] and read_ids(s1, ms1) == [0, 1, 2, 3]
