"""The ``tiered_hive`` pyspark data source: ``spark.read.format("tiered_hive").load("db.t")``.

Where things run (pyspark 4.3): ``DataSource.__init__``/``schema`` and the reader's
``pushFilters``/``partitions`` run in Python workers of the driver; ``read`` runs in Python
workers of the executors. Neither sees the driver's Python objects, so the configuration
travels with the class: ``configured_source_class(settings)`` makes a subclass that carries
the resolved property strings, which cloudpickle ships by value when it is registered.

Read options: ``path`` (the table, ``db.table``), ``columns`` (comma-separated subset), and
any property name, which overrides that property for this read only. Any other option is
an error naming it. Column names (``columns``, a user-given schema, pushed filters) are
resolved as Spark resolves them, by the session's ``spark.sql.caseSensitive``
(``column_names.py``).
"""

from __future__ import annotations

import collections
import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import cast

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
from pyspark.sql.types import StructField, StructType

from raptorx_py import jvm_protocol, metrics
from raptorx_py import predicates as preds
from raptorx_py.cache.block_cache import adopt_jvm_blocks
from raptorx_py.cache.fragment_cache import adopt_jvm_fragments, fragment_cache_for
from raptorx_py.config import (
    PROPERTIES_BY_NAME,
    PROPERTIES_SOURCE,
    build_settings,
    load_settings,
)
from raptorx_py.config.settings import Settings
from raptorx_py.datasource import aggregation, catalog_requests, jvm_read_handoff, query_snapshots
from raptorx_py.datasource.column_names import (
    CASE_SENSITIVE_OPTION,
    filter_with_table_names,
    output_names,
    parse_case_sensitive,
    requested_names,
    resolve_columns,
    resolve_schema_columns,
)
from raptorx_py.datasource.driver_planner import count_planning_call, planning_in_driver
from raptorx_py.datasource.fragment_handoff import handoff_mark, mark_partition, served_by_jvm
from raptorx_py.datasource.placement import (
    FALLBACK,
    PREFERRED,
    PREFERRED_HOST,
    PlacedPartition,
)
from raptorx_py.datasource.planner import plan_scan
from raptorx_py.datasource.query_snapshots import query_token, snapshot_for_query
from raptorx_py.datasource.read_spec import ReadSpec, read_specs
from raptorx_py.datasource.scan import read_split
from raptorx_py.datasource.scan_report import (
    mark_plan,
    plan_mark,
    snapshot_text,
    task_counts_path,
    tiers_on,
    write_task_counts,
)
from raptorx_py.datasource.writer import TieredHiveWriter
from raptorx_py.error_report import short_worker_errors
from raptorx_py.errors import ConfigError, SchemaError, did_you_mean, raise_config_errors
from raptorx_py.hive.column_types import arrow_schema_for_spark, spark_struct, spark_type
from raptorx_py.hive.model import Column, Partition, Table
from raptorx_py.hive.table_parameters import NUM_ROWS_PARAM, TOTAL_SIZE_PARAM
from raptorx_py.jvm_protocol import (
    CATALOG_OPTIONS_OPTION,
    CATALOG_REQUEST_OPTION,
    PARTITION_BY_OPTION,
)
from raptorx_py.metastore.cached_store import with_cached_metastore
from raptorx_py.metastore.catalog import QuerySnapshot
from raptorx_py.metrics import counters
from raptorx_py.names import parse_table_name
from raptorx_py.native import PUBLIC_NAME
from raptorx_py.scheduling.affinity import EXECUTORS_OPTION, parse_executors

log = logging.getLogger(__name__)

DATA_SOURCE_NAME = PUBLIC_NAME
# partition_by: for writes (datasource/writer.py).
# raptorx.executors: the live executors, from the JVM provider (scheduling.affinity).
# raptorx.case_sensitive: the session's spark.sql.caseSensitive (datasource/column_names.py).
# raptorx.catalog_request: a request of the Spark catalog (datasource/catalog_requests.py).
READ_OPTIONS = (
    "path",
    "table",
    "columns",
    PARTITION_BY_OPTION,
    EXECUTORS_OPTION,
    CASE_SENSITIVE_OPTION,
    CATALOG_REQUEST_OPTION,
    CATALOG_OPTIONS_OPTION,
)


#: What errors name as the source of a read option.
OPTION_SOURCE = "option"


