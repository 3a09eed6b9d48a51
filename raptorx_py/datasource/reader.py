"""The scan's pyspark ``DataSourceReader``: the planning side's half (``__init__``,
``pushFilters``, ``partitions``: in the driver's planner or a planning Python worker) over
the reading side's (``reading.task_reader.TaskReader.read``: in the executors' Python
workers). The reader is pickled between them, with the settings, the pushed aggregation and
the names ``read`` needs.
"""

from __future__ import annotations

from typing import cast

from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
from pyspark.sql.types import StructType

from raptorx_py import metrics
from raptorx_py import predicates as preds
from raptorx_py.cache.block_cache import adopt_jvm_blocks
from raptorx_py.cache.fragment_cache import adopt_jvm_fragments
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planning import query_snapshots
from raptorx_py.datasource.planning.column_names import filter_with_table_names, output_names
from raptorx_py.datasource.planning.first_scan import first_scan_state, table_key
from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.datasource.planning.planning_thread import count_planning_call, planning_in_driver
from raptorx_py.datasource.planning.query_snapshots import query_token
from raptorx_py.datasource.planning.read_spec import read_specs
from raptorx_py.datasource.planning.scan_planning import (
    close_planning_scope,
    fragment_planned_before,
    handoff_key,
    open_planning_scope,
    tiers_on,
)
from raptorx_py.datasource.planning.table_schema import (
    columns_for_schema,
    filter_column,
    record_scan,
    table_column,
)
from raptorx_py.datasource.reading.task_reader import TaskReader
from raptorx_py.error_report import short_worker_errors
from raptorx_py.errors import SchemaError, UnsupportedFormatError
from raptorx_py.hive.column_types import arrow_schema_for_spark, is_nested
from raptorx_py.hive.model import Table
from raptorx_py.hive.storage_formats import PARQUET
from raptorx_py.jvm_contract import jvm_read_handoff, pushed_aggregation
from raptorx_py.jvm_contract.fragment_handoff import handoff_mark, mark_partition
from raptorx_py.jvm_contract.placement import PlacedPartition
from raptorx_py.jvm_contract.scan_report import mark_plan, plan_mark, snapshot_text
from raptorx_py.metastore.cached_store import with_cached_metastore
from raptorx_py.metastore.catalog import QuerySnapshot
from raptorx_py.metrics import counters


