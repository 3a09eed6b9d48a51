"""The metastore: Hive Metastore-like catalogues (SQLite, PostgreSQL, a Hive Metastore over
Thrift), transactions, locks, the notification log and the versioned cache. What it holds is
described by the foundation package ``raptorx_py.hive`` (``hive.model``)."""

from raptorx_py.metastore.store import Metastore, open_metastore

__all__ = ["Metastore", "open_metastore"]