def option_sources(options: dict[str, str]) -> dict[str, str]:
    """Where each option that is not the read's own came from: the Spark catalog's conf
    (``spark.sql.catalog.<name>.<property>``, listed by the catalog in
    ``CATALOG_OPTIONS_OPTION``), by lower-case name."""
    marked = options.get(CATALOG_OPTIONS_OPTION)
    if not marked or ":" not in marked:
        return {}
    catalog, keys = marked.split(":", 1)
    source = f"Spark conf spark.sql.catalog.{catalog}"
    return {k.strip().lower(): source for k in keys.split(",") if k.strip()}


def resolve_options(properties: dict[str, str] | None, options) -> tuple[Settings, dict]:
    """Settings for one read (carried properties + per-read property options) and the
    remaining read options. Unknown option names and bad property values fail, each named
    with where it came from (a read option, ``register``'s properties, a catalog's Spark
    conf), all of them in one error."""
    overrides, read_options = {}, {}
    options = {key.lower(): value for key, value in dict(options).items()}
    sources = option_sources(options)
    unknown: list[ConfigError] = []
    for key, value in options.items():
        if key in PROPERTIES_BY_NAME:
            overrides[key] = value
        elif key in READ_OPTIONS:
            read_options[key] = value
        else:
            close = did_you_mean(key, (*READ_OPTIONS, *PROPERTIES_BY_NAME))
            unknown.append(
                ConfigError(
                    f"unknown option for {DATA_SOURCE_NAME}; "
                    + (f"did you mean '{close}'? " if close else "")
                    + f"read options are {', '.join(READ_OPTIONS)}, or any property name",
                    source=sources.get(key, OPTION_SOURCE),
                    key=key,
                )
            )
    try:
        if properties is None:
            settings = load_settings(overrides=overrides, override_sources=sources)
        else:
            merged = {k: (v, PROPERTIES_SOURCE, None) for k, v in properties.items()}
            merged.update(
                {k: (v, sources.get(k, OPTION_SOURCE), None) for k, v in overrides.items()}
            )
            settings = build_settings(merged)
    except ConfigError as e:
        raise_config_errors([*unknown, *getattr(e, "errors", [e])])
        raise
    raise_config_errors(unknown)
    return settings, read_options


def table_column(table: Table, name: str) -> Column:
    """The column ``name`` of ``table``; the error lists the columns that exist."""
    col = table.column(name)
    if col is None:
        raise SchemaError(
            f"column '{name}' does not exist in {table.qualified_name}. "
            f"Columns: {', '.join(c.name for c in table.all_columns)}"
        )
    return col


def select_columns(
    table: Table, requested: str | None, case_sensitive: bool = False
) -> tuple[Column, ...]:
    """The columns the ``columns`` option names (all when unset), in the table's spelling."""
    if not requested:
        return table.all_columns
    return resolve_columns(
        table, requested_names(requested), case_sensitive, f"the columns option {requested!r}"
    )


def columns_for_schema(
    table: Table, schema: StructType, case_sensitive: bool = False
) -> tuple[Column | None, ...]:
    """The table columns a (user-given or derived) Spark schema asks for, in its order; None
    for a field the table does not have (read as nulls, as Spark's Parquet reader reads a
    column its files lack: ``column_names.py``)."""
    out: list[Column | None] = []
    resolved = resolve_schema_columns(
        table, [f.name for f in schema.fields], case_sensitive, "the read's schema"
    )
    for f, col in zip(schema.fields, resolved):
        if col is None:
            out.append(None)
            continue
        have = spark_type(col.type)
        if have != f.dataType:
            raise SchemaError(
                f"column '{f.name}' of {table.qualified_name} is {have.simpleString()}"
                f", but the schema asks for {f.dataType.simpleString()}"
            )
        out.append(col)
    return tuple(out)


def _filter_column(f) -> str | None:
    """The one column a pushed filter is on (through ``Not``), or None (a nested field)."""
    from pyspark.sql import datasource as ds

    while isinstance(f, ds.Not):
        f = f.child
    attr: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    return attr[0] if len(attr) == 1 else None


