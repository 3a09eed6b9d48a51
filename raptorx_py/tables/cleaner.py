"""The cleaner of a managed table: removes what failed writes left on storage.

``clean_table`` first expires transactions whose client stopped heartbeating
(``hive.txn.timeout``, by the metastore's clock: tests inject one), then removes
- staging directories (``.raptorx-staging-<txn>-...``) of this metastore's transactions that
  are no longer open (committed: their files were moved out; aborted or expired: never
  committed), as its records name them (``begin_write`` records each), and
- what this metastore's aborted writes placed, as its own records name it
  (``metastore/write_paths.py``, written by ``commit_files``): the files each placed, then
  the directories each created once they are empty, wherever they are (a commit can die
  after moving files and before recording the partition). A directory of an aborted write
  id's number that no record names is NOT removed, but reported (``left_unrecorded``): with
  two metastores over one location it may be the other's live data (its write ids are
  numbered on their own), or it is a write's from before the records existed. A recorded
  directory that still holds a file no record names is kept too (``left_foreign``). A staging
  directory no record names (another metastore's, whose transaction numbers are its own) is
  left, and reported unless its number is an open transaction here.

Never removed: anything of an open transaction (a write in progress), committed
directories, and directories of committed write ids made obsolete by a later base (a reader
of an older snapshot may still be reading them: there is no registry of running readers, so
obsolete data is kept). External tables have no write ids and are refused.

Limits: the metastore keeps aborted transactions forever, so a cleaned write id still shows
as aborted in every snapshot (which is what keeps its directory invisible if a slow task
of the dead job writes it again). An aborted commit leaves no partition registered: a commit
records its partitions in the database transaction that commits it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raptorx_py.config.settings import Settings
from raptorx_py.errors import MetastoreError
from raptorx_py.hive.model import EXTERNAL_TABLE, Table
from raptorx_py.metastore.store import Metastore
from raptorx_py.metastore.transactions import NoSuchTxnError
from raptorx_py.metastore.write_paths import (
    DIRECTORY,
    FILE,
    STAGING,
    WritePath,
    forget_write_paths,
    write_paths_of_table,
)
from raptorx_py.storage.acid_layout import parse_acid_dir
from raptorx_py.storage.fs import filesystem_for, join_url, split_url
from raptorx_py.storage.hive_layout import is_hidden
from raptorx_py.tables.staging import staging_txn_id


@dataclass
class CleanReport:
    table: str
    expired_txns: list[int] = field(default_factory=list)
    removed_staging: list[str] = field(default_factory=list)
    removed_aborted: list[str] = field(default_factory=list)
    #: Directories of aborted write ids that no record of this metastore names: kept.
    left_unrecorded: list[str] = field(default_factory=list)
    #: Recorded directories kept because they hold files no record names.
    left_foreign: list[str] = field(default_factory=list)

    @property
    def removed(self) -> list[str]:
        return self.removed_staging + self.removed_aborted


def clean_table(metastore: Metastore, settings: Settings, database: str, name: str) -> CleanReport:
    """Clean ``database.name`` (see the module docstring); returns what was removed."""
    table = metastore.get_table(database, name)
    if table.table_type == EXTERNAL_TABLE:
        raise MetastoreError(
            f"{table.qualified_name} is an EXTERNAL table: it has no write ids, "
            f"so there is nothing a cleaner may remove"
        )
    report = CleanReport(table.qualified_name, expired_txns=metastore.expire_timed_out())
    snapshot = metastore.get_valid_write_ids([table.qualified_name])[table.qualified_name]
    if snapshot is None:  # only an external table has none, refused above
        raise MetastoreError(f"{table.qualified_name} has no write ids to clean by")
    aborted = snapshot.aborted_write_ids
    records = write_paths_of_table(metastore, table.database, table.name)
    removed_dirs = _remove_recorded(settings, records, report)
    own_staging = {r.url: r.state for r in records if r.kind == STAGING}
    for root in _roots(metastore, table):
        fs, root_path = filesystem_for(root, settings)
        scheme, _ = split_url(root)
        try:
            found = fs.find(root_path, withdirs=True, detail=True)
        except FileNotFoundError:
            continue
        prefix = root_path.rstrip("/") + "/"
        # Only directories; parents before children, so a removed one is not visited again.
        dirs = sorted(
            p
            for p, info in found.items()
            if info.get("type") == "directory" and p.startswith(prefix)
        )
        removed: list[str] = []
        for path in dirs:
            if any(path.startswith(r + "/") for r in removed):
                continue
            rel = path[len(prefix) :].split("/")
            leaf = rel[-1]
            txn = staging_txn_id(leaf) if len(rel) == 1 else None
            url = join_url(scheme, path)
            if txn is not None:
                state = own_staging.get(url)
                if state is not None and state != "open":
                    fs.rm(path, recursive=True)
                    removed.append(path)
                    report.removed_staging.append(url)
                elif state is None and not _is_open(metastore, txn):
                    report.left_unrecorded.append(url)
                continue
            if any(is_hidden(part) for part in rel):
                continue
            acid = parse_acid_dir(leaf)
            if (
                acid is not None
                and url not in removed_dirs
                and all(w in aborted for w in range(acid.min_write_id, acid.max_write_id + 1))
            ):
                report.left_unrecorded.append(url)
    # Done with every transaction that is no longer open (a committed one's records name
    # data that stays; an aborted one's are removed above, or kept and reported).
    finished = sorted({r.txn_id for r in records if r.state != "open"})
    forget_write_paths(metastore, table.database, table.name, finished)
    return report


def _remove_recorded(settings: Settings, records: list[WritePath], report: CleanReport) -> set:
    """Remove what the records of aborted transactions name: their files, then their
    directories when empty (deepest first). Returns the directories' URLs that were
    recorded (removed or, holding foreign files, kept and reported)."""
    aborted = [r for r in records if r.state == "aborted"]
    dirs = sorted((r.url for r in aborted if r.kind == DIRECTORY), key=len, reverse=True)
    # Before any file goes: a directory already gone (a rollback removed it) is not reported,
    # and on an object store a directory exists only while it holds a file.
    existed = {url for url in dirs if _exists(settings, url)}
    for r in aborted:
        if r.kind == FILE:
            fs, path = filesystem_for(r.url, settings)
            if fs.exists(path):
                fs.rm(path)
    for url in dirs:
        if url not in existed:
            continue
        fs, path = filesystem_for(url, settings)
        try:
            left = fs.ls(path, detail=False)
        except FileNotFoundError:
            left = []
        if left:
            report.left_foreign.append(url)
            continue
        if fs.exists(path):  # an object store's directory is gone with its last file
            fs.rmdir(path)
        report.removed_aborted.append(url)
    return set(dirs)


def _exists(settings: Settings, url: str) -> bool:
    fs, path = filesystem_for(url, settings)
    return bool(fs.exists(path))


def _roots(metastore: Metastore, table: Table) -> list[str]:
    """The table's location, plus every partition location outside it."""
    root = table.location.rstrip("/")
    roots = [root]
    if table.is_partitioned:
        for p in metastore.list_partitions(table):
            loc = p.location.rstrip("/")
            if not loc.startswith(root + "/") and loc not in roots:
                roots.append(loc)
    return roots


def _is_open(metastore: Metastore, txn_id: int) -> bool:
    try:
        return metastore.get_transaction(txn_id).state == "open"
    except NoSuchTxnError:
        return False
