"""The ``tiered_hive`` pyspark data source: ``spark.read.format("tiered_hive").load("db.t")``.

Where things run (pyspark 4.3): ``DataSource.__init__``/``schema`` and the reader's
``pushFilters``/``partitions`` run in Python workers of the driver; ``read`` runs in Python
workers of the executors. Neither sees the driver's Python objects, so the configuration
travels with the class: ``configured_source_class(settings)`` makes a subclass that carries
the resolved property strings, which cloudpickle ships by value when it is registered.

Read options: ``path`` (the table, ``db.table``), ``columns`` (comma-separated subset), and
any property name, which overrides that property for this read only. Any other option is
an error naming it.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from raptorx_py import metrics
from raptorx_py import predicates as preds
from raptorx_py.config import PROPERTIES_BY_NAME, build_settings, load_settings
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planner import plan_scan, split_predicates
from raptorx_py.datasource.scan import read_split
from raptorx_py.errors import ConfigError, SchemaError
from raptorx_py.hive_types import spark_struct, spark_type
from raptorx_py.metastore import open_metastore
from raptorx_py.metastore.model import Column, Table
from raptorx_py.metrics import counters
from raptorx_py.native import PUBLIC_NAME
from raptorx_py.table_registration import parse_table_name

DATA_SOURCE_NAME = PUBLIC_NAME
READ_OPTIONS = ("path", "table", "columns")


def resolve_options(properties: dict[str, str] | None, options) -> tuple[Settings, dict]:
    """Settings for one read (carried properties + per-read property options) and the
    remaining read options. Unknown option names fail, naming the option."""
    overrides, read_options = {}, {}
    for key, value in dict(options).items():
        key = key.lower()
        if key in PROPERTIES_BY_NAME:
            overrides[key] = value
        elif key in READ_OPTIONS:
            read_options[key] = value
        else:
            raise ConfigError(
                f"unknown option for {DATA_SOURCE_NAME}; read options are "
                f"{', '.join(READ_OPTIONS)}, or any property name", source="option", key=key)
    if properties is None:
        settings = load_settings(overrides=overrides)
    else:
        merged = {k: (v, "register()", None) for k, v in properties.items()}
        merged.update({k: (v, "option", None) for k, v in overrides.items()})
        settings = build_settings(merged)
    return settings, read_options


def table_column(table: Table, name: str) -> Column:
    """The column ``name`` of ``table``; the error lists the columns that exist."""
    col = table.column(name)
    if col is None:
        raise SchemaError(f"column '{name}' does not exist in {table.qualified_name}. "
                          f"Columns: {', '.join(c.name for c in table.all_columns)}")
    return col


def select_columns(table: Table, requested: str | None) -> tuple[Column, ...]:
    if not requested:
        return table.all_columns
    return tuple(table_column(table, n.strip()) for n in requested.split(","))


def columns_for_schema(table: Table, schema: StructType) -> tuple[Column, ...]:
    """The table columns a (user-given or derived) Spark schema asks for, in its order."""
    out = []
    for f in schema.fields:
        col = table_column(table, f.name)
        have = spark_type(col.type)
        if have != f.dataType:
            raise SchemaError(
                f"column '{f.name}' of {table.qualified_name} is {have.simpleString()}"
                f", but the schema asks for {f.dataType.simpleString()}")
        out.append(col)
    return tuple(out)


class TieredHiveDataSource(DataSource):
    """Reads a metastore table. See the module docstring for options."""

    #: Property strings carried by a configured subclass (``configured_source_class``).
    _properties: dict[str, str] | None = None
    #: The name this class registers under (the JVM provider takes the public one).
    _name: str = DATA_SOURCE_NAME
    #: Whether readers accept pushed filters (safe only behind the JVM provider: see
    #: ``raptorx_py.native``).
    _pushdown: bool = True

    @classmethod
    def name(cls) -> str:
        return cls._name

    def __init__(self, options) -> None:
        super().__init__(options)
        self.settings, self.read_options = resolve_options(self._properties, options)
        table = self.read_options.get("path") or self.read_options.get("table")
        if not table:
            raise SchemaError(f'{DATA_SOURCE_NAME} needs a table: .load("<database>.<table>")')
        self.database, self.table_name = parse_table_name(table)

    def _table(self) -> Table:
        with open_metastore(self.settings) as ms:
            return ms.get_table(self.database, self.table_name)

    def schema(self) -> StructType:
        table = self._table()
        return spark_struct(select_columns(table, self.read_options.get("columns")))

    def reader(self, schema: StructType) -> "TieredHiveReader":
        return TieredHiveReader(self.settings, self.database, self.table_name, schema,
                                pushdown=self._pushdown)


class TieredHiveReader(DataSourceReader):
    def __init__(self, settings: Settings, database: str, table_name: str, schema: StructType,
                 pushdown: bool = True):
        self.settings = settings
        self.pushdown = pushdown
        with open_metastore(settings) as ms:
            self.table = ms.get_table(database, table_name)
        self.columns = columns_for_schema(self.table, schema)
        self.predicates: list = []

    def pushFilters(self, filters):
        if not self.pushdown:
            yield from filters
            return
        types = {c.name: c.type for c in self.table.all_columns}
        keys = {k.name for k in self.table.partition_keys}
        for f in filters:
            p = preds.from_spark_filter(f, types)
            if p is None or not preds.is_exact(p, types, keys):
                yield f
            else:
                self.predicates.append(p)

    def partitions(self):
        try:
            with open_metastore(self.settings) as ms:
                table = ms.get_table(self.table.database, self.table.name)
                if table.id != self.table.id or table.all_columns != self.table.all_columns:
                    raise SchemaError(f"table {table.qualified_name} changed while the query "
                                      f"was planned; run the query again")
                plan = plan_scan(ms, self.settings, table, self.columns, self.predicates)
            record_scan(table, self.columns)
            return [InputPartition(task) for task in plan.tasks]
        finally:
            metrics.flush(self.settings.metrics_directory)

    def read(self, partition):
        task = partition.value
        if task is None:  # pyspark's placeholder when planning found no split
            return
        try:
            # pyspark pickles this reader for the executors *before* it calls partitions(),
            # so only what pushFilters stored is visible here.
            _, data_predicates = split_predicates(self.table, self.predicates)
            for split in task:
                yield from read_split(split, self.table, self.columns, data_predicates,
                                      self.settings)
        finally:
            metrics.flush(self.settings.metrics_directory)


def record_scan(table: Table, columns) -> None:
    """Count one planned scan of ``table`` and each column it reads, so that tests and the
    benchmark can see exactly which columns Spark asked for (``scan.planned.<db.table>``,
    ``scan.column.<db.table>.<column>``)."""
    counters.add(f"scan.planned.{table.qualified_name}")
    for c in columns:
        counters.add(f"scan.column.{table.qualified_name}.{c.name}")


def configured_source_class(settings: Settings, name: str = DATA_SOURCE_NAME,
                            pushdown: bool = True) -> type[TieredHiveDataSource]:
    """A ``TieredHiveDataSource`` subclass that carries ``settings`` to Spark's workers and
    registers as ``name``.

    It is deliberately not importable by name, so cloudpickle ships it by value, with its
    ``_properties``.
    """
    return type("ConfiguredTieredHiveDataSource", (TieredHiveDataSource,), {
        "_properties": settings.properties(),
        "_name": name,
        "_pushdown": pushdown,
        "__module__": __name__,
        "__qualname__": "ConfiguredTieredHiveDataSource.<configured>",
    })