class TieredHiveDataSource(DataSource):
    """Reads a metastore table. See the module docstring for options."""

    #: Property strings carried by a configured subclass (``configured_source_class``).
    _properties: dict[str, str] | None = None
    #: The name this class registers under (the JVM provider takes the public one).
    _name: str = DATA_SOURCE_NAME
    #: Whether readers accept pushed filters (safe only behind the JVM provider: see
    #: ``raptorx_py.native``).
    _pushdown: bool = True
    #: ``spark.sql.caseSensitive`` when ``register`` ran, for reads the JVM provider does not
    #: tell (without the jar); the provider's ``raptorx.case_sensitive`` option wins.
    _case_sensitive: bool = False

    @classmethod
    def name(cls) -> str:
        return cls._name

    @short_worker_errors
    def __init__(self, options) -> None:
        super().__init__(options)
        self.settings, self.read_options = resolve_options(self._properties, options)
        request = self.read_options.get(CATALOG_REQUEST_OPTION)
        #: A request of the Spark catalog, answered by ``schema()`` (catalog_requests.py):
        #: no table is read, and no source is counted as created.
        self.catalog_request = (
            catalog_requests.parse_request(request) if request is not None else None
        )
        if self.catalog_request is not None:
            return
        table = self.read_options.get("path") or self.read_options.get("table")
        if not table:
            raise SchemaError(f'{DATA_SOURCE_NAME} needs a table: .load("<database>.<table>")')
        self.database, self.table_name = parse_table_name(table)
        self.case_sensitive = parse_case_sensitive(
            self.read_options.get(CASE_SENSITIVE_OPTION), default=self._case_sensitive
        )
        # Once per load() behind the JVM provider, not per scan: counted so tests can see it.
        counters.add("source.created")
        count_planning_call()  # in the driver's planner, or in a planning Python worker
        metrics.flush(self.settings.metrics_directory, self.settings.metrics_spark_directory)

    def _table(self) -> Table:
        """The table, through this process's versioned metastore cache: a snapshot round trip
        (none for an external table cached within ``hive.metastore-cache-ttl``), plus a
        database read when the cache holds no version fresh for it."""
        return with_cached_metastore(
            self.settings, lambda cache: cache.get_table(self.database, self.table_name)
        )

    @short_worker_errors
    def schema(self) -> StructType:
        try:
            if self.catalog_request is not None:
                return catalog_requests.answer_schema(
                    catalog_requests.answer(self.settings, self.catalog_request)
                )
            partitions: Sequence[Partition] = ()
            if self._pushdown:
                # The partitions too (for the table's size), under the one snapshot the table
                # alone would take; planning finds them in the cache next.
                table, partitions = with_cached_metastore(
                    self.settings,
                    lambda cache: cache.get_table_and_partitions(self.database, self.table_name),
                )
            else:
                table = self._table()
            schema = spark_struct(
                select_columns(table, self.read_options.get("columns"), self.case_sensitive)
            )
            # Behind the JVM provider (the only case with pushdown), which takes them out.
            if not self._pushdown:
                return schema
            return with_source_hints(
                with_table_statistics(schema, table, partitions), table, self.settings
            )
        finally:
            metrics.flush(self.settings.metrics_directory, self.settings.metrics_spark_directory)

    def writer(self, schema: StructType, overwrite: bool):
        """A write job (``datasource/writer.py``): append, or overwrite the whole table."""
        return TieredHiveWriter(
            self.settings,
            self.database,
            self.table_name,
            schema,
            overwrite,
            self.read_options.get(PARTITION_BY_OPTION),
        )

    @short_worker_errors
    def reader(self, schema: StructType) -> TieredHiveReader:
        return TieredHiveReader(
            self.settings,
            self.database,
            self.table_name,
            schema,
            pushdown=self._pushdown,
            executors=parse_executors(self.read_options.get(EXECUTORS_OPTION)),
            case_sensitive=self.case_sensitive,
        )


