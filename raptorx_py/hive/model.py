"""What the metastore holds, as immutable values: databases, tables, partitions, statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raptorx_py.hive.storage_formats import PARQUET
from raptorx_py.hive.table_parameters import NUM_ROWS_PARAM

MANAGED_TABLE = "MANAGED_TABLE"
EXTERNAL_TABLE = "EXTERNAL_TABLE"

#: Hive's directory value for a null partition value.
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Hive type string, e.g. "bigint", "decimal(15,2)"


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of one column over a partition (or a whole unpartitioned table).

    ``low``/``high`` are typed Python values (int, Decimal, date, str ...), or ``None`` when
    unknown; they are bounds, not necessarily values that occur (Parquet may truncate strings).
    """

    num_nulls: int | None = None
    low: Any = None
    high: Any = None


@dataclass(frozen=True)
class Database:
    id: int
    name: str
    location: str | None = None


@dataclass(frozen=True)
class Partition:
    values: tuple[str | None, ...]  # one per partition key, None for a null value
    location: str
    parameters: dict[str, str] = field(default_factory=dict)
    stats: dict[str, ColumnStats] = field(default_factory=dict)
    id: int | None = None
    #: The format of its data files when it is not its table's (Hive keeps a storage
    #: descriptor per partition): PARQUET or ORC; None: the table's.
    storage_format: str | None = None

    @property
    def row_count(self) -> int | None:
        n = self.parameters.get(NUM_ROWS_PARAM)
        return int(n) if n is not None else None


class TableShape:
    """A table's name and columns, whatever else describes it (mixed into ``Table`` and the
    write path's target, whose fields it reads)."""

    database: str
    name: str
    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...]

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.name}"

    @property
    def all_columns(self) -> tuple[Column, ...]:
        """Data columns followed by partition keys: the schema a reader returns."""
        return self.columns + self.partition_keys


@dataclass(frozen=True)
class Table(TableShape):
    database: str
    name: str
    table_type: str
    location: str
    columns: tuple[Column, ...]  # data columns, as stored in the files
    partition_keys: tuple[Column, ...] = ()
    parameters: dict[str, str] = field(default_factory=dict)
    stats: dict[str, ColumnStats] = field(default_factory=dict)  # unpartitioned tables
    id: int | None = None
    #: The format of its data files (``storage_formats``: PARQUET or ORC).
    storage_format: str = PARQUET

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_keys)

    def format_of(self, partition: Partition | None) -> str:
        """The format of the data files of ``partition`` of this table (None: the table's
        own files, unpartitioned)."""
        if partition is None or partition.storage_format is None:
            return self.storage_format
        return partition.storage_format

    def column(self, name: str) -> Column | None:
        for c in self.all_columns:
            if c.name == name:
                return c
        return None
