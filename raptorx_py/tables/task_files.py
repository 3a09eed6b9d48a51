"""One write task's output: its rows, grouped by partition, as data files in staging.

``write_task`` runs in the executors, once per task: rows grouped by the partition keys, one
data file (in the table's format: ``tables.data_files``) per partition per task under the
write's staging directory; it returns each
file's URL, size, row count and footer statistics (``WrittenFile``), which the driver's
commit receives. The task heartbeats the transaction, so a long job does not time out; a task
whose transaction has gone (aborted, expired) fails.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raptorx_py.config.settings import Settings
from raptorx_py.errors import SchemaError
from raptorx_py.hive.column_types import arrow_schema_for_spark, arrow_type_for_spark, encode_value
from raptorx_py.hive.model import ColumnStats
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.metrics import counters
from raptorx_py.storage.fs import filesystem_for, join_url, split_url
from raptorx_py.tables.data_files import DataFileWriter, suffix
from raptorx_py.tables.heartbeat import TxnHeartbeat
from raptorx_py.tables.staging import best_effort
from raptorx_py.tables.write_job import WriteJob
from raptorx_py.tables.write_target import WriteTarget


@dataclass(frozen=True)
class WrittenFile:
    """A file a task wrote, as the commit needs it (picklable: tasks send it to the driver)."""

    url: str  # in the staging directory
    values: tuple[str | None, ...]  # partition values, canonical text (None: null)
    size: int
    num_rows: int
    stats: dict[str, ColumnStats] = field(default_factory=dict)


def write_task(
    settings: Settings,
    job: WriteJob,
    batches: Iterable[pa.RecordBatch],
    *,
    heartbeat: TxnHeartbeat | None = None,
) -> tuple[WrittenFile, ...]:
    """Write one task's rows into the staging directory; see the module docstring. On any
    error the files this task wrote are removed before the error propagates."""
    target = job.target
    heartbeat = heartbeat or TxnHeartbeat(settings, job.txn_id)
    heartbeat.beat(force=True)
    fs, staging = filesystem_for(job.staging_url, settings)
    scheme, _ = split_url(job.staging_url)
    schema = arrow_schema_for_spark(target.columns)
    task_token = uuid.uuid4().hex[:16]
    open_files: dict[tuple, DataFileWriter] = {}
    try:
        for batch in batches:
            heartbeat.beat()
            for values, rows in split_by_partition(conform(batch, target), target):
                f = open_files.get(values)
                if f is None:
                    rel = (
                        partition_name(target.partition_keys, values) + "/"
                        if target.partition_keys
                        else ""
                    )
                    name = f"part-{task_token}-{len(open_files):05d}"
                    path = f"{staging}/{rel}{name}{suffix(target.storage_format)}"
                    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
                    f = open_files[values] = DataFileWriter(fs, path, schema, target.storage_format)
                f.write(rows)
        out = []
        for values, f in open_files.items():
            size, stats = f.close(scheme)
            out.append(WrittenFile(join_url(scheme, f.path), values, size, f.rows, stats))
        counters.add("writer.files_written", len(out))
        counters.add("writer.rows_written", sum(f.num_rows for f in out))
        return tuple(out)
    except BaseException:
        for f in open_files.values():
            best_effort(f.handle.close)
            best_effort(partial(fs.rm, f.path))
        raise


def conform(batch: pa.RecordBatch | pa.Table, target: WriteTarget) -> pa.Table:
    """The batch's columns in the table's order, cast to the Arrow types the table's Hive
    types read back as (so written files and reads agree)."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    names = {n.lower(): n for n in table.column_names}
    arrays, fields = [], []
    for c in target.all_columns:
        if c.name.lower() not in names:
            raise SchemaError(
                f"the data written to {target.qualified_name} lacks column "
                f"'{c.name}' (it has {', '.join(table.column_names)})"
            )
        t = arrow_type_for_spark(c.type)
        arrays.append(table.column(names[c.name.lower()]).cast(t))
        fields.append(pa.field(c.name, t, nullable=True))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def split_by_partition(
    table: pa.Table, target: WriteTarget
) -> Iterable[tuple[tuple[str | None, ...], pa.Table]]:
    """``(partition values as canonical text, rows of that partition without the key
    columns)``; one sort, then runs of equal keys."""
    data_names = [c.name for c in target.columns]
    if not target.partition_keys:
        if table.num_rows:
            yield (), table.select(data_names)
        return
    if table.num_rows == 0:
        return
    keys = [k.name for k in target.partition_keys]
    order = pc.sort_indices(table, sort_keys=[(k, "ascending", "at_end") for k in keys])
    table = table.take(order)
    change = np.zeros(table.num_rows - 1, dtype=bool)
    for k in keys:
        col = table.column(k).combine_chunks()
        a, b = col.slice(1), col.slice(0, len(col) - 1)
        diff = pc.fill_null(pc.not_equal(a, b), False)
        diff = pc.or_(diff, pc.xor(pc.is_null(a), pc.is_null(b)))
        change |= diff.to_numpy(zero_copy_only=False)
    starts = [0, *(np.flatnonzero(change) + 1).tolist()]
    ends = starts[1:] + [table.num_rows]
    for s, e in zip(starts, ends):
        part = table.slice(s, e - s)
        values = tuple(
            _partition_text(part.column(k.name)[0].as_py(), k.type) for k in target.partition_keys
        )
        yield values, part.select(data_names)


def _partition_text(value, hive_type: str) -> str | None:
    if value is None:
        return None
    text = encode_value(value, hive_type)
    return text if text != "" else None  # Hive writes an empty value as the null partition