class TieredHiveReader(DataSourceReader):
    """One scan of one query. Per scan pyspark 4.3 calls, in ONE planning worker call on the
    driver: ``reader(schema)`` (this ``__init__``), ``pushFilters``, then pickles the reader
    for the executors' ``read``, then ``partitions()``. So the query's snapshot is taken here,
    once per scan (``cache.snapshot``: the one uncached metastore round trip), and everything
    the scan reads from the metastore is read under it: the table now, the partitions in
    ``partitions()``. Behind the native provider the schema carries the query's token, and
    a later scan of the same table in the same query reads under the snapshot the first one
    recorded instead (``query_snapshots.py``: one snapshot per query). It is pickled with
    the reader, so ``read`` could use it too."""

    #: Fields of a user-given schema the table lacks: (position, name, Arrow type), read as
    #: nulls (``_with_missing``); a filter on one is left to Spark.
    missing: tuple[tuple[int, str, pa.DataType], ...] = ()

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
        self._planning = _open_planning_scope()

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
        # A pushed partial aggregation comes in the schema (datasource/aggregation.py): the
        # scan then reads the aggregation's input columns and returns its partial rows.
        self.aggregation = aggregation.from_schema(schema) if pushdown else None
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
            if _filter_column(f) in missing:  # a column read as nulls: Spark evaluates it
                yield f
                continue
            p = preds.from_spark_filter(filter_with_table_names(f, self.filter_names), types)
            if p is None or not preds.is_exact(p, types, keys):
                yield f
            else:
                self.predicates.append(p)

    def _take_aggregation_filters(self, pushed: aggregation.PushedAggregation) -> None:
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
                self.settings,
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
            spark_reads = self._spark_reads()
            # The JVM serves a fragment as it is cached, without the columns read as nulls.
            if self.settings.fragment_cache_enabled and not self.missing:
                for partition, task in zip(partitions, specs):
                    mark_partition(
                        partition,
                        handoff_mark(
                            self.settings.fragment_cache_base_directory,
                            self.settings.metrics_directory,
                            [
                                _handoff_key(spec, spark_reads, self.aggregation is not None)
                                for spec in task
                            ],
                        ),
                    )
            if spark_reads:
                self._mark_jvm_reads(partitions, specs)
            if self.pushdown:  # behind the native provider, which reads the plan's mark
                if not partitions:  # pyspark's own placeholder would carry no mark
                    partitions = [InputPartition(None)]
                    if spark_reads:  # the JVM answers it (no rows, or an empty aggregate)
                        self._mark_jvm_reads(partitions, [[]])
                mark_plan(partitions[0], self._plan_mark())
            return partitions
        finally:
            _close_planning_scope(getattr(self, "_planning", None))
            metrics.flush(self.settings.metrics_directory, self.settings.metrics_spark_directory)

    def _spark_reads(self) -> bool:
        """Whether Spark's own Parquet reader in the JVM may read this scan's splits
        (``hive.parquet.reader``): behind the native provider, every column present in the
        table, read under the table's names. A pushed partial aggregation is then computed
        in the JVM too, over Spark's reader's batches (``SplitAggregation.scala``)."""
        return (
            self.pushdown
            and self.settings.parquet_reader != "PYTHON"
            and not self.missing
            and self.output_names is None
            and not self.filter_names
        )

    def _mark_jvm_reads(self, partitions, specs) -> None:
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
        keys = [k.name for k in self.table.partition_keys]
        marked = False
        for partition, task in zip(partitions, specs):
            store = [
                fill
                and _handoff_key(spec, True, self.aggregation is not None) is not None
                and (first_use or _fragment_planned_before(spec.key))
                for spec in task
            ]
            try:
                mark = jvm_read_handoff.handoff_mark(self.settings, keys, task, store)
            except TypeError:  # a partition value the JVM cannot be handed
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
            adopt_jvm_blocks(self.settings)
            adopt_jvm_fragments(self.settings)

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
            fragments = fragment_cache_for(self.settings) if fill else None
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

    def _split_result(self, spec: ReadSpec, fill: bool, fragments):
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


def _handoff_key(spec, spark_reads: bool, aggregated: bool = False) -> bytes | None:
    """The fragment key the JVM looks up and stores ``spec``'s split under: none for a split
    Spark's reader reads with no row filter left (``spec.predicates`` empty: no predicate, or
    statistics made them all true in its partition). Its fragment would hold its columns as
    read, and a hit on that was measured no faster than Spark's reader over the cached
    blocks (SF 1, Q4 and Q20), while it doubled the disk those columns take; the block cache
    serves it. A split of an ``aggregated`` scan always keeps its key: its fragment is its
    few partial rows. The Python reader, reading the split for another reason, still uses
    the split's key (``spec.key``)."""
    if spark_reads and not spec.predicates and not aggregated:
        return None
    return spec.key


#: Non-empty once this process ran a read task (``reader.python_worker_starts``).
_worker_started: list[bool] = []


#: The planning scope of the scan being planned in this process (planning is one scan at a
#: time: a planning worker, or the driver's planner under its lock).
_planning_scope: list = []


