"""The metastore (Hive Metastore-like schema in SQLite) and its model."""

from raptorx_py.metastore.model import (
    EXTERNAL_TABLE,
    HIVE_DEFAULT_PARTITION,
    MANAGED_TABLE,
    Column,
    ColumnStats,
    Database,
    Partition,
    Table,
)
from raptorx_py.metastore.store import Metastore, open_metastore

__all__ = [
    "EXTERNAL_TABLE",
    "HIVE_DEFAULT_PARTITION",
    "MANAGED_TABLE",
    "Column",
    "ColumnStats",
    "Database",
    "Metastore",
    "Partition",
    "Table",
    "open_metastore",
]
