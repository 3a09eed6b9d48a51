"""Writing a managed table as a Hive insert-only ACID transaction (no Spark here).

A write has three steps, run where Spark runs them (``datasource/writer.py`` is the adapter):

1. ``begin_write`` (driver, once): resolve the target table (an existing MANAGED table, or
   the one the write will create), check the schema, open a metastore transaction and name
   the write's staging directory after it: ``<table location>/.raptorx-staging-<txn>-<token>``
   (hidden: readers and listings skip names starting with ``.``).
2. ``write_task`` (executors, once per task): rows grouped by the partition keys, one Parquet
   file per partition per task under the staging directory; returns each file's URL, size,
   row count and footer statistics. Tasks heartbeat the transaction, so a long job does not
   time out; a task whose transaction has gone (aborted, expired) fails.
3. ``commit_write`` (driver, once, after every task succeeded), in this order: make sure the
   table exists (created MANAGED now, never before the data is there), take the locks
   (append: SHARED_WRITE on each written partition, or on the table when unpartitioned;
   overwrite: EXCLUSIVE on the table) through ``LockManager``, allocate the table's write id,
   move the files into ``delta_<wid>_<wid>/`` (append) or ``base_<wid>/`` (overwrite) of their
   partition, add/alter the partitions with statistics, row counts and ``writeId`` (an
   unpartitioned table: its parameters), and commit the transaction. Any error before the
   commit aborts the transaction and removes what the commit itself created (see below);
   ``abort_write`` (a failed job) aborts it and removes the staging directory.

Who may delete what on rollback: a write publishes only into directories it created itself.
Each ``base_<wid>/`` or ``delta_<wid>_<wid>/`` is created exclusively (a local ``mkdir`` that
fails when the directory exists; on an object store, a check that no object has that prefix):
one that already exists belongs to someone else (another table or another metastore using
the same directory) and fails the write with ``LocationInUseError`` instead of being written
into. A rollback removes exactly the files it moved or wrote, then the directories it
created if they are empty: never a directory, or a file, it did not make. A new MANAGED table
never adopts a location that already holds visible files (checked when the write begins and
again just before the table is created): with write ids per metastore, another table's
``base_0000001`` would read as the new table's. Limit: on an object store the check and the
first move are not atomic (two metastores committing the same write id into one directory
in the same instant can both pass); one metastore's write ids never collide.

Visibility: data is moved under an open write id, which no snapshot reads; the commit makes
all of it visible at once. Files are moved *before* the partition metadata changes, so a
listing made under the new metadata (``writeId``) always holds every file of that write id
(what lets the planner cache managed listings by version). An overwrite replaces the whole
table (Spark's truncate): a partition it writes no row to gets a ``base_<wid>/`` holding one
Parquet file of no rows (a directory needs a file to exist on an object store, and the file
must be a visible one for listings, which skip hidden names, to see the base) and reads as
empty; partitions are never dropped, so a reader of an older snapshot keeps reading
them whole.

Object stores: a "move" is ``fs.mv``: a rename on local disks, a server-side copy + delete on
S3. It need not be atomic: nothing under an open write id is read.

Limits: metastore writes are not transactional with the commit. A commit that dies after
recording partitions leaves them (a new one reads as empty; the statistics of an appended
one include rows that never became visible: wider bounds and a larger ``numRows``, still
bounds, never a wrong pruning). A partition's statistics are its last write's (an
overwrite's replace the old ones before its commit): the planner prunes a managed partition
by statistics only for snapshots that see its ``writeId``. Unpartitioned managed tables record
no column statistics (HMS's
table statistics cannot be altered under a write id here), so they are never pruned by them.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from raptorx_py.errors import AlreadyExistsError, LocationInUseError, NoSuchObjectError, SchemaError
from raptorx_py.hive_types import arrow_schema_for_spark, arrow_type_for_spark, encode_value
from raptorx_py.metastore.locks import LockManager, Operation, lock_components
from raptorx_py.metastore.model import (
    EXTERNAL_TABLE,
    HIVE_DEFAULT_PARTITION,
    MANAGED_TABLE,
    Column,
    ColumnStats,
    Partition,
    Table,
)
from raptorx_py.metastore.partition_names import partition_name
from raptorx_py.metastore.store import WRITE_ID_PARAM, open_metastore
from raptorx_py.metrics import counters
from raptorx_py.names import check_name
from raptorx_py.storage.acid_layout import base_dir_name, delta_dir_name
from raptorx_py.storage.fs import filesystem_for, join_url, split_url
from raptorx_py.storage.parquet_files import footer_stats, read_metadata
from raptorx_py.table_registration import merge_stats

log = logging.getLogger(__name__)

STAGING_PREFIX = ".raptorx-staging-"
#: The Parquet file of no rows that makes an empty ``base_<wid>/`` exist and be listed.
EMPTY_BASE_FILE = "empty-base.parquet"
#: Parameters of a table this path creates (Hive's insert-only transactional table).
MANAGED_PARAMETERS = {"transactional": "true", "transactional_properties": "insert_only"}
AGENT = "raptorx_py writer"


def staging_dir_name(txn_id: int, token: str | None = None) -> str:
    return f"{STAGING_PREFIX}{txn_id}-{token or uuid.uuid4().hex[:12]}"


def staging_txn_id(name: str) -> int | None:
    """The transaction a staging directory belongs to, or None for any other name."""
    name = name.rstrip("/").rsplit("/", 1)[-1]
    if not name.startswith(STAGING_PREFIX):
        return None
    txn, _, _ = name[len(STAGING_PREFIX) :].partition("-")
    return int(txn) if txn.isdigit() else None


def warehouse_url(settings) -> str:
    """``hive.metastore.warehouse.dir`` as a URL (a local path becomes ``file://...``)."""
    raw = settings.warehouse_dir
    if not urlparse(raw).scheme:
        return "file://" + os.path.abspath(os.path.expanduser(raw))
    return raw.rstrip("/")


@dataclass(frozen=True)
class WriteTarget:
    """The table a write goes to, as decided when it began. ``table_id`` is None when the
    write creates the table (at commit)."""

    database: str
    name: str
    location: str
    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...]
    table_id: int | None

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.name}"

    @property
    def all_columns(self) -> tuple[Column, ...]:
        return self.columns + self.partition_keys

    def as_table(self) -> Table:
        empty = {} if self.partition_keys else {"numRows": "0", "numFiles": "0", "totalSize": "0"}
        return Table(
            self.database,
            self.name,
            MANAGED_TABLE,
            self.location,
            self.columns,
            self.partition_keys,
            {**MANAGED_PARAMETERS, **empty},
        )


