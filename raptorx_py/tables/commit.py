"""Committing a managed write: make the files of every task visible as one write.

``commit_write`` (driver, once, after every task succeeded), in this order: make sure the
table exists (created MANAGED now, never before the data is there), take the locks (append:
SHARED_WRITE on each written partition, or on the table when unpartitioned; overwrite:
EXCLUSIVE on the table) through ``LockManager``, allocate the table's write id, move the files
into ``delta_<wid>_<wid>/`` (append) or ``base_<wid>/`` (overwrite) of their partition
(``commit_files``), then, in ONE database transaction, add/alter the partitions with
statistics, row counts and ``writeId`` (an unpartitioned table: its parameters;
``partition_records``) and commit the metastore transaction. Any error before the commit
aborts the transaction and removes what the commit itself created (``rollback``).

Visibility: data is moved under an open write id, which no snapshot reads; the commit makes
all of it visible at once. Files are moved *before* the partition metadata changes, so a
listing made under the new metadata (``writeId``) always holds every file of that write id
(what lets the planner cache managed listings by version). A new MANAGED table never adopts
a location that already holds visible files (checked when the write begins and again just
before the table is created: ``write_target.check_location_free``).

Limits: the partitions a commit records and the commit of its transaction are one database
transaction (``Metastore.atomically()``): a commit that dies between them leaves neither, so
no partition is recorded for rows that never became visible. A partition's statistics are
its last write's (an overwrite's replace the old ones in its commit): the planner prunes a
managed partition by statistics only for snapshots that see its ``writeId``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raptorx_py.config.settings import Settings
from raptorx_py.errors import AlreadyExistsError, NoSuchObjectError, SchemaError
from raptorx_py.hive.model import EXTERNAL_TABLE, Table
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.metastore.locks import LockManager, Operation, lock_components
from raptorx_py.metastore.store import Metastore
from raptorx_py.metastore.write_paths import DIRECTORY, FILE, forget_write_paths
from raptorx_py.metrics import counters
from raptorx_py.storage.acid_layout import base_dir_name, delta_dir_name
from raptorx_py.tables.heartbeat import TxnHeartbeat
from raptorx_py.tables.partition_records import (
    WrittenPartitions,
    check_partition_names,
    group_by_partition,
    record_partitions,
    sort_key,
)
from raptorx_py.tables.rollback import RollbackOnError
from raptorx_py.tables.task_files import WrittenFile
from raptorx_py.tables.write_job import AGENT, WriteJob
from raptorx_py.tables.write_target import WriteTarget, check_columns, check_location_free


@dataclass(frozen=True)
class CommitResult:
    write_id: int | None  # None: an append of nothing (no write id was needed)
    files: int
    rows: int
    partitions_added: int
    partitions_altered: int


def commit_write(
    metastore: Metastore,
    settings: Settings,
    job: WriteJob,
    files: Sequence[WrittenFile],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> CommitResult:
    """Make the files of every task visible as one write (see the module docstring)."""
    heartbeat = TxnHeartbeat(settings, job.txn_id, metastore=metastore)
    with RollbackOnError(metastore, settings, job) as commit_files:
        heartbeat.beat(force=True)
        check_written_partition_names(job.target, files)  # before a new table is created
        table = ensure_table(metastore, settings, job.target)
        if not files and not job.overwrite:
            metastore.commit_transaction(job.txn_id)
            return CommitResult(None, 0, 0, 0, 0)
        by_values = group_by_partition(files)
        lock_written_partitions(
            metastore, settings, job, table, by_values, heartbeat.sleeping_alive(sleep)
        )
        write_id = metastore.allocate_write_id(job.txn_id, table.database, table.name)
        partitions = WrittenPartitions.of(metastore, table, by_values)
        acid_dir = base_dir_name(write_id) if job.overwrite else delta_dir_name(write_id)
        commit_files.move_files(partitions, acid_dir, heartbeat)
        if job.overwrite:
            commit_files.write_empty_bases(partitions, acid_dir)
        with metastore.atomically():  # see "Limits" in the module docstring
            added, altered = record_partitions(
                metastore, partitions, write_id, overwrite=job.overwrite
            )
            metastore.commit_transaction(job.txn_id)
            # What it placed is committed data now: no cleaner may need its records.
            forget_write_paths(
                metastore, table.database, table.name, [job.txn_id], (DIRECTORY, FILE)
            )
        counters.add("writer.commits")
        return CommitResult(write_id, len(files), sum(f.num_rows for f in files), added, altered)


def check_written_partition_names(target: WriteTarget, files: Sequence[WrittenFile]) -> None:
    """The written partition values name distinct Hive partitions (checked before anything
    is created: a new table stays uncreated)."""
    if target.partition_keys:
        check_partition_names(
            target.qualified_name, target.partition_keys, {tuple(f.values) for f in files}
        )


def ensure_table(metastore: Metastore, settings: Settings, target: WriteTarget) -> Table:
    """The target table, created now (with its database) when the write began without one;
    a table dropped or replaced since the write began is an error."""
    if target.table_id is not None:
        table = metastore.get_table(target.database, target.name)
        if table.id != target.table_id:
            raise SchemaError(
                f"{target.qualified_name} was dropped or replaced while it was "
                f"being written; write again"
            )
        return table
    try:
        metastore.get_database(target.database)
    except NoSuchObjectError:
        metastore.create_database(target.database, location=target.location.rsplit("/", 1)[0])
    try:
        table = metastore.get_table(target.database, target.name)
    except NoSuchObjectError:
        # Checked again here: files may have arrived since the write began. A table another
        # writer of this metastore created meanwhile is adopted (it is the same table).
        check_location_free(settings, target.qualified_name, target.location)
        try:
            return metastore.create_table(target.as_table())
        except AlreadyExistsError:
            table = metastore.get_table(target.database, target.name)
    check_columns(table, target.all_columns)
    if table.table_type == EXTERNAL_TABLE or table.partition_keys != target.partition_keys:
        raise SchemaError(
            f"{target.qualified_name} was created by someone else while it "
            f"was being written, differently; write again"
        )
    return table


def lock_written_partitions(
    metastore: Metastore, settings: Settings, job: WriteJob, table: Table, by_values: dict, sleep
) -> None:
    """Take the write's locks (see the module docstring), in one order, waiting with
    ``sleep`` between attempts."""
    if job.overwrite:
        components = lock_components(Operation.INSERT_OVERWRITE, table.database, table.name)
    else:
        names = (
            [partition_name(table.partition_keys, v) for v in sorted(by_values, key=sort_key)]
            if table.is_partitioned
            else []
        )
        components = lock_components(
            Operation.INSERT, table.database, table.name, names, managed=True
        )
    LockManager(metastore, settings, sleep=sleep).acquire(
        components, txn_id=job.txn_id, agent_info=f"{AGENT} {table.qualified_name}"
    )
