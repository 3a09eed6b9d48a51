"""The metastore a configuration names: ``open_catalog``.

``hive.metastore.uri`` (``thrift://host:port``, a comma-separated list tried in order) names a
Hive Metastore over Thrift (``thrift_store.ThriftMetastore``, with its timeout, retry and
batch properties); without it, ``hive.metastore.url`` names an SQLite file or a PostgreSQL
database (``store.open_metastore``). Both answer as a ``catalog.MetastoreCatalog``. This
module sits above both backends, which know nothing of each other, and below the versioned
cache, the planner, registration and the CLI, which take whichever it returns.

Operations that need transactions, write ids or locks (managed writes, the cleaner, lock
listings) open ``store.open_metastore`` directly, which refuses a ``hive.metastore.uri``
configuration naming why.
"""

from __future__ import annotations

from typing import Any

from raptorx_py.config.tiers import MetastoreConnectionSettings
from raptorx_py.metastore.catalog import MetastoreCatalog
from raptorx_py.metastore.store import open_metastore
from raptorx_py.metastore.thrift_store import ThriftMetastore

__all__ = ["open_catalog"]


def open_catalog(
    connection: MetastoreConnectionSettings, *, create: bool = False, **kwargs: Any
) -> MetastoreCatalog:
    """The configured metastore (``Settings.metastore_connection``): the Hive Metastore of
    ``hive.metastore.uri`` when it is set (Thrift; its timeout, retry and batch properties),
    else ``open_metastore`` (``create`` and ``kwargs`` go there; a Hive Metastore is never
    created)."""
    if connection.uri:
        return ThriftMetastore(
            connection.uri,
            timeout=connection.timeout,
            max_retries=connection.max_retries,
            min_backoff=connection.min_backoff,
            max_backoff=connection.max_backoff,
            partition_batch_size=connection.partition_batch_size,
        )
    return open_metastore(connection, create=create, **kwargs)