@dataclass(frozen=True)
class WriteJob:
    """One running write: its target, transaction and staging directory (picklable)."""

    target: WriteTarget
    txn_id: int
    staging_url: str
    overwrite: bool


@dataclass(frozen=True)
class WrittenFile:
    url: str  # in the staging directory
    values: tuple[str | None, ...]  # partition values, canonical text (None: null)
    size: int
    num_rows: int
    stats: dict[str, ColumnStats] = field(default_factory=dict)


@dataclass(frozen=True)
class CommitResult:
    write_id: int | None  # None: an append of nothing (no write id was needed)
    files: int
    rows: int
    partitions_added: int
    partitions_altered: int


# -- 1. begin (driver) ----------------------------------------------------------------------
def parse_partition_by(text: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    keys = tuple(i.strip() for i in items if i and i.strip())
    return keys or None


def resolve_target(
    metastore,
    settings,
    database: str,
    name: str,
    columns: Sequence[Column],
    partition_by: Sequence[str] | None,
) -> WriteTarget:
    """The table ``database.name`` as the incoming ``columns`` (name, Hive type) will be
    written to it: an existing MANAGED table whose columns they match (any order), or a new
    table with these columns, partitioned by ``partition_by`` (in that order)."""
    qualified = f"{database}.{name}"
    by_name = {c.name.lower(): c for c in columns}
    if len(by_name) != len(columns):
        raise SchemaError(
            f"the data written to {qualified} has duplicate column names: "
            f"{', '.join(c.name for c in columns)}"
        )
    try:
        table = metastore.get_table(database, name)
    except NoSuchObjectError:
        table = None
    if table is not None:
        if table.table_type == EXTERNAL_TABLE:
            raise SchemaError(
                f"{qualified} is an EXTERNAL table: tiered_hive writes MANAGED "
                f"tables only (an external table's files belong to its owner)"
            )
        _check_columns(table, columns)
        keys = tuple(k.name for k in table.partition_keys)
        if partition_by is not None and tuple(partition_by) != keys:
            raise SchemaError(
                f"{qualified} is partitioned by ({', '.join(keys) or 'nothing'}), "
                f"but the write asks for ({', '.join(partition_by)})"
            )
        return WriteTarget(
            database,
            name,
            table.location.rstrip("/"),
            table.columns,
            table.partition_keys,
            table.id,
        )
    keys = tuple(partition_by or ())
    missing = [k for k in keys if k.lower() not in by_name]
    if missing:
        raise SchemaError(
            f"partition key(s) {', '.join(missing)} of the new table {qualified} "
            f"are not columns of the data: {', '.join(c.name for c in columns)}"
        )
    if len(keys) == len(columns) and keys:
        raise SchemaError(
            f"the new table {qualified} would have no data column: every column is a partition key"
        )
    key_set = {k.lower() for k in keys}
    data = tuple(c for c in columns if c.name.lower() not in key_set)
    key_cols = tuple(by_name[k.lower()] for k in keys)
    try:
        db_location = metastore.get_database(database).location
    except NoSuchObjectError:
        db_location = None
    base = db_location.rstrip("/") if db_location else f"{warehouse_url(settings)}/{database}.db"
    location = f"{base}/{name}"
    check_location_free(settings, qualified, location)
    return WriteTarget(database, name, location, data, key_cols, None)


def check_location_free(settings, qualified: str, location: str) -> None:
    """Refuse to create the MANAGED table ``qualified`` at ``location`` when the directory
    holds any visible entry (hidden ``.``/``_`` names, e.g. writes' staging, are skipped):
    a new table must never adopt another table's files or ACID directories."""
    fs, path = filesystem_for(location, settings)
    try:
        entries = fs.ls(path, detail=False)
    except FileNotFoundError:
        return
    visible = sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in entries)
    visible = [n for n in visible if n and not n.startswith((".", "_"))]
    if visible:
        shown = ", ".join(visible[:5]) + (", ..." if len(visible) > 5 else "")
        raise LocationInUseError(
            f"cannot create the MANAGED table {qualified} at {location}: the directory "
            f"already holds {shown} (the files of another table, or of a table of another "
            f"metastore); a new table never adopts existing files. Remove them, or give the "
            f"database another location"
        )


