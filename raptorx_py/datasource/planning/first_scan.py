"""The first reads of a scan of a table in a query: its snapshot and the table under it,
one state of the table per query (``query_snapshots``)."""

from __future__ import annotations

import logging
import sqlite3

from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planning import query_snapshots
from raptorx_py.datasource.planning.planning_thread import planning_in_driver
from raptorx_py.datasource.planning.query_snapshots import snapshot_for_query
from raptorx_py.hive.model import Table
from raptorx_py.metastore.cached_store import with_cached_metastore
from raptorx_py.metastore.catalog import QuerySnapshot
from raptorx_py.metrics import counters

log = logging.getLogger(__name__)


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

    snapshot, table = with_cached_metastore(settings.metastore_cache, snapshot_and_table)
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
        settings.metastore_cache,
        lambda cache: cache.get_table(table.database, table.name, snapshot=recorded),
    )
