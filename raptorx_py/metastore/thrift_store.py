"""A Hive Metastore (2.3 and later) over Thrift as the metastore: ``hive.metastore.uri``.

``ThriftMetastore`` is the catalogue face ``Metastore`` has (databases, tables, partitions,
statistics, table parameters, the notification log, table snapshots) over Hive's own Thrift
API, so the versioned cache (``cached_store``), the planner and registration work on it
unchanged. The client is PyPI's ``hive-metastore-client`` (generated Thrift code of Hive's
metastore IDL with the ``thrift`` runtime; see docs/design/metastore.md for why).

Contract:
- ``hive.metastore.uri`` is one ``thrift://host:port`` or a comma-separated list tried in
  order. A call that fails on the connection (refused, reset, timed out after
  ``hive.metastore-timeout``) is retried on the next URI, up to
  ``hive.metastore.thrift.client.max-retries`` times with a doubling backoff between
  ``...min-backoff-delay`` and ``...max-backoff-delay``; then ``MetastoreError`` names every
  URI and the last error. A call the server answered with an error is never retried.
- Every Thrift call counts one ``metastore.round_trips`` (or the name given by
  ``round_trips.counting_as``), as one SQL statement does on the other backends.
- A table's partitions are read in a number of calls that does not grow one per partition:
  ``get_partition_names`` then ``get_partitions_by_names`` and
  ``get_partitions_statistics_req`` per ``hive.metastore.partition-batch-size.max`` names.
- The table id a cache entry is tagged with is the table's ``createTime`` (HMS 2.3 tables have
  no id): a table dropped and recreated under the same name in the same second is not told
  apart by it (the notification log's DROP_TABLE/CREATE_TABLE still invalidate it).
- HMS 2.3 has no write ids. A Hive table that is not ``transactional=true`` keeps its files in
  the plain Hive layout whatever its type, so it is read (and appended to) as this package's
  ``EXTERNAL_TABLE`` (TTL and notification log, no write ids); its HMS type stays as it is on
  the server. Transactions, write ids and managed (insert-only ACID) tables are refused before
  anything is written, with ``MetastoreError`` saying so; so is reading a transactional table.
- Partition values ``__HIVE_DEFAULT_PARTITION__`` are ``None`` in the model, as elsewhere.
  String columns carry no low/high statistics in HMS (only null counts); timestamp columns
  none at all.
"""

from __future__ import annotations

import datetime
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from decimal import Decimal
from typing import Any, NoReturn

from raptorx_py.config.units import split_thrift_uris
from raptorx_py.errors import AlreadyExistsError, MetastoreError, NoSuchObjectError
from raptorx_py.hive.column_types import base_type
from raptorx_py.hive.model import (
    EXTERNAL_TABLE,
    HIVE_DEFAULT_PARTITION,
    MANAGED_TABLE,
    Column,
    ColumnStats,
    Database,
    Partition,
    Table,
)
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.hive.storage_formats import FORMATS, format_of, hive_classes
from raptorx_py.hive.write_ids import ValidWriteIdList
from raptorx_py.metastore.catalog import (
    MetastoreCatalog,
    NotificationEvent,
    QuerySnapshot,
    TableSnapshot,
    check_snapshot_table,
)
from raptorx_py.metastore.round_trips import count_round_trip
from raptorx_py.names import check_name, parse_table_name

log = logging.getLogger(__name__)

#: The Thrift library's socket logs ``Could not connect to any of [...]`` (ERROR) and a
#: resolution failure (with a traceback) before raising the exception that says the same;
#: ``ThriftConnection.call`` turns that exception into our one-line ``MetastoreError`` (the
#: library's text kept in it), so while this module opens a connection those records are
#: dropped. The library's records at other times are left alone.
THRIFT_SOCKET_LOGGER = "thrift.transport.TSocket"
_opening = threading.local()


def _not_while_opening(record: logging.LogRecord) -> bool:
    return not getattr(_opening, "active", False)


logging.getLogger(THRIFT_SOCKET_LOGGER).addFilter(_not_while_opening)

__all__ = ["ThriftConnection", "ThriftMetastore", "merged_parameters", "parse_thrift_uris"]

