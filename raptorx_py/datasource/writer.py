"""The Spark write path of ``tiered_hive``: pyspark's ``DataSourceArrowWriter`` over
the managed write of ``raptorx_py.tables`` (``tables/write_job.py``).

``df.write.format("tiered_hive").mode("append" | "overwrite").save("db.table")``, with the
partition keys of a table the write creates given as ``.option("partition_by", "k1,k2")``
or, with the native jar, ``.partitionBy("k1", "k2")`` (the JVM provider turns it into that
option; without the jar pyspark 4.3's Python source rejects ``partitionBy``). An existing
table keeps its keys; asking for others is an error.

Where it runs (pyspark 4.3): ``TieredHiveDataSource.writer`` and ``__init__`` here in a
Python worker of the driver, once per job (the transaction opens there); ``write`` in the
executors, once per task; ``commit`` or ``abort`` in a Python worker of the driver, once. The
writer object is pickled between them, so it carries only plain values.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_type

from raptorx_py import metrics
from raptorx_py.config.settings import Settings
from raptorx_py.errors import SchemaError, WriteError
from raptorx_py.hive.column_types import arrow_to_hive
from raptorx_py.hive.model import Column
from raptorx_py.metastore import open_metastore
from raptorx_py.tables.commit import commit_write
from raptorx_py.tables.rollback import abort_write
from raptorx_py.tables.task_files import write_task
from raptorx_py.tables.write_job import begin_write
from raptorx_py.tables.write_target import parse_partition_by


@dataclass(frozen=True)
class TaskFiles(WriterCommitMessage):
    """What one task wrote (``tables.task_files.WrittenFile`` each)."""

    files: tuple


def spark_columns(schema) -> list[Column]:
    """``(name, Hive type)`` of each field of a Spark schema."""
    out = []
    for f in schema.fields:
        try:
            arrow = to_arrow_type(f.dataType, timezone="UTC")
        except Exception as e:  # noqa: BLE001 - pyspark's own error names no column
            raise SchemaError(
                f"column '{f.name}' has Spark type {f.dataType.simpleString()}, "
                f"which tiered_hive cannot write"
            ) from e
        out.append(Column(f.name, arrow_to_hive(arrow, f.name)))
    return out


class TieredHiveWriter(DataSourceArrowWriter):
    """One write job: begun (transaction opened) when made, committed or aborted once.

    Contract: nothing of the job is visible before ``commit`` returns, all of it after; a
    failed or killed job leaves no visible row (its transaction aborts, or expires after
    ``hive.txn.timeout``, and ``raptorx table clean`` removes its files).
    """

    def __init__(
        self,
        settings: Settings,
        database: str,
        table_name: str,
        schema,
        overwrite: bool,
        partition_by: str | None = None,
    ):
        self.settings = settings
        # A write may create the first table.
        with open_metastore(settings.metastore_connection, create=True) as ms:
            self.job = begin_write(
                ms,
                settings,
                database,
                table_name,
                spark_columns(schema),
                overwrite,
                parse_partition_by(partition_by),
            )

    def write(self, iterator) -> TaskFiles:
        try:
            return TaskFiles(write_task(self.settings, self.job, iterator))
        finally:
            metrics.flush(self.settings.metrics_directory, self.settings.metrics_spark_directory)

    def commit(self, messages) -> None:
        missing = sum(1 for m in messages if m is None)
        files = [f for m in messages if m is not None for f in m.files]
        try:
            with open_metastore(self.settings.metastore_connection) as ms:
                if missing:  # pyspark: a failed task's message is None; never commit half
                    abort_write(ms, self.settings, self.job)
                    raise WriteError(
                        f"{missing} task(s) of the write to "
                        f"{self.job.target.qualified_name} returned nothing; "
                        f"the write was aborted"
                    )
                commit_write(ms, self.settings, self.job, files)
        finally:
            metrics.flush(self.settings.metrics_directory, self.settings.metrics_spark_directory)

    def abort(self, messages) -> None:
        try:
            with open_metastore(self.settings.metastore_connection) as ms:
                abort_write(ms, self.settings, self.job)
        finally:
            metrics.flush(self.settings.metrics_directory, self.settings.metrics_spark_directory)