def _check_columns(table: Table, columns: Sequence[Column]) -> None:
    have = {c.name.lower(): c for c in table.all_columns}
    got = {c.name.lower(): c for c in columns}
    if set(have) != set(got):
        raise SchemaError(
            f"the data written to {table.qualified_name} has columns "
            f"({', '.join(c.name for c in columns)}), the table has "
            f"({', '.join(c.name for c in table.all_columns)})"
        )
    for key, col in have.items():
        if _normal_type(got[key].type) != _normal_type(col.type):
            raise SchemaError(
                f"column '{col.name}' of {table.qualified_name} is {col.type}, "
                f"but the data written to it is {got[key].type}"
            )


def _normal_type(t: str) -> str:
    return t.replace(" ", "").lower().replace("integer", "int")


def begin_write(
    metastore,
    settings,
    database: str,
    name: str,
    columns: Sequence[Column],
    overwrite: bool,
    partition_by: Sequence[str] | None = None,
) -> WriteJob:
    """Resolve the target and open the write's transaction (see the module docstring)."""
    database, name = check_name("database", database), check_name("table", name)
    target = resolve_target(metastore, settings, database, name, columns, partition_by)
    txn_id = metastore.open_transaction(agent_info=f"{AGENT} {target.qualified_name}")
    staging = f"{target.location}/{staging_dir_name(txn_id)}"
    return WriteJob(target, txn_id, staging, overwrite)


# -- 2. tasks (executors) -----------------------------------------------------------------
class TxnHeartbeat:
    """Keeps a transaction alive from a task: a heartbeat now and then at most every
    ``interval`` seconds (by ``clock``); no thread."""

    def __init__(
        self,
        settings,
        txn_id: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval: float | None = None,
        metastore=None,
    ):
        self.settings, self.txn_id, self.clock = settings, txn_id, clock
        self.interval = settings.txn_timeout / 3 if interval is None else interval
        self.metastore = metastore  # None: open one per beat (a task has none of its own)
        self._last: float | None = None

    def beat(self, force: bool = False) -> None:
        now = self.clock()
        if not force and self._last is not None and now - self._last < self.interval:
            return
        if self.metastore is not None:
            self.metastore.heartbeat(txn_id=self.txn_id)
        else:
            with open_metastore(self.settings) as ms:
                ms.heartbeat(txn_id=self.txn_id)
        self._last = now


