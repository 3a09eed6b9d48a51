"""Moving a commit's files into the ACID directories of its write id, which the write alone
creates.

Who may delete what on rollback: a write publishes only into directories it created itself.
Each ``base_<wid>/`` or ``delta_<wid>_<wid>/`` is created exclusively (a local ``mkdir`` that
fails when the directory exists; on an object store, a check that no object has that prefix):
one that already exists belongs to someone else (another table or another metastore using
the same directory) and fails the write with ``LocationInUseError`` instead of being written
into. ``CommitFiles`` records exactly the files it moved or wrote and the directories it
created; a rollback removes those files, then those directories if they are empty: never a
directory, or a file, it did not make. With ``records`` (what a commit passes) it also
records them in the metastore (``metastore/write_paths.py``: each directory once created,
each file before it is moved in), so that the cleaner, after a process died mid-commit,
removes exactly what this metastore's write placed and never another's data of the same
write id number. Limit: on an object store the check and the first
move are not atomic (two metastores committing the same write id into one directory in the
same instant can both pass); one metastore's write ids never collide.

Object stores: a "move" is ``fs.mv``: a rename on local disks, a server-side copy + delete on
S3. It need not be atomic: nothing under an open write id is read. An overwrite gives a
partition it writes no row to a ``base_<wid>/`` holding one file of no rows in the table's format
(``EMPTY_BASE_NAME``): a directory needs a file to exist on an object store, and the file
must be a visible one for listings, which skip hidden names, to see the base.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, partial

from raptorx_py.config.settings import Settings
from raptorx_py.errors import LocationInUseError
from raptorx_py.hive.column_types import arrow_schema_for_spark
from raptorx_py.metastore.store import Metastore
from raptorx_py.metastore.write_paths import DIRECTORY, FILE, record_write_paths
from raptorx_py.storage.fs import filesystem_for, join_url, split_url
from raptorx_py.tables.data_files import suffix, write_empty_file
from raptorx_py.tables.heartbeat import TxnHeartbeat
from raptorx_py.tables.partition_records import WrittenPartitions
from raptorx_py.tables.staging import best_effort

#: The file of no rows that makes an empty ``base_<wid>/`` exist and be listed (its suffix:
#: the table's format's).
EMPTY_BASE_NAME = "empty-base"
#: A Parquet table's.
EMPTY_BASE_FILE = f"{EMPTY_BASE_NAME}.parquet"


@dataclass(frozen=True)
class WriteRecords:
    """Where ``CommitFiles`` records what it creates: the metastore, the write's transaction
    and its table (``metastore/write_paths.py``)."""

    metastore: Metastore
    txn_id: int
    database: str
    table: str

    def add(self, kind: str, urls: list[str]) -> None:
        record_write_paths(self.metastore, self.txn_id, self.database, self.table, kind, urls)


class CommitFiles:
    """Places one commit's files under ``<partition location>/<ACID directory>`` and records
    what it created (``created_dirs``, ``placed_files``; in the metastore too, with
    ``records``): only that may ``remove`` (the rollback) or the cleaner delete.
    ``location`` is the table's: it names the filesystem."""

    def __init__(self, settings: Settings, location: str, records: WriteRecords | None = None):
        self.settings, self.location, self.records = settings, location, records
        self.scheme, _ = split_url(location)
        self.created_dirs: list[str] = []
        self.placed_files: list[str] = []

    @cached_property
    def fs(self):
        fs, _ = filesystem_for(self.location, self.settings)
        return fs

    def move_files(
        self, partitions: WrittenPartitions, acid_dir: str, heartbeat: TxnHeartbeat
    ) -> None:
        """Move each written partition's staged files into its new ``acid_dir``."""
        for values, group in partitions.by_values.items():
            dest = self._create_own_dir(f"{partitions.location_of(values)}/{acid_dir}", partitions)
            moves = []
            for f in group:
                _, src = split_url(f.url)
                moves.append((src, f"{dest}/{src.rsplit('/', 1)[-1]}"))
            self._record(FILE, [placed for _, placed in moves])  # before any is moved in
            for src, placed in moves:
                heartbeat.beat()  # moves on an object store are copies: they take time
                self.fs.mv(src, placed)
                self.placed_files.append(placed)

    def write_empty_bases(self, partitions: WrittenPartitions, acid_dir: str) -> None:
        """An overwrite: an empty base (one file of no rows, in the table's format) in each
        untouched partition."""
        table = partitions.table
        schema = arrow_schema_for_spark(table.columns)
        for values in partitions.untouched:
            dest = self._create_own_dir(f"{partitions.location_of(values)}/{acid_dir}", partitions)
            path = f"{dest}/{EMPTY_BASE_NAME}{suffix(table.storage_format)}"
            self._record(FILE, [path])
            self.placed_files.append(path)
            write_empty_file(self.fs, join_url(self.scheme, path), schema, table.storage_format)

    def remove(self) -> None:
        """Remove the placed files, then the created directories if empty (best effort)."""
        if not self.placed_files and not self.created_dirs:
            return
        fs = self.fs
        for path in self.placed_files:
            best_effort(partial(fs.rm, path))
        if is_local(fs):  # an object store has no directories: they go with their last file
            for path in reversed(self.created_dirs):
                best_effort(partial(fs.rmdir, path))

    def _create_own_dir(self, url: str, partitions: WrittenPartitions) -> str:
        """Create the ACID directory ``url`` for this write alone (see the module docstring)
        and return its path: an existing one is someone else's and is never written into."""
        _, path = split_url(url)
        try:
            if is_local(self.fs):
                self.fs.makedirs(path, exist_ok=False)  # the final mkdir is atomic
                exists = False
            else:
                exists = self.fs.exists(path)
        except FileExistsError:
            exists = True
        if exists:
            raise LocationInUseError(
                f"{url} already exists, but the write to {partitions.table.qualified_name} "
                f"allocated its write id just now: the directory belongs to another table or "
                f"another metastore using the same location; the write was not committed and "
                f"nothing there was touched"
            )
        self.created_dirs.append(path)
        self._record(DIRECTORY, [path])
        return path

    def _record(self, kind: str, paths: list[str]) -> None:
        if self.records is not None:
            self.records.add(kind, [join_url(self.scheme, p) for p in paths])


def is_local(fs) -> bool:
    """Whether ``fs`` is the local filesystem (real directories, an atomic ``mkdir``)."""
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocol or "local" in protocol