#: Fragment keys this process planned, oldest first (bounded): how AUTO tells a repeat.
_planned_fragments: collections.OrderedDict[bytes, None] = collections.OrderedDict()
_PLANNED_FRAGMENTS_MAX = 1 << 16
_planned_lock = threading.Lock()


def table_key(database: str, table_name: str) -> tuple[str, str, str]:
    """The key of a table's ``(snapshot, table)`` in ``query_snapshots.query_values``."""
    return ("table", database.lower(), table_name.lower())


def first_scan_state(
    settings: Settings, database: str, table_name: str, token: str | None
) -> tuple[QuerySnapshot, Table]:
    """The snapshot and the table the first scan of ``database.table_name`` in a query
    reads: a snapshot (``cache.snapshot``: the one uncached metastore round trip) and the
    table under it; with the native provider's query ``token``, the snapshot an earlier scan
    of the table in the query recorded instead, when one did (``query_snapshots``: one
    snapshot per query), and the table read under it."""

    def snapshot_and_table(cache):
        snapshot = cache.snapshot([f"{database}.{table_name}"])
        # A table dropped and recreated after the snapshot fails here (MetastoreError,
        # "run the query again"), in the cache's table-id check.
        return snapshot, cache.get_table(database, table_name, snapshot=snapshot)

    snapshot, table = with_cached_metastore(settings, snapshot_and_table)
    if token is None:
        return snapshot, table
    key = table.qualified_name
    try:
        if planning_in_driver():  # every scan of the query is planned in this process
            recorded = query_snapshots.in_process.snapshot_for_query(token, key, snapshot)
        else:
            recorded = snapshot_for_query(token, key, snapshot)
    except (OSError, sqlite3.Error) as e:
        # The store only makes scans agree; without it each scan keeps its own snapshot.
        counters.add("source.query_snapshot_unavailable")
        log.warning("query snapshot store unavailable (%s); %s reads its own snapshot", e, key)
        return snapshot, table
    if recorded == snapshot:
        return snapshot, table
    counters.add("source.query_snapshot_reused")
    return recorded, with_cached_metastore(
        settings,
        lambda cache: cache.get_table(table.database, table.name, snapshot=recorded),
    )


def _fragment_planned_before(key: bytes) -> bool:
    """Whether this process planned a split of fragment ``key`` before (and remember it).
    Per process: with the driver's planner, every scan of the application."""
    with _planned_lock:
        if key in _planned_fragments:
            _planned_fragments.move_to_end(key)
            return True
        _planned_fragments[key] = None
        if len(_planned_fragments) > _PLANNED_FRAGMENTS_MAX:
            _planned_fragments.popitem(last=False)
        return False


def _open_planning_scope():
    """A counters scope for a scan's planning; one left open by a planning that failed before
    ``partitions()`` is closed first, so abandoned scopes do not pile up."""
    while _planning_scope:
        counters.close_scope(_planning_scope.pop())
    scope = counters.open_scope()
    _planning_scope.append(scope)
    return scope


def _close_planning_scope(scope) -> None:
    if scope is None:
        return
    counters.close_scope(scope)
    # By identity: two scopes that counted the same are equal Counters.
    _planning_scope[:] = [s for s in _planning_scope if s is not scope]


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


#: Metadata keys on a schema's first field carrying the table's size to the JVM provider
#: (``native/.../TableStatistics.scala``, which removes them), for Spark's join planning.
TABLE_BYTES_KEY = jvm_protocol.TABLE_BYTES_KEY
TABLE_ROWS_KEY = jvm_protocol.TABLE_ROWS_KEY


def with_table_statistics(
    schema: StructType, table: Table, partitions: Sequence[Partition] = ()
) -> StructType:
    """``schema`` with the table's ``totalSize``/``numRows`` in its first field's metadata: an
    unpartitioned table's own, a partitioned table's summed over ``partitions`` (its
    partitions, read through the metastore cache, which planning reads next anyway).

    They are an estimate for Spark's join planning only (which side to broadcast), never for
    what a scan returns; without them (a partitioned table with a partition that has no
    ``totalSize``), Spark assumes the table is too big to broadcast, as it would be without
    raptorx_py's statistics.
    """
    if not schema.fields:
        return schema
    if table.partition_keys:
        size = _summed(p.parameters.get(TOTAL_SIZE_PARAM) for p in partitions)
        rows = _summed(p.parameters.get(NUM_ROWS_PARAM) for p in partitions)
        if not partitions:
            size = rows = None  # no partition read yet: unknown, not empty
    else:
        size = _summed([table.parameters.get(TOTAL_SIZE_PARAM)])
        rows = _summed([table.parameters.get(NUM_ROWS_PARAM)])
    if size is None:
        return schema
    first = schema.fields[0]
    meta = {**(first.metadata or {}), TABLE_BYTES_KEY: size}
    if rows is not None:
        meta[TABLE_ROWS_KEY] = rows
    return StructType(
        [StructField(first.name, first.dataType, first.nullable, meta), *schema.fields[1:]]
    )