def conform(batch: pa.RecordBatch | pa.Table, target: WriteTarget) -> pa.Table:
    """The batch's columns in the table's order, cast to the Arrow types the table's Hive
    types read back as (so written files and reads agree)."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    names = {n.lower(): n for n in table.column_names}
    arrays, fields = [], []
    for c in target.all_columns:
        if c.name.lower() not in names:
            raise SchemaError(
                f"the data written to {target.qualified_name} lacks column "
                f"'{c.name}' (it has {', '.join(table.column_names)})"
            )
        t = arrow_type_for_spark(c.type)
        arrays.append(table.column(names[c.name.lower()]).cast(t))
        fields.append(pa.field(c.name, t, nullable=True))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def split_by_partition(
    table: pa.Table, target: WriteTarget
) -> Iterable[tuple[tuple[str | None, ...], pa.Table]]:
    """``(partition values as canonical text, rows of that partition without the key
    columns)``; one sort, then runs of equal keys."""
    data_names = [c.name for c in target.columns]
    if not target.partition_keys:
        if table.num_rows:
            yield (), table.select(data_names)
        return
    if table.num_rows == 0:
        return
    keys = [k.name for k in target.partition_keys]
    order = pc.sort_indices(table, sort_keys=[(k, "ascending", "at_end") for k in keys])
    table = table.take(order)
    change = np.zeros(table.num_rows - 1, dtype=bool)
    for k in keys:
        col = table.column(k).combine_chunks()
        a, b = col.slice(1), col.slice(0, len(col) - 1)
        diff = pc.fill_null(pc.not_equal(a, b), False)
        diff = pc.or_(diff, pc.xor(pc.is_null(a), pc.is_null(b)))
        change |= diff.to_numpy(zero_copy_only=False)
    starts = [0, *(np.flatnonzero(change) + 1).tolist()]
    ends = starts[1:] + [table.num_rows]
    for s, e in zip(starts, ends):
        part = table.slice(s, e - s)
        values = tuple(
            _partition_text(part.column(k.name)[0].as_py(), k.type) for k in target.partition_keys
        )
        yield values, part.select(data_names)


def _partition_text(value, hive_type: str) -> str | None:
    if value is None:
        return None
    text = encode_value(value, hive_type)
    return text if text != "" else None  # Hive writes an empty value as the null partition


class _OpenFile:
    def __init__(self, fs, path: str, schema: pa.Schema):
        self.fs, self.path = fs, path
        self.handle = fs.open(path, "wb")
        self.writer = pq.ParquetWriter(self.handle, schema)
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        self.writer.write_table(table)
        self.rows += table.num_rows

    def close(self) -> tuple[int, pq.FileMetaData | None]:
        self.writer.close()
        metadata = getattr(getattr(self.writer, "writer", None), "metadata", None)
        size = self.handle.tell()
        self.handle.close()
        return size, metadata


def write_task(
    settings,
    job: WriteJob,
    batches: Iterable[pa.RecordBatch],
    *,
    heartbeat: TxnHeartbeat | None = None,
) -> tuple[WrittenFile, ...]:
    """Write one task's rows into the staging directory; see the module docstring. On any
    error the files this task wrote are removed before the error propagates."""
    target = job.target
    heartbeat = heartbeat or TxnHeartbeat(settings, job.txn_id)
    heartbeat.beat(force=True)
    fs, staging = filesystem_for(job.staging_url, settings)
    scheme, _ = split_url(job.staging_url)
    schema = arrow_schema_for_spark(target.columns)
    task_token = uuid.uuid4().hex[:16]
    open_files: dict[tuple, _OpenFile] = {}
    try:
        for batch in batches:
            heartbeat.beat()
            for values, rows in split_by_partition(conform(batch, target), target):
                f = open_files.get(values)
                if f is None:
                    rel = (
                        partition_name(target.partition_keys, values) + "/"
                        if target.partition_keys
                        else ""
                    )
                    path = f"{staging}/{rel}part-{task_token}-{len(open_files):05d}.parquet"
                    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
                    f = open_files[values] = _OpenFile(fs, path, schema)
                f.write(rows)
        out = []
        for values, f in open_files.items():
            size, metadata = f.close()
            if metadata is None:
                metadata = read_metadata(fs, f.path, size=size, url=join_url(scheme, f.path))
            out.append(
                WrittenFile(join_url(scheme, f.path), values, size, f.rows, footer_stats(metadata))
            )
        counters.add("writer.files_written", len(out))
        counters.add("writer.rows_written", sum(f.num_rows for f in out))
        return tuple(out)
    except BaseException:
        for f in open_files.values():
            _quietly(lambda f=f: f.handle.close())
            _quietly(lambda f=f: fs.rm(f.path))
        raise


# -- 3. commit / abort (driver) -----------------------------------------------------------
def commit_write(
    metastore,
    settings,
    job: WriteJob,
    files: Sequence[WrittenFile],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> CommitResult:
    """Make the files of every task visible as one write (see the module docstring)."""
    target = job.target
    created_dirs: list[str] = []  # only these, and the files below, may a rollback remove
    placed_files: list[str] = []
    committed = False
    heartbeat = TxnHeartbeat(settings, job.txn_id, metastore=metastore)

    def sleep_alive(seconds: float) -> None:
        # Waiting for a lock must not let the transaction expire meanwhile.
        while seconds > 0:
            step = min(seconds, heartbeat.interval)
            sleep(step)
            seconds -= step
            heartbeat.beat(force=True)

    try:
        heartbeat.beat(force=True)
        if target.partition_keys:  # before anything is created: a new table stays uncreated
            _check_partition_names(
                target.qualified_name, target.partition_keys, {tuple(f.values) for f in files}
            )
        table = _ensure_table(metastore, settings, target)
        if not files and not job.overwrite:
            metastore.commit_transaction(job.txn_id)
            committed = True
            return CommitResult(None, 0, 0, 0, 0)
        by_values: dict[tuple, list[WrittenFile]] = {}
        for f in files:
            by_values.setdefault(tuple(f.values), []).append(f)
        _lock(metastore, settings, job, table, sorted(by_values, key=_sort_key), sleep_alive)
        write_id = metastore.allocate_write_id(job.txn_id, table.database, table.name)
        subdir = base_dir_name(write_id) if job.overwrite else delta_dir_name(write_id)
        existing = (
            {p.values: p for p in metastore.list_partitions(table)} if table.is_partitioned else {}
        )
        if table.is_partitioned:
            _check_partition_names(
                table.qualified_name, table.partition_keys, set(by_values), set(existing)
            )
        fs, _ = filesystem_for(table.location, settings)

        def location_of(values: tuple) -> str:
            if not table.is_partitioned:
                return table.location.rstrip("/")
            p = existing.get(values)
            return (
                p.location
                if p is not None
                else f"{table.location.rstrip('/')}/{partition_name(table.partition_keys, values)}"
            ).rstrip("/")

        for values, group in by_values.items():
            dest = f"{location_of(values)}/{subdir}"
            _, dest_path = split_url(dest)
            _create_own_dir(fs, dest_path, dest, table)
            created_dirs.append(dest_path)
            for f in group:
                heartbeat.beat()  # moves on an object store are copies: they take time
                _, src = split_url(f.url)
                placed = f"{dest_path}/{src.rsplit('/', 1)[-1]}"
                fs.mv(src, placed)
                placed_files.append(placed)
        untouched = (
            [v for v in existing if v not in by_values]
            if table.is_partitioned
            else ([()] if not by_values else [])
        )
        if job.overwrite:
            for values in untouched:
                dest = f"{location_of(values)}/{subdir}"
                _, dest_path = split_url(dest)
                _create_own_dir(fs, dest_path, dest, table)
                created_dirs.append(dest_path)
                placed_files.append(f"{dest_path}/{EMPTY_BASE_FILE}")
                _write_empty_file(fs, placed_files[-1], table)

        # The partitions and the commit are one database transaction: a commit that dies
        # in between leaves no partition recorded for rows that never became visible.
        with metastore.atomically():
            added, altered = _record_metadata(
                metastore, table, job, write_id, by_values, existing, untouched, location_of
            )
            metastore.commit_transaction(job.txn_id)
        committed = True
        counters.add("writer.commits")
        return CommitResult(write_id, len(files), sum(f.num_rows for f in files), added, altered)
    except BaseException:
        if not committed:
            counters.add("writer.aborts")
            _roll_back(metastore, settings, job, created_dirs, placed_files)
        raise
    finally:
        remove_staging(settings, job)


def _is_local(fs) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocol or "local" in protocol


def _create_own_dir(fs, path: str, url: str, table: Table) -> None:
    """Create the ACID directory ``path`` for this write alone (see the module docstring):
    an existing one is someone else's and is never written into."""
    try:
        if _is_local(fs):
            fs.makedirs(path, exist_ok=False)  # the final mkdir is atomic
            return
        exists = fs.exists(path)
    except FileExistsError:
        exists = True
    if exists:
        raise LocationInUseError(
            f"{url} already exists, but the write to {table.qualified_name} allocated its "
            f"write id just now: the directory belongs to another table or another metastore "
            f"using the same location; the write was not committed and nothing there was "
            f"touched"
        )


