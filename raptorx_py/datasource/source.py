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

from collections.abc import Sequence

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from raptorx_py import metrics
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planning import catalog_requests
from raptorx_py.datasource.planning.column_names import (
    CASE_SENSITIVE_OPTION,
    parse_case_sensitive,
)
from raptorx_py.datasource.planning.options import DATA_SOURCE_NAME, resolve_options
from raptorx_py.datasource.planning.planning_thread import count_planning_call
from raptorx_py.datasource.planning.table_schema import (
    select_columns,
    with_source_hints,
    with_table_statistics,
)
from raptorx_py.datasource.reader import TieredHiveReader
from raptorx_py.datasource.writer import TieredHiveWriter
from raptorx_py.error_report import short_worker_errors
from raptorx_py.errors import SchemaError
from raptorx_py.hive.column_types import spark_struct
from raptorx_py.hive.model import Partition, Table
from raptorx_py.jvm_contract.protocol import CATALOG_REQUEST_OPTION, PARTITION_BY_OPTION
from raptorx_py.metastore.cached_store import with_cached_metastore
from raptorx_py.metrics import counters
from raptorx_py.names import parse_table_name
from raptorx_py.scheduling.affinity import EXECUTORS_OPTION, parse_executors


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
            self.settings.metastore_cache,
            lambda cache: cache.get_table(self.database, self.table_name),
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
                    self.settings.metastore_cache,
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
