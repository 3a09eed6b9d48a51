"""Undoing a managed write that did not commit.

A failed commit (``RollbackOnError``) aborts the transaction and removes exactly what the
commit placed (``commit_files``: the files it moved or wrote, then the directories it
created, each only if empty), unless the transaction committed after all: an error after
the commit reached the database must not delete visible data. A failed job (``abort_write``)
aborts the transaction. Either way the write's staging directory goes; the cleaner removes
whatever a dead process left.
"""

from __future__ import annotations

import logging

from raptorx_py.config.settings import Settings
from raptorx_py.metastore.store import Metastore
from raptorx_py.metrics import counters
from raptorx_py.tables.commit_files import CommitFiles, WriteRecords
from raptorx_py.tables.staging import remove_staging
from raptorx_py.tables.write_job import WriteJob

log = logging.getLogger(__name__)


class RollbackOnError:
    """``with RollbackOnError(metastore, settings, job) as commit_files:`` around a commit: the
    block places files through ``commit_files``; when it raises, the transaction is aborted and
    what ``commit_files`` recorded removed (see the module docstring). The staging directory is
    removed when the block ends, whichever way. Never swallows the error."""

    def __init__(self, metastore: Metastore, settings: Settings, job: WriteJob):
        self.metastore, self.settings, self.job = metastore, settings, job
        target = job.target
        self.commit_files = CommitFiles(
            settings,
            target.location,
            WriteRecords(metastore, job.txn_id, target.database, target.name),
        )

    def __enter__(self) -> CommitFiles:
        return self.commit_files

    def __exit__(self, exc_type, exc, traceback) -> None:
        try:
            if exc_type is not None:
                counters.add("writer.aborts")
                roll_back(self.metastore, self.job, self.commit_files)
        finally:
            remove_staging(self.settings, self.job.staging_url)


def roll_back(metastore: Metastore, job: WriteJob, commit_files: CommitFiles) -> None:
    """Abort the transaction and remove what the commit placed, unless it committed after
    all (an error after the commit reached the database must not delete visible data)."""
    try:
        if metastore.get_transaction(job.txn_id).state == "committed":
            return
        metastore.abort_transaction(job.txn_id)  # a no-op when it already expired
    except Exception:  # noqa: BLE001 - the original error matters more; the cleaner follows
        log.warning("could not abort transaction %s", job.txn_id, exc_info=True)
        return
    commit_files.remove()


def abort_write(metastore: Metastore, settings: Settings, job: WriteJob) -> None:
    """A failed job: abort its transaction (unless it committed) and remove its staging."""
    try:
        if metastore.get_transaction(job.txn_id).state == "open":
            counters.add("writer.aborts")
            metastore.abort_transaction(job.txn_id)
    finally:
        remove_staging(settings, job.staging_url)