def _check_partition_names(qualified: str, keys, values: set, existing: set = frozenset()) -> None:
    """Refuse partition values that are different values but one Hive partition: NULL and
    the string ``__HIVE_DEFAULT_PARTITION__`` (Hive's name for NULL) are both
    ``k=__HIVE_DEFAULT_PARTITION__``, and the metastore holds one partition per name."""
    by_name: dict[str, tuple] = {partition_name(keys, v): v for v in existing}
    for v in sorted(values, key=_sort_key):
        name = partition_name(keys, v)
        other = by_name.setdefault(name, v)
        if other != v:
            shown = " and ".join(repr(list(x)).replace("None", "NULL") for x in (other, v))
            raise SchemaError(
                f"the write to {qualified} has partition values {shown}, which are different "
                f"values but the same Hive partition {name} (Hive writes NULL as the string "
                f"'{HIVE_DEFAULT_PARTITION}'); nothing was written: replace that string, or "
                f"the NULLs, in the data"
            )


def _write_empty_file(fs, path: str, table: Table) -> None:
    with fs.open(path, "wb") as f:
        pq.write_table(arrow_schema_for_spark(table.columns).empty_table(), f)


def _sort_key(values: tuple) -> tuple:
    return tuple((v is None, v or "") for v in values)


def _ensure_table(metastore, settings, target: WriteTarget) -> Table:
    """The target table, created now (with its database) when the write began without one;
    a table dropped or replaced since the write began is an error."""
    if target.table_id is not None:
        table = metastore.get_table(target.database, target.name)
        if table.id != target.table_id:
            raise SchemaError(
                f"{target.qualified_name} was dropped or replaced while it was "
                f"being written; write again"
            )
        return table
    try:
        metastore.get_database(target.database)
    except NoSuchObjectError:
        metastore.create_database(target.database, location=target.location.rsplit("/", 1)[0])
    try:
        table = metastore.get_table(target.database, target.name)
    except NoSuchObjectError:
        # Checked again here: files may have arrived since the write began. A table another
        # writer of this metastore created meanwhile is adopted (it is the same table).
        check_location_free(settings, target.qualified_name, target.location)
        try:
            return metastore.create_table(target.as_table())
        except AlreadyExistsError:
            table = metastore.get_table(target.database, target.name)
    _check_columns(table, target.all_columns)
    if table.table_type == EXTERNAL_TABLE or table.partition_keys != target.partition_keys:
        raise SchemaError(
            f"{target.qualified_name} was created by someone else while it "
            f"was being written, differently; write again"
        )
    return table


