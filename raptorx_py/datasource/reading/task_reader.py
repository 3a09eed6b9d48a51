"""A task's reading on an executor: the Python reader's ``read``, which computes the splits of
its task that the JVM did not serve, from the fragment result cache or from the files, and
hands Spark their batches.

The reader object is made and pickled by the planning side (``datasource.reader``, which
subclasses ``TaskReader``); ``read`` uses only what a split's read spec
(``planning.read_spec.ReadSpec``) and the reader's own fields carry: the settings, the pushed
aggregation and its output schema, the output names and the fields read as nulls.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from raptorx_py import metrics
from raptorx_py.cache.fragment_cache import fragment_cache_for
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.reading import aggregation
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.error_report import short_worker_errors
from raptorx_py.errors import UnsupportedFormatError
from raptorx_py.hive.storage_formats import PARQUET
from raptorx_py.jvm_contract import jvm_read_handoff
from raptorx_py.jvm_contract.fragment_handoff import served_by_jvm
from raptorx_py.jvm_contract.placement import FALLBACK, PREFERRED, PREFERRED_HOST
from raptorx_py.jvm_contract.pushed_aggregation import PushedAggregation
from raptorx_py.jvm_contract.scan_report import task_counts_path, write_task_counts
from raptorx_py.metrics import counters


class TaskReader(DataSourceReader):
    """The executor's half of the scan's reader: ``read`` (see the module docstring)."""

    settings: Settings
    aggregation: PushedAggregation | None
    output_schema: pa.Schema
    output_names: list[str] | None
    #: Fields of a user-given schema the table lacks: (position, name, Arrow type), read as
    #: nulls (``_with_missing``); a filter on one is left to Spark.
    missing: tuple[tuple[int, str, pa.DataType], ...] = ()

    @short_worker_errors
    def read(self, partition):
        task = partition.value
        if task is None:  # pyspark's placeholder when planning found no split
            if self.aggregation is not None:
                empty = aggregation.empty_result(self.aggregation, self.output_schema)
                if empty is not None:
                    yield empty
            return
        # This task's counts, handed back to the provider for Spark's SQL metrics.
        counts_path = task_counts_path()
        task_counts = counters.open_scope()
        counters.add("reader.python_tasks")
        if not _worker_started:  # this worker's first task: it was started for the query
            _worker_started.append(True)
            counters.add("reader.python_worker_starts")
        try:
            fill = count_placement_and_may_use_caches(partition)
            # A task running away from its preferred host neither reads nor fills this
            # executor's fragment cache: the entries are the preferred host's.
            fragments = fragment_cache_for(self.settings.fragment_cache) if fill else None
            served = tuple(
                a or b
                for a, b in zip(
                    served_by_jvm(partition, len(task)),
                    jvm_read_handoff.served_by_jvm(partition, len(task)),
                )
            )
            for spec, by_jvm in zip(task, served):
                if by_jvm:  # the JVM served it from this executor's cache (FragmentHits)
                    continue
                counters.add("reader.splits_read")
                counters.add("reader.python_splits")
                for batch in self._split_result(spec, fill, fragments):
                    counters.add("reader.rows_to_spark", batch.num_rows)
                    if self.output_names is not None:
                        batch = batch.rename_columns(self.output_names)
                    if self.missing:
                        batch = self._with_missing(batch)
                    yield batch
        finally:
            counted = counters.close_scope(task_counts)
            if counts_path is not None:
                write_task_counts(counts_path, counted)
            metrics.flush(self.settings.metrics_directory, self.settings.metrics_spark_directory)

    def _with_missing(self, batch):
        """``batch`` with the fields the table lacks inserted as nulls, in the schema's order."""
        arrays, names = list(batch.columns), list(batch.schema.names)
        for position, name, type_ in self.missing:
            arrays.insert(position, pa.nulls(batch.num_rows, type_))
            names.insert(position, name)
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def _split_result(self, spec, fill: bool, fragments):
        """The batches a split hands to Spark, computed from its read spec (made at
        planning): from the fragment result cache when it holds the spec's key, else
        computed (read, filtered, aggregated when an aggregation is pushed) and, once
        complete and unless this task runs away from its preferred host (``fill``),
        stored."""
        key = spec.key if fragments is not None else None
        if key is not None:
            cached = fragments.get(key)
            if cached is not None and _same_schema(cached, spec.output_schema):
                yield from cached
                return
        stored = spec.split.file_format(spec.table)
        if stored != PARQUET:
            raise UnsupportedFormatError(
                f"{spec.table.qualified_name} is stored as {stored} (the partition of "
                f"{spec.split.url}): the split reached the Python reader, which reads Parquet "
                f"only (Spark's reader in the JVM reads these files)"
            )
        counters.add("reader.fragments_computed")
        batches = read_split(
            spec.split, spec.table, spec.columns, spec.predicates, self.settings, fill_caches=fill
        )
        if spec.aggregation is not None:
            out = aggregation.aggregate_batches(spec.aggregation, batches, spec.output_schema)
            batches = iter([out] if out is not None else [])
        if key is None or not fill:
            yield from batches
            return
        kept: list = []
        size, keeping = 0, True
        for batch in batches:
            if keeping:
                size += batch.nbytes
                # Past the largest entry: keep nothing more (the result will not be stored).
                keeping = size <= fragments.max_entry_bytes
                if keeping:
                    kept.append(batch)
                else:
                    kept.clear()
            yield batch
        if keeping:
            fragments.put(key, spec.output_schema, kept)
        else:
            counters.add("fragment_cache.too_large")


def _same_schema(batches, schema) -> bool:
    """Whether a fragment entry's batches are of exactly the schema the split hands Spark
    (pyspark refuses any other): an entry the JVM stored carries Spark's own Arrow schema,
    which is the same unless a type maps differently; one that is not is a miss
    (``fragment_cache.schema_mismatch``), computed and stored again."""
    if all(b.schema.equals(schema) for b in batches):
        return True
    counters.add("fragment_cache.schema_mismatch")
    return False


#: Non-empty once this process ran a read task (``reader.python_worker_starts``).
_worker_started: list[bool] = []


def count_placement_and_may_use_caches(partition) -> bool:
    """Count where a placed task ran (``affinity.preferred``, ``affinity.preferred_host`` or
    ``affinity.fallback``, and each per preferred location) and say whether its reads may use
    and fill this executor's caches: yes on the preferred executor and on another executor
    of its host (caches live per node: the host's are the file's), not on another host,
    whose caches are not the file's."""
    ran = getattr(partition, "ran", None)
    if ran == PREFERRED:
        counters.add("affinity.preferred")
        counters.add(f"affinity.preferred.{partition.location}")
    elif ran == PREFERRED_HOST:
        counters.add("affinity.preferred_host")
        counters.add(f"affinity.preferred_host.{partition.location}")
    elif ran == FALLBACK:
        counters.add("affinity.fallback")
        counters.add(f"affinity.fallback.{partition.location}")
        return False
    elif ran is not None:
        counters.add("affinity.unknown")
    return True
