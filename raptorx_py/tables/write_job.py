"""A write to a managed table as a Hive insert-only ACID transaction (no Spark here).

A write has three steps, run where Spark runs them (``datasource/writer.py`` is the adapter):

1. ``begin_write`` (here; driver, once): resolve the target table (an existing MANAGED table,
   or the one the write will create: ``write_target``), check the schema, open a metastore
   transaction and name the write's staging directory after it (``staging``).
2. ``task_files.write_task`` (executors, once per task): one Parquet file per partition per
   task under the staging directory, each with its size, row count and footer statistics.
   Tasks heartbeat the transaction (``heartbeat``), so a long job does not time out.
3. ``commit.commit_write`` (driver, once, after every task succeeded): create the table if
   new, lock, allocate the table's write id, move the files into ACID directories the write
   creates (``commit_files``), record partitions and statistics and commit the transaction
   in one database transaction (``partition_records``). Any error before the commit aborts
   the transaction and removes what the commit itself created; ``rollback.abort_write`` (a
   failed job) aborts it and removes the staging directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raptorx_py.config.settings import Settings
from raptorx_py.hive.model import Column
from raptorx_py.metastore.store import Metastore
from raptorx_py.metastore.write_paths import STAGING, record_write_paths
from raptorx_py.names import check_name
from raptorx_py.storage.fs import join_url, split_url
from raptorx_py.tables.staging import staging_dir_name
from raptorx_py.tables.write_target import WriteTarget, resolve_target

#: How a writer's transactions and locks name their holder (with the table).
AGENT = "raptorx_py writer"


@dataclass(frozen=True)
class WriteJob:
    """One running write: its target, transaction and staging directory (picklable)."""

    target: WriteTarget
    txn_id: int
    staging_url: str
    overwrite: bool


def begin_write(
    metastore: Metastore,
    settings: Settings,
    database: str,
    name: str,
    columns: Sequence[Column],
    overwrite: bool,
    partition_by: Sequence[str] | None = None,
) -> WriteJob:
    """Resolve the target and open the write's transaction (see the module docstring)."""
    database, name = check_name("database", database), check_name("table", name)
    target = resolve_target(metastore, settings, database, name, columns, partition_by)
    txn_id = metastore.open_transaction(agent_info=f"{AGENT} {target.qualified_name}")
    staging = f"{target.location}/{staging_dir_name(txn_id)}"
    # Recorded before any task writes there: the cleaner removes only staging it recorded.
    record_write_paths(metastore, txn_id, database, name, STAGING, [join_url(*split_url(staging))])
    return WriteJob(target, txn_id, staging, overwrite)