#: What HMS answers for a table written by a Hive 3 ACID writer, and a Hive 2.3 ACID table.
TRANSACTIONAL_PARAM = "transactional"
#: What Spark's Hive catalog records for a data source table (``USING parquet``); one it
#: cannot store in Hive's form keeps its schema in table properties and a placeholder column
#: ``col array<string>`` in the Hive schema.
SPARK_PROVIDER_PARAM = "spark.sql.sources.provider"
#: Calls that only read: safe to send again after a connection failed mid-call.
READ_CALL_PREFIXES = ("get_",)
_INTEGER_TYPES = {"tinyint", "smallint", "int", "integer", "bigint"}
_EPOCH = datetime.date(1970, 1, 1)


def parse_thrift_uris(value: str) -> list[tuple[str, int]]:
    """``thrift://h1:9083,thrift://h2:9083`` as ``[(host, port), ...]``, in order (the
    configuration refuses a malformed value when it loads: ``config.units.split_thrift_uris``)."""
    try:
        out = split_thrift_uris(value)
    except ValueError as e:
        raise MetastoreError(f"hive.metastore.uri '{value}': {e}") from e
    if not out:
        raise MetastoreError("hive.metastore.uri is empty: expected thrift://host:port")
    return out


def _hive():  # the generated modules, imported on first use (SQL users never load them)
    from thrift_files.libraries.thrift_hive_metastore_client import ThriftHiveMetastore, ttypes

    return ThriftHiveMetastore, ttypes