def _lock(metastore, settings, job: WriteJob, table: Table, values: list[tuple], sleep) -> None:
    if job.overwrite:
        components = lock_components(Operation.INSERT_OVERWRITE, table.database, table.name)
    else:
        names = (
            [partition_name(table.partition_keys, v) for v in values]
            if table.is_partitioned
            else []
        )
        components = lock_components(
            Operation.INSERT, table.database, table.name, names, managed=True
        )
    LockManager(metastore, settings, sleep=sleep).acquire(
        components, txn_id=job.txn_id, agent_info=f"{AGENT} {table.qualified_name}"
    )


def _summary(files: Sequence[WrittenFile]) -> tuple[dict[str, ColumnStats], dict[str, str]]:
    stats: dict[str, ColumnStats] = {}
    for f in files:
        for name, s in f.stats.items():
            stats[name] = merge_stats(stats.get(name), s)
    params = {
        "numRows": str(sum(f.num_rows for f in files)),
        "numFiles": str(len(files)),
        "totalSize": str(sum(f.size for f in files)),
    }
    return stats, params


def _merged(
    old: Partition, stats: dict[str, ColumnStats], params: dict[str, str]
) -> tuple[dict[str, ColumnStats], dict[str, str]]:
    """Statistics and counts of an appended partition: old rows plus new ones. A column the
    old partition has rows but no statistics for stays unknown."""
    old_rows = old.row_count
    if old_rows == 0:
        merged_stats = dict(stats)
    elif old_rows is None:
        merged_stats = {}
    else:
        merged_stats = {n: merge_stats(old.stats[n], s) for n, s in stats.items() if n in old.stats}
    counts = {}
    for key in ("numRows", "numFiles", "totalSize"):
        try:
            counts[key] = str(int(old.parameters.get(key, "0")) + int(params[key]))
        except ValueError:
            counts[key] = params[key]
    if old_rows is None:
        counts.pop("numRows")
    return merged_stats, counts