class TieredHiveReader(TaskReader):
    """One scan of one query. Per scan pyspark 4.3 calls, in ONE planning worker call on the
    driver: ``reader(schema)`` (this ``__init__``), ``pushFilters``, then pickles the reader
    for the executors' ``read``, then ``partitions()``. So the query's snapshot is taken here,
    once per scan (``cache.snapshot``: the one uncached metastore round trip), and everything
    the scan reads from the metastore is read under it: the table now, the partitions in
    ``partitions()``. Behind the native provider the schema carries the query's token, and
    a later scan of the same table in the same query reads under the snapshot the first one
    recorded instead (``query_snapshots.py``: one snapshot per query). It is pickled with
    the reader, so ``read`` could use it too."""

    @short_worker_errors
    def __init__(
        self,
        settings: Settings,
        database: str,
        table_name: str,
        schema: StructType,
        pushdown: bool = True,
        executors=(),
        case_sensitive: bool = False,
    ):
        self.settings = settings
        self.pushdown = pushdown
        self.executors = tuple(executors)
        # What this scan's planning counts, from its snapshot to its partitions, for the
        # provider's driver metrics (scan_report.py); not pickled (__getstate__).
        self._planning = open_planning_scope()

        token = query_token(schema)
        #: The query's token when the driver's planner plans every scan of the query: the
        #: values its first scan of a table read are kept for the others (query_values).
        self.query_token = token if planning_in_driver() else None
        key = table_key(database, table_name)
        kept, reused = (
            query_snapshots.query_values.lookup(self.query_token, key)
            if self.query_token is not None
            else (None, False)
        )
        self.snapshot: QuerySnapshot
        self.table: Table
        if kept is not None:
            # A later scan of the table in this query: its snapshot and the table read under
            # it (one state of the table per query), no round trip. Or the first scan, whose
            # snapshot and table were read ahead (scan_prefetch.py).
            if reused:
                counters.add("source.query_table_reused")
            self.snapshot, self.table = cast("tuple[QuerySnapshot, Table]", kept)
        else:
            self.snapshot, self.table = first_scan_state(settings, database, table_name, token)
            if self.query_token is not None:
                query_snapshots.query_values.put(self.query_token, key, (self.snapshot, self.table))
        # A pushed partial aggregation comes in the schema (jvm_contract/pushed_aggregation.py): the
        # scan then reads the aggregation's input columns and returns its partial rows.
        self.aggregation = pushed_aggregation.from_schema(schema) if pushdown else None
        # A user-given schema may spell a column otherwise than the table (column_names.py):
        # the reader works in the table's names and renames its batches for Spark.
        self.output_names: list[str] | None = None
        self.filter_names: dict[str, str] = {}
        self.missing = ()
        if self.aggregation is None:
            found = columns_for_schema(self.table, schema, case_sensitive)
            present = [(f, c) for f, c in zip(schema.fields, found) if c is not None]
            self.columns = tuple(c for _, c in present)
            self.missing = tuple(
                (i, f.name, to_arrow_type(f.dataType))
                for i, (f, c) in enumerate(zip(schema.fields, found))
                if c is None
            )
            self.row_schema = arrow_schema_for_spark(self.columns)
            self.output_names = output_names(self.columns, [f.name for f, _ in present])
            self.filter_names = {f.name: c.name for f, c in present if f.name != c.name}
        else:
            wanted = self.aggregation.input_columns()
            for name in wanted:
                table_column(self.table, name)
            self.columns = tuple(c for c in self.table.all_columns if c.name in wanted)
            nested = [c.name for c in self.columns if is_nested(c.type)]
            if nested:
                # The provider never pushes one (PartialAggregation.scala): Spark aggregates
                # a nested column above the scan.
                raise SchemaError(
                    f"the JVM provider pushed an aggregation of {self.table.qualified_name} "
                    f"over nested columns ({', '.join(nested)}), which is not computed here"
                )
            self.output_schema = to_arrow_schema(schema, timezone="UTC")
        self.predicates: list = []
        if self.aggregation is not None:
            self._take_aggregation_filters(self.aggregation)

    def __getstate__(self):
        # The reader is pickled for the executors between pushFilters and partitions():
        # the planning's counts stay here.
        state = dict(self.__dict__)
        state.pop("_planning", None)
        return state

    @short_worker_errors
    def pushFilters(self, filters):
        if not self.pushdown:
            yield from filters
            return
        types = {c.name: c.type for c in self.table.all_columns}
        keys = {k.name for k in self.table.partition_keys}
        missing = {name for _, name, _ in self.missing}
        for f in filters:
            if filter_column(f) in missing:  # a column read as nulls: Spark evaluates it
                yield f
                continue
            p = preds.from_spark_filter(filter_with_table_names(f, self.filter_names), types)
            if p is None or not preds.is_exact(p, types, keys):
                yield f
            else:
                self.predicates.append(p)

    def _take_aggregation_filters(self, pushed: pushed_aggregation.PushedAggregation) -> None:
        """The filters of an aggregated scan (they come with the aggregation, not through
        ``pushFilters``). The provider sent only filters it reported to Spark as evaluated
        here, so each must be exact by this side's rule too."""
        types = {c.name: c.type for c in self.table.all_columns}
        keys = {k.name for k in self.table.partition_keys}
        for p in pushed.filters:
            if not all(c in types for c in preds.columns_of(p)) or not preds.is_exact(
                p, types, keys
            ):
                raise SchemaError(
                    f"the JVM provider pushed {p} with an aggregation of "
                    f"{self.table.qualified_name}, but it is not exact here"
                )
            self.predicates.append(p)

    @short_worker_errors
    def partitions(self):
        try:
            # The table and the snapshot are those of __init__ (one snapshot per scan): the
            # partitions are read under the same snapshot, from the cache when it is fresh.
            plan = with_cached_metastore(
                self.settings.metastore_cache,
                lambda cache: plan_scan(
                    cache,
                    self.settings,
                    self.table,
                    self.columns,
                    self.predicates,
                    snapshot=self.snapshot,
                    executors=self.executors,
                    query=getattr(self, "query_token", None),
                ),
            )
            record_scan(self.table, self.columns)
            counters.add("planning.scans")
            count_planning_call()
            # Each split's read spec, and so its fragment key, is made here on the driver:
            # the reader computes from it and the JVM finds the split's entry by its key.
            specs = read_specs(
                self.table,
                plan.tasks,
                self.columns,
                plan.data_predicates,
                self.aggregation,
                self._result_schema(),
            )
            partitions: list[InputPartition]
            if plan.locations:
                partitions = [PlacedPartition(t, loc) for t, loc in zip(specs, plan.locations)]
            else:
                partitions = [InputPartition(t) for t in specs]
            why_python = self._why_python()
            spark_reads = why_python is None
            formats = {s.file_format(self.table) for t in plan.tasks for s in t}
            if formats - {PARQUET} and why_python is not None:
                stored = " and ".join(sorted(formats - {PARQUET}))
                raise UnsupportedFormatError(
                    f"{self.table.qualified_name} is stored as {stored}"
                    f"{'' if formats == {self.table.storage_format} else ' in some partitions'}, "
                    f"whose files Spark's reader in the JVM reads; this read needs the Python "
                    f"reader, which reads Parquet only, because {why_python}"
                )
            # The JVM serves a fragment as it is cached, without the columns read as nulls.
            if self.settings.fragment_cache_enabled and not self.missing:
                for partition, task in zip(partitions, specs):
                    mark_partition(
                        partition,
                        handoff_mark(
                            self.settings.fragment_cache_base_directory,
                            self.settings.metrics_directory,
                            [
                                handoff_key(spec, spark_reads, self.aggregation is not None)
                                for spec in task
                            ],
                        ),
                    )
            if spark_reads:
                self._mark_jvm_reads(partitions, specs, formats)
            if self.pushdown:  # behind the native provider, which reads the plan's mark
                if not partitions:  # pyspark's own placeholder would carry no mark
                    partitions = [InputPartition(None)]
                    if spark_reads:  # the JVM answers it (no rows, or an empty aggregate)
                        self._mark_jvm_reads(partitions, [[]], formats)
                mark_plan(partitions[0], self._plan_mark())
            return partitions
        finally:
            close_planning_scope(getattr(self, "_planning", None))
            metrics.flush(self.settings.metrics_directory, self.settings.metrics_spark_directory)

    def _why_python(self) -> str | None:
        """Why the Python reader must read this scan's splits, or None: Spark's own reader in
        the JVM may (``hive.parquet.reader``), behind the native provider, every column
        present in the table, read under the table's names. A pushed partial aggregation is
        then computed in the JVM too, over Spark's reader's batches
        (``SplitAggregation.scala``)."""
        if not self.pushdown:
            return (
                "the raptorx jar is not on Spark's classpath (`raptorx jar path`; "
                "docs/howto/install.md)"
            )
        if self.settings.parquet_reader == "PYTHON":
            return "hive.parquet.reader=PYTHON (set it to AUTO, the default)"
        if self.missing:
            names = ", ".join(name for _, name, _ in self.missing)
            return f"the read's schema names columns the table does not have ({names})"
        if self.output_names is not None or self.filter_names:
            return "the read's schema spells the table's columns otherwise (use the table's names)"
        return None

    def _mark_jvm_reads(self, partitions, specs, formats: set[str]) -> None:
        """Attach to each task the splits the JVM reads (``jvm_read_handoff``). With the
        fragment result cache on, a split whose fragment key was planned before (admission
        on second use: a one-off query fills no disk; on first use with
        ``fragment-result-cache.store-on-first-use``) is marked for the JVM to store its
        rows as the split's fragment entry while Spark's reader reads it: a repeat then ends
        as a fragment hit, and no run pays the Python reader to fill."""
        fill = self.settings.fragment_cache_enabled
        # A split's partial aggregation is a few rows, and computing it read the whole split:
        # stored on first use, as the Python reader always has.
        first_use = self.settings.fragment_cache_store_on_first_use or self.aggregation is not None
        marked = False
        for partition, task in zip(partitions, specs):
            store = [
                fill
                and handoff_key(spec, True, self.aggregation is not None) is not None
                and (first_use or fragment_planned_before(spec.key))
                for spec in task
            ]
            try:
                # Every task's plan names every format of the scan (``formats``, its splits'
                # formats): the JVM prepares its readers from the first task's.
                mark = jvm_read_handoff.handoff_mark(
                    self.settings, self.table, task, store, sorted(formats)
                )
            except (TypeError, ValueError):  # a partition value the JVM cannot be handed
                counters.add("planning.jvm_read_refused")
                continue
            jvm_read_handoff.mark_partition(partition, mark)
            counters.add("planning.jvm_read_splits", len(task))
            counters.add("planning.jvm_store_splits", sum(store))
            if fill:
                counters.add(
                    "planning.unfiltered_splits", sum(1 for spec in task if not spec.predicates)
                )
            marked = True
        if marked:
            # What the JVM's readers stored on this node since: into the tiers' indexes.
            adopt_jvm_blocks(self.settings.block_cache)
            adopt_jvm_fragments(self.settings.fragment_cache)

    def _plan_mark(self) -> str:
        """The plan summary the provider shows in the scan's driver metrics and EXPLAIN."""
        planning = getattr(self, "_planning", None)
        counts = dict(planning) if planning is not None else {}
        name = self.table.qualified_name
        return plan_mark(
            name,
            [k.name for k in self.table.partition_keys],
            snapshot_text(self.snapshot, self.table),
            tiers_on(self.settings, name),
            counts,
        )

    def _result_schema(self):
        """The Arrow schema of what a split hands to Spark: its rows, or its partial
        aggregation."""
        return self.output_schema if self.aggregation is not None else self.row_schema