class ThriftConnection:
    """One client of the first reachable URI; ``call(name, *args)`` with failover and retries
    (see the module docstring). Not thread-safe by itself: ``ThriftMetastore`` serialises."""

    def __init__(
        self,
        uris: Sequence[tuple[str, int]],
        *,
        timeout: float = 10.0,
        max_retries: int = 3,
        min_backoff: float = 1.0,
        max_backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.uris = list(uris)
        self.timeout = timeout
        self.max_retries = max_retries
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self._next = 0  # the URI tried next
        self._transport: Any = None
        self._client: Any = None

    def describe(self) -> str:
        return ",".join(f"thrift://{h}:{p}" for h, p in self.uris)

    def _connect(self) -> Any:
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        ThriftHiveMetastore, _ = _hive()
        host, port = self.uris[self._next % len(self.uris)]
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(int(self.timeout * 1000))
        transport = TTransport.TBufferedTransport(sock)
        _opening.active = True  # the library's own lines are ours to say (_not_while_opening)
        try:
            transport.open()
        finally:
            _opening.active = False
        # One small request and reply per call: without NODELAY a call can wait for a
        # delayed ACK (a poll was measurably slower without it, on loopback).
        sock.handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._transport = transport
        self._client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        return self._client

    def close(self) -> None:
        transport, self._transport, self._client = self._transport, None, None
        if transport is not None:
            transport.close()

    def call(self, name: str, *args: Any) -> Any:
        from thrift.Thrift import TApplicationException
        from thrift.transport.TTransport import TTransportException

        attempt, delay = 0, self.min_backoff
        while True:
            count_round_trip()
            connected = False
            try:
                client = self._client or self._connect()
                connected = True
                return getattr(client, name)(*args)
            except TApplicationException as e:
                raise MetastoreError(
                    f"the Hive Metastore {self.describe()} failed {name}: {e} (see the "
                    f"server's log)"
                ) from e
            except (TTransportException, OSError, EOFError) as e:
                self.close()
                what = self._failure(e)
                # A write whose request may have reached the server is not sent again (it
                # may have taken effect); reads, and a connection that never opened, are.
                if connected and not name.startswith(READ_CALL_PREFIXES):
                    raise MetastoreError(
                        f"the Hive Metastore {self.describe()} {what} during {name}; it may "
                        f"or may not have taken effect (not retried)"
                    ) from e
                self._next += 1
                attempt += 1
                if attempt > self.max_retries:
                    raise MetastoreError(
                        f"the Hive Metastore {self.describe()} {what} during {name}, "
                        f"{attempt} attempt(s) (hive.metastore.thrift.client.max-retries="
                        f"{self.max_retries})"
                    ) from e
                log.warning(
                    "metastore call %s: %s; retrying%s",
                    name,
                    what,
                    " on the next URI" if len(self.uris) > 1 else "",
                )
                self._sleep(delay)
                delay = min(self.max_backoff, delay * 2)

    def _failure(self, e: BaseException) -> str:
        inner = getattr(e, "inner", None)
        if isinstance(e, TimeoutError) or isinstance(inner, TimeoutError):
            return f"did not answer within hive.metastore-timeout ({self.timeout:g}s)"
        return f"did not answer ({e})"


def merged_parameters(
    stored: Mapping[str, str] | None, changes: Mapping[str, str | None]
) -> dict[str, str]:
    """``stored`` parameters (a table's or a partition's, as the server sent them) with
    ``changes`` applied: a value sets its key, ``None`` removes it (a missing key is no
    error). HMS's ``alter_table``/``alter_partition`` replace the whole map, so a change of a
    few keys is sent as the merged map."""
    merged = dict(stored or {})
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def _location(uri: str | None) -> str:
    """HMS normalises ``file:///x`` to ``file:/x``; the storage layer wants the URL form."""
    if uri and uri.startswith("file:/") and not uri.startswith("file://"):
        return "file://" + uri[len("file:") :]
    return uri or ""


def _value_in(v: str) -> str | None:
    return None if v == HIVE_DEFAULT_PARTITION else v


def _value_out(v: str | None) -> str:
    return HIVE_DEFAULT_PARTITION if v is None or v == "" else v


def _stats_from_thrift(obj: Any) -> ColumnStats | None:
    """A Thrift ``ColumnStatisticsObj`` as the model's typed statistics."""
    data = obj.statsData
    if data.longStats is not None:
        s = data.longStats
        return ColumnStats(s.numNulls, s.lowValue, s.highValue)
    if data.doubleStats is not None:
        s = data.doubleStats
        return ColumnStats(s.numNulls, s.lowValue, s.highValue)
    if data.decimalStats is not None:
        s = data.decimalStats

        def dec(d: Any) -> Decimal | None:
            if d is None:
                return None
            return Decimal(int.from_bytes(d.unscaled, "big", signed=True)).scaleb(-d.scale)

        return ColumnStats(s.numNulls, dec(s.lowValue), dec(s.highValue))
    if data.dateStats is not None:
        s = data.dateStats

        def day(d: Any) -> datetime.date | None:
            return None if d is None else _EPOCH + datetime.timedelta(days=d.daysSinceEpoch)

        return ColumnStats(s.numNulls, day(s.lowValue), day(s.highValue))
    for s in (data.stringStats, data.booleanStats, data.binaryStats):
        if s is not None:
            return ColumnStats(s.numNulls, None, None)
    return None


def _stats_to_thrift(name: str, hive_type: str, stats: ColumnStats) -> Any | None:
    """The model's statistics of one column as a Thrift ``ColumnStatisticsObj`` (None: HMS
    keeps no statistics of this type)."""
    _, t = _hive()
    b = base_type(hive_type)
    nulls = stats.num_nulls or 0
    if b in _INTEGER_TYPES:
        data = t.ColumnStatisticsData(
            longStats=t.LongColumnStatsData(
                lowValue=None if stats.low is None else int(stats.low),
                highValue=None if stats.high is None else int(stats.high),
                numNulls=nulls,
                numDVs=0,
            )
        )
    elif b in ("float", "double"):
        data = t.ColumnStatisticsData(
            doubleStats=t.DoubleColumnStatsData(
                lowValue=None if stats.low is None else float(stats.low),
                highValue=None if stats.high is None else float(stats.high),
                numNulls=nulls,
                numDVs=0,
            )
        )
    elif b == "decimal":

        def dec(v: Any) -> Any:
            if v is None:
                return None
            scale = max(0, -int(Decimal(v).as_tuple().exponent))
            unscaled = int(Decimal(v).scaleb(scale))
            size = max(1, (unscaled.bit_length() + 8) // 8)
            return t.Decimal(unscaled=unscaled.to_bytes(size, "big", signed=True), scale=scale)

        data = t.ColumnStatisticsData(
            decimalStats=t.DecimalColumnStatsData(
                lowValue=dec(stats.low), highValue=dec(stats.high), numNulls=nulls, numDVs=0
            )
        )
    elif b == "date":

        def day(v: Any) -> Any:
            return None if v is None else t.Date(daysSinceEpoch=(v - _EPOCH).days)

        data = t.ColumnStatisticsData(
            dateStats=t.DateColumnStatsData(
                lowValue=day(stats.low), highValue=day(stats.high), numNulls=nulls, numDVs=0
            )
        )
    elif b in ("string", "varchar", "char"):
        data = t.ColumnStatisticsData(
            stringStats=t.StringColumnStatsData(
                maxColLen=0, avgColLen=0.0, numNulls=nulls, numDVs=0
            )
        )
    elif b == "boolean":
        data = t.ColumnStatisticsData(
            booleanStats=t.BooleanColumnStatsData(numTrues=0, numFalses=0, numNulls=nulls)
        )
    else:
        return None
    return t.ColumnStatisticsObj(colName=name, colType=hive_type, statsData=data)


class ThriftMetastore(MetastoreCatalog):
    """The metastore over a Hive Metastore's Thrift API (see the module docstring). The same
    public catalogue methods as ``Metastore``; transactions and write ids are refused."""

    #: ``CachedMetastore`` answers a query's snapshot from its entries after polling the
    #: notification log (one call), instead of asking the server per table.
    snapshots_from_log = True

    def __init__(
        self,
        uri: str,
        *,
        timeout: float = 10.0,
        max_retries: int = 3,
        min_backoff: float = 1.0,
        max_backoff: float = 1.0,
        partition_batch_size: int = 100,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.backend = ThriftConnection(
            parse_thrift_uris(uri),
            timeout=timeout,
            max_retries=max_retries,
            min_backoff=min_backoff,
            max_backoff=max_backoff,
            sleep=sleep,
        )
        self.partition_batch_size = max(1, partition_batch_size)
        self._lock = threading.RLock()

    # -- plumbing ---------------------------------------------------------------------
    def _call(self, name: str, *args: Any) -> Any:
        _, t = _hive()
        with self._lock:
            try:
                return self.backend.call(name, *args)
            except t.NoSuchObjectException as e:
                raise MetastoreError(f"{self.describe()}: {name}: {e.message}") from e
            except (t.MetaException, t.InvalidOperationException, t.InvalidObjectException) as e:
                raise MetastoreError(f"{self.describe()}: {name} failed: {e.message}") from e
            except t.AlreadyExistsException as e:
                raise AlreadyExistsError(f"{self.describe()}: {e.message}") from e

    def describe(self) -> str:
        return self.backend.describe()

    def close(self) -> None:
        with self._lock:
            self.backend.close()

    def atomically(self) -> AbstractContextManager[None]:
        """No multi-call transaction exists over Thrift: each call is atomic on its own."""
        return nullcontext()

    def _refuse(self, what: str) -> NoReturn:
        raise MetastoreError(
            f"{what} needs write ids, which the Hive Metastore {self.describe()} (Hive 2.3's "
            f"API) does not have: managed insert-only ACID tables cannot be written through "
            f"hive.metastore.uri; nothing was written. Write to an EXTERNAL table (appends: "
            f"new files and partitions), or use hive.metastore.url"
        )

    # -- transactions: refused ---------------------------------------------------------------
    def open_transaction(self, *args: Any, **kwargs: Any) -> int:
        self._refuse("a transaction")

    def commit_transaction(self, txn_id: int) -> None:
        self._refuse("committing a transaction")

    def abort_transaction(self, txn_id: int) -> None:
        self._refuse("aborting a transaction")

    def heartbeat(self, txn_id: int | None = None, lock_id: int | None = None) -> None:
        self._refuse("a transaction heartbeat")

    def allocate_write_id(self, txn_id: int, database: str, table: str) -> int:
        self._refuse(f"a write id for {database}.{table}")

    def get_valid_write_ids(
        self, names: Iterable[str], txn_id: int | None = None
    ) -> dict[str, ValidWriteIdList | None]:
        """Every table here is read without write ids (see the module docstring)."""
        return {name: None for name in names}

    # -- databases --------------------------------------------------------------------
    def list_databases(self) -> list[str]:
        return sorted(self._call("get_all_databases"))

    def get_database(self, name: str) -> Database:
        name = name.lower()
        _, t = _hive()
        try:
            with self._lock:
                db = self.backend.call("get_database", name)
        except t.NoSuchObjectException:
            raise NoSuchObjectError("database", name, self.list_databases()) from None
        return Database(0, db.name, _location(db.locationUri) or None)

    def create_database(
        self, name: str, location: str | None = None, if_not_exists: bool = True
    ) -> Database:
        name = check_name("database", name)
        _, t = _hive()
        try:
            with self._lock:
                self.backend.call(
                    "create_database",
                    t.Database(name=name, locationUri=location, parameters={}),
                )
        except t.AlreadyExistsException:
            if not if_not_exists:
                raise AlreadyExistsError(f"database '{name}' already exists") from None
        except t.MetaException as e:
            raise MetastoreError(f"{self.describe()}: create_database {name}: {e.message}") from e
        return self.get_database(name)

    def drop_database(self, name: str, cascade: bool = False) -> None:
        self._call("drop_database", name, False, cascade)

    # -- tables -----------------------------------------------------------------------
    def list_tables(self, database: str) -> list[str]:
        self.get_database(database)
        return sorted(self._call("get_all_tables", database.lower()))

    def _thrift_table(self, database: str, name: str) -> Any:
        _, t = _hive()
        database, name = database.lower(), name.lower()
        try:
            with self._lock:
                return self.backend.call("get_table", database, name)
        except t.NoSuchObjectException:
            self.get_database(database)  # names the databases when that is what is missing
            raise NoSuchObjectError(
                "table",
                f"{database}.{name}",
                (f"{database}.{n}" for n in self.list_tables(database)),
            ) from None

    def get_table(self, database: str, name: str) -> Table:
        raw = self._thrift_table(database, name)
        table = self._table_from_thrift(raw)
        if not table.is_partitioned and table.columns:
            _, t = _hive()
            result = self._call(
                "get_table_statistics_req",
                t.TableStatsRequest(
                    dbName=table.database,
                    tblName=table.name,
                    colNames=[c.name for c in table.columns],
                ),
            )
            stats = {o.colName: _stats_from_thrift(o) for o in result.tableStats or ()}
            table = Table(
                table.database,
                table.name,
                table.table_type,
                table.location,
                table.columns,
                table.partition_keys,
                table.parameters,
                {k: v for k, v in stats.items() if v is not None},
                table.id,
                table.storage_format,
            )
        return table

    def _table_from_thrift(self, raw: Any) -> Table:
        params = dict(raw.parameters or {})
        if params.get(TRANSACTIONAL_PARAM, "").lower() == "true":
            raise MetastoreError(
                f"table {raw.dbName}.{raw.tableName} on the Hive Metastore {self.describe()} "
                f"is transactional (ACID): reading it needs write ids, which the Hive 2.3 "
                f"API does not have"
            )
        sd = raw.sd
        provider = params.get(SPARK_PROVIDER_PARAM, "").lower()
        serde = sd.serdeInfo.serializationLib if sd.serdeInfo else None
        storage_format = format_of(sd.inputFormat, serde, provider)
        if storage_format is None:
            raise MetastoreError(
                f"table {raw.dbName}.{raw.tableName} on the Hive Metastore {self.describe()} "
                f"is stored as {provider or sd.inputFormat or serde}: tiered_hive reads "
                f"{' and '.join(FORMATS)} tables only"
            )
        placeholder = [(c.name, c.type) for c in sd.cols or ()] == [("col", "array<string>")]
        if provider and placeholder:
            raise MetastoreError(
                f"table {raw.dbName}.{raw.tableName} on the Hive Metastore {self.describe()} "
                f"was stored by Spark in a form only Spark reads (its columns are in table "
                f"properties, not in the Hive schema): tiered_hive cannot read it"
            )
        return Table(
            raw.dbName,
            raw.tableName,
            EXTERNAL_TABLE,  # plain Hive layout, no write ids (see the module docstring)
            _location(sd.location),
            tuple(Column(c.name, c.type) for c in sd.cols or ()),
            tuple(Column(c.name, c.type) for c in raw.partitionKeys or ()),
            params,
            {},
            int(raw.createTime),
            storage_format,
        )

    def table_snapshots(
        self, names: Iterable[str], txn_id: int | None = None
    ) -> dict[str, TableSnapshot]:
        """Id and type of each ``db.table`` (one call per database; no write ids)."""
        wanted = {n: parse_table_name(n, default_database=None) for n in dict.fromkeys(names)}
        by_db: dict[str, list[str]] = {}
        for db, tbl in wanted.values():
            by_db.setdefault(db, []).append(tbl)
        found: dict[tuple[str, str], Any] = {}
        for db, tables in by_db.items():
            for raw in self._call("get_table_objects_by_name", db, tables) or ():
                found[(raw.dbName.lower(), raw.tableName.lower())] = raw
        out = {}
        for name, key in wanted.items():
            raw = found.get(key)
            if raw is None:
                self._thrift_table(*key)  # raises NoSuchObjectError naming what exists
                raise MetastoreError(f"table {name} disappeared while its snapshot was read")
            table = self._table_from_thrift(raw)
            out[name] = TableSnapshot(name, int(raw.createTime), table.table_type, None)
        return out

    def create_table(
        self,
        table: Table,
        partitions: Sequence[Partition] = (),
        *,
        replace: bool = False,
        write_id: int | None = None,
    ) -> Table:
        """Create an EXTERNAL ``table`` (Parquet), its statistics and partitions: one call
        each for the table, its statistics, and each batch of partitions. Not one
        transaction: a failure after the table call leaves the table (with fewer partitions);
        ``replace`` drops the old table first. A managed table is refused (no write ids)."""
        if table.table_type == MANAGED_TABLE or write_id is not None:
            self._refuse(f"creating the managed table {table.qualified_name}")
        database = check_name("database", table.database)
        name = check_name("table", table.name)
        _, t = _hive()
        self.get_database(database)
        if replace:
            try:
                self.drop_table(database, name)
            except NoSuchObjectError:
                pass  # nothing to replace
        params = {**table.parameters, "EXTERNAL": "TRUE"}
        raw = t.Table(
            tableName=name,
            dbName=database,
            owner=None,
            sd=self._storage(table.columns, table.location, table.storage_format),
            partitionKeys=[t.FieldSchema(c.name, c.type, None) for c in table.partition_keys],
            parameters=params,
            tableType=EXTERNAL_TABLE,
        )
        try:
            with self._lock:
                self.backend.call("create_table", raw)
        except t.AlreadyExistsException:
            raise AlreadyExistsError(
                f"table '{database}.{name}' already exists (to replace it: "
                f"`raptorx table register --replace`, or replace=True)"
            ) from None
        except (t.MetaException, t.InvalidObjectException) as e:
            raise MetastoreError(f"{self.describe()}: create_table {database}.{name}: {e}") from e
        created = self.get_table(database, name)
        if table.stats and not table.is_partitioned:
            self._set_stats([self._table_stats(created, table.stats, None)])
        if partitions:
            self.add_partitions(created, partitions)
        return self.get_table(database, name)

    def _storage(self, columns: Sequence[Column], location: str, storage_format: str) -> Any:
        _, t = _hive()
        classes = hive_classes(storage_format)
        return t.StorageDescriptor(
            cols=[t.FieldSchema(c.name, c.type, None) for c in columns],
            location=location,
            inputFormat=classes.input_format,
            outputFormat=classes.output_format,
            compressed=False,
            numBuckets=-1,
            serdeInfo=t.SerDeInfo(serializationLib=classes.serde, parameters={}),
            bucketCols=[],
            sortCols=[],
            parameters={},
        )

    def _table_stats(
        self, table: Table, stats: dict[str, ColumnStats], part_name: str | None
    ) -> Any | None:
        _, t = _hive()
        types = {c.name: c.type for c in table.all_columns}
        objs = [
            o
            for name, s in stats.items()
            if name in types and (o := _stats_to_thrift(name, types[name], s)) is not None
        ]
        if not objs:
            return None
        desc = t.ColumnStatisticsDesc(
            isTblLevel=part_name is None,
            dbName=table.database,
            tableName=table.name,
            partName=part_name,
            lastAnalyzed=int(time.time()),
        )
        return t.ColumnStatistics(statsDesc=desc, statsObj=objs)

    def _set_stats(self, stats: Sequence[Any | None]) -> None:
        _, t = _hive()
        present = [s for s in stats if s is not None]
        for i in range(0, len(present), self.partition_batch_size):
            self._call(
                "set_aggr_stats_for",
                t.SetPartitionsStatsRequest(colStats=present[i : i + self.partition_batch_size]),
            )

    def alter_table_parameters(
        self,
        database: str,
        name: str,
        parameters: dict[str, str | None],
        write_id: int | None = None,
    ) -> Table:
        """Set table parameters (``None`` removes a key): one get and one alter call."""
        if write_id is not None:
            self._refuse(f"altering {database}.{name} under a write id")
        raw = self._thrift_table(database, name)
        raw.parameters = merged_parameters(raw.parameters, parameters)
        self._call("alter_table", raw.dbName, raw.tableName, raw)
        return self.get_table(database, name)

    def drop_table(self, database: str, name: str) -> None:
        """Drop the table's metadata (never its files: tables here are external)."""
        raw = self._thrift_table(database, name)
        self._call("drop_table", raw.dbName, raw.tableName, False)

    # -- partitions -------------------------------------------------------------------
    def _thrift_partition(self, table: Table, p: Partition) -> Any:
        _, t = _hive()
        return t.Partition(
            values=[_value_out(v) for v in p.values],
            dbName=table.database,
            tableName=table.name,
            sd=self._storage(table.columns, p.location, table.format_of(p)),
            parameters=dict(p.parameters),
        )

    def add_partitions(
        self, table: Table, partitions: Sequence[Partition], write_id: int | None = None
    ) -> list[Partition]:
        """Add partitions and their statistics: one ``add_partitions`` and one
        ``set_aggr_stats_for`` call per ``hive.metastore.partition-batch-size.max``
        partitions. Returns them as stored."""
        if write_id is not None:
            self._refuse(f"adding partitions to {table.qualified_name} under a write id")
        current = self.get_table(table.database, table.name)
        for i in range(0, len(partitions), self.partition_batch_size):
            batch = partitions[i : i + self.partition_batch_size]
            self._call("add_partitions", [self._thrift_partition(current, p) for p in batch])
        self._set_stats(
            [
                self._table_stats(
                    current, p.stats, partition_name(current.partition_keys, p.values)
                )
                for p in partitions
                if p.stats
            ]
        )
        names = [partition_name(current.partition_keys, p.values) for p in partitions]
        return self.get_partitions_by_names(current, names)

    def alter_partition(
        self, table: Table, partition: Partition, write_id: int | None = None
    ) -> Partition:
        """Replace one partition's location, parameters and statistics (two calls)."""
        if write_id is not None:
            self._refuse(f"altering a partition of {table.qualified_name} under a write id")
        current = self.get_table(table.database, table.name)
        self._call(
            "alter_partition",
            current.database,
            current.name,
            self._thrift_partition(current, partition),
        )
        name = partition_name(current.partition_keys, partition.values)
        if partition.stats:
            self._set_stats([self._table_stats(current, partition.stats, name)])
        return self.get_partitions_by_names(current, [name])[0]

    def set_partition_parameters(
        self, table: Table, values: Sequence[str | None], params: dict[str, str | None]
    ) -> None:
        """Set (``None``: remove) parameters of one partition: one get and one alter call."""
        name = partition_name(table.partition_keys, values)
        raw = self._call("get_partition_by_name", table.database, table.name, name)
        raw.parameters = merged_parameters(raw.parameters, params)
        self._call("alter_partition", table.database, table.name, raw)

    def drop_partitions(
        self, table: Table, values: Sequence[Sequence[str | None]], write_id: int | None = None
    ) -> None:
        """Drop partitions (metadata only; one call each: HMS 2.3's batch drop takes
        expressions, not names)."""
        if write_id is not None:
            self._refuse(f"dropping partitions of {table.qualified_name} under a write id")
        for vals in values:
            self._call(
                "drop_partition_by_name",
                table.database,
                table.name,
                partition_name(table.partition_keys, vals),
                False,
            )

    def partition_names(self, table: Table) -> list[str]:
        """Every partition name of ``table`` (one call)."""
        return list(self._call("get_partition_names", table.database, table.name, -1))

    def list_partitions(
        self, table: Table, snapshot: QuerySnapshot | None = None
    ) -> list[Partition]:
        """Every partition of ``table`` with parameters and statistics, in name order:
        ``get_partition_names``, then batches by name (see the module docstring)."""
        check_snapshot_table(table, snapshot)
        return self.get_partitions_by_names(table, sorted(self.partition_names(table)))

    def get_partitions_by_names(self, table: Table, names: Sequence[str]) -> list[Partition]:
        """The partitions named (``k=v/...``), in the order given, with their statistics:
        two calls per ``hive.metastore.partition-batch-size.max`` names."""
        _, t = _hive()
        columns = [c.name for c in table.columns]
        out: list[Partition] = []
        for i in range(0, len(names), self.partition_batch_size):
            batch = list(names[i : i + self.partition_batch_size])
            raws = self._call("get_partitions_by_names", table.database, table.name, batch)
            stats: dict[str, Any] = {}
            if columns:
                result = self._call(
                    "get_partitions_statistics_req",
                    t.PartitionsStatsRequest(
                        dbName=table.database, tblName=table.name, colNames=columns, partNames=batch
                    ),
                )
                stats = result.partStats or {}
            by_name = {}
            for raw in raws:
                values = tuple(_value_in(v) for v in raw.values)
                pname = partition_name(table.partition_keys, values)
                own_format = self._partition_format(table, pname, raw.sd)
                part_stats = {
                    o.colName: s
                    for o in stats.get(pname, ())
                    if (s := _stats_from_thrift(o)) is not None
                }
                by_name[pname] = Partition(
                    values,
                    _location(raw.sd.location),
                    dict(raw.parameters or {}),
                    part_stats,
                    int(raw.createTime),
                    own_format,
                )
            out.extend(by_name[n] for n in batch if n in by_name)
        return out

    def _partition_format(self, table: Table, pname: str, sd: Any) -> str | None:
        """The format partition ``pname``'s storage descriptor names when it is not its
        table's (Hive keeps one per partition: a table may mix ORC and Parquet partitions),
        else None; a MetastoreError naming the partition for a format tiered_hive does not
        read."""
        serde = sd.serdeInfo.serializationLib if sd.serdeInfo else None
        if not sd.inputFormat and not serde:
            return None  # nothing recorded: the table's
        own = format_of(sd.inputFormat, serde, None)
        if own is None:
            raise MetastoreError(
                f"partition {pname} of {table.qualified_name} on the Hive Metastore "
                f"{self.describe()} is stored as {sd.inputFormat or serde}: tiered_hive reads "
                f"{' and '.join(FORMATS)} files"
            )
        return None if own == table.storage_format else own

    def get_partitions_by_filter(self, table: Table, filter_text: str) -> list[Partition]:
        """The partitions HMS selects with its filter language (``ds > "2024-01-01"``): one
        call for the names matched, then batches by name."""
        raws = self._call("get_partitions_by_filter", table.database, table.name, filter_text, -1)
        names = [
            partition_name(table.partition_keys, tuple(_value_in(v) for v in r.values))
            for r in raws
        ]
        return self.get_partitions_by_names(table, sorted(names))

    def partition_counts(self) -> dict[int, int]:
        """``{table id: number of partitions}`` of every table (one call per table: HMS has
        no bulk count; used by the cache's prewarm only)."""
        out = {}
        for db in self.list_databases():
            for name in self.list_tables(db):
                raw = self._thrift_table(db, name)
                out[int(raw.createTime)] = len(
                    self._call("get_partition_names", raw.dbName, raw.tableName, -1)
                )
        return out

    # -- the notification log ---------------------------------------------------------------
    def current_notification_id(self) -> int:
        return int(self._call("get_current_notificationEventId").eventId)

    def notifications_after(
        self, after_event_id: int = 0, limit: int | None = None
    ) -> list[NotificationEvent]:
        """HMS's events after ``after_event_id`` (one call), as the model's events: no
        transaction or write id (HMS 2.3 has none), the JSON message decoded."""
        _, t = _hive()
        response = self._call(
            "get_next_notification",
            t.NotificationEventRequest(lastEvent=after_event_id, maxEvents=limit),
        )
        out = []
        for e in response.events or ():
            try:
                message = json.loads(e.message) if e.message else {}
            except ValueError:
                message = {}  # another listener's format: the names in the row suffice
            out.append(
                NotificationEvent(
                    int(e.eventId),
                    int(e.eventTime),
                    e.eventType,
                    e.dbName.lower() if e.dbName else None,
                    e.tableName.lower() if e.tableName else None,
                    None,
                    None,
                    message,
                )
            )
        return out