def _summed(values: Iterable[str | None]) -> int | None:
    """The sum of counts stored as metastore parameters; None if any is missing or not a
    count."""
    total = 0
    for value in values:
        if value is None or not value.isdigit():
            return None
        total += int(value)
    return total


#: Metadata keys on a schema's first field carrying what the JVM provider must know of the
#: Python reader (``native/.../SourceHints.scala``, which removes them),
#: and what the Spark catalog shows of the table (``TableDescription``, which removes it).
EXACT_FILTER_COLUMNS_KEY = jvm_protocol.EXACT_FILTER_COLUMNS_KEY
AGGREGATION_PUSHDOWN_KEY = jvm_protocol.AGGREGATION_PUSHDOWN_KEY
AGGREGATION_KEYS_KEY = jvm_protocol.AGGREGATION_KEYS_KEY
TABLE_DESCRIPTION_KEY = jvm_protocol.TABLE_DESCRIPTION_KEY


def with_source_hints(schema: StructType, table: Table, settings: Settings) -> StructType:
    """``schema`` with the columns whose filters the reader evaluates exactly (the rule of
    ``predicates.is_exact``, so the provider reports exactly those filters to Spark as
    handled), whether aggregation pushdown is on and which columns it may group by
    (``aggregation.group_keys``), and the table's description for the Spark
    catalog (its partition keys, type and location: ``DESCRIBE``, ``INSERT``), in its first
    field's metadata."""
    if not schema.fields:
        return schema
    types = {c.name: c.type for c in table.all_columns}
    keys = {k.name for k in table.partition_keys}
    exact = [f.name for f in schema.fields if preds.is_exact(preds.IsNotNull(f.name), types, keys)]
    first = schema.fields[0]
    meta = {
        **(first.metadata or {}),
        EXACT_FILTER_COLUMNS_KEY: exact,
        AGGREGATION_PUSHDOWN_KEY: bool(settings.aggregation_pushdown_enabled),
        TABLE_DESCRIPTION_KEY: json.dumps(
            {
                "partition_keys": [k.name for k in table.partition_keys],
                "table_type": table.table_type,
                "location": table.location,
            }
        ),
    }
    group_keys = aggregation.group_keys(schema, keys, settings.parquet_reader)
    if group_keys is not None:
        meta[AGGREGATION_KEYS_KEY] = group_keys
    return StructType(
        [StructField(first.name, first.dataType, first.nullable, meta), *schema.fields[1:]]
    )


def record_scan(table: Table, columns) -> None:
    """Count one planned scan of ``table`` and each column it reads, so that tests and the
    benchmark can see exactly which columns Spark asked for (``scan.planned.<db.table>``,
    ``scan.column.<db.table>.<column>``)."""
    counters.add(f"scan.planned.{table.qualified_name}")
    for c in columns:
        counters.add(f"scan.column.{table.qualified_name}.{c.name}")


def configured_source_class(
    settings: Settings,
    name: str = DATA_SOURCE_NAME,
    pushdown: bool = True,
    case_sensitive: bool = False,
) -> type[TieredHiveDataSource]:
    """A ``TieredHiveDataSource`` subclass that carries ``settings`` to Spark's workers and
    registers as ``name``; ``case_sensitive``: the session's ``spark.sql.caseSensitive``, for
    reads the JVM provider does not tell (``column_names.py``).

    It is deliberately not importable by name, so cloudpickle ships it by value, with its
    ``_properties``.
    """
    return type(
        "ConfiguredTieredHiveDataSource",
        (TieredHiveDataSource,),
        {
            "_properties": settings.properties(),
            "_name": name,
            "_pushdown": pushdown,
            "_case_sensitive": case_sensitive,
            "__module__": __name__,
            "__qualname__": "ConfiguredTieredHiveDataSource.<configured>",
        },
    )