def _record_metadata(
    metastore,
    table: Table,
    job: WriteJob,
    write_id: int,
    by_values: dict[tuple, list[WrittenFile]],
    existing: dict,
    untouched: list[tuple],
    location_of,
) -> tuple[int, int]:
    if not table.is_partitioned:
        _, params = _summary(by_values.get((), []))
        if not job.overwrite:
            old = Partition((), table.location, table.parameters, {})
            _, params = _merged(old, {}, params)
        metastore.alter_table_parameters(
            table.database, table.name, {**params, WRITE_ID_PARAM: str(write_id)}, write_id=write_id
        )
        return 0, 0
    new, altered = [], []
    for values, group in by_values.items():
        stats, params = _summary(group)
        old = existing.get(values)
        if old is None:
            new.append(Partition(values, location_of(values), params, stats))
            continue
        if not job.overwrite:
            stats, params = _merged(old, stats, params)
        altered.append(Partition(values, old.location, {**old.parameters, **params}, stats))
    if job.overwrite:
        for values in untouched:
            old = existing[values]
            altered.append(
                Partition(
                    values,
                    old.location,
                    {**old.parameters, "numRows": "0", "numFiles": "0", "totalSize": "0"},
                    {},
                )
            )
    if new:
        metastore.add_partitions(table, new, write_id=write_id)
    for p in altered:
        metastore.alter_partition(table, p, write_id=write_id)
    return len(new), len(altered)


def _roll_back(
    metastore, settings, job: WriteJob, created_dirs: Sequence[str], placed_files: Sequence[str]
) -> None:
    """Abort the transaction and remove what the commit placed, unless it committed after
    all (an error after the commit reached the database must not delete visible data): the
    files it moved or wrote, then the directories it created, each only if empty."""
    try:
        if metastore.get_transaction(job.txn_id).state == "committed":
            return
        metastore.abort_transaction(job.txn_id)  # a no-op when it already expired
    except Exception:  # noqa: BLE001 - the original error matters more; the cleaner follows
        log.warning("could not abort transaction %s", job.txn_id, exc_info=True)
        return
    fs, _ = filesystem_for(job.target.location, settings)
    for path in placed_files:
        _quietly(lambda path=path: fs.rm(path))
    if _is_local(fs):  # an object store has no directories: they go with their last file
        for path in reversed(created_dirs):
            _quietly(lambda path=path: fs.rmdir(path))


def abort_write(metastore, settings, job: WriteJob) -> None:
    """A failed job: abort its transaction (unless it committed) and remove its staging."""
    try:
        if metastore.get_transaction(job.txn_id).state == "open":
            counters.add("writer.aborts")
            metastore.abort_transaction(job.txn_id)
    finally:
        remove_staging(settings, job)


def remove_staging(settings, job: WriteJob) -> None:
    fs, path = filesystem_for(job.staging_url, settings)
    _quietly(lambda: fs.rm(path, recursive=True))


def _quietly(action: Callable[[], object]) -> None:
    try:
        action()
    except FileNotFoundError:
        pass
    except Exception:  # noqa: BLE001 - best-effort cleanup; the cleaner removes leftovers
        log.warning("cleanup step failed", exc_info=True)
