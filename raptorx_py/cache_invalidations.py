"""The node's cache invalidation journal: how ``raptorx cache invalidate`` and ``raptorx
cache clear``, run in a process of their own, reach the tiers that live in the memory of
other processes on the node (each planning process's metastore cache and listing cache,
each Python worker's footer memory).

The on-disk tiers (blocks, footers on disk, fragment results) are shared files: the
command removes their entries itself. An in-memory tier cannot be reached from outside its
process, so the command appends an ``Invalidation`` to a journal file in the node's cache
directory (``<cache.base-directory>/invalidations.jsonl``) and every in-memory tier reads
what was appended since it last looked when a query asks for it (``JournalReader.poll``:
one ``stat`` when nothing is new), before it serves anything.

Contract:
- ``post`` appends one JSON line with one ``write`` to a file opened ``O_APPEND``: lines
  of concurrent posters never interleave (a local filesystem appends each write whole).
- A reader starts at the journal's end when it is created (its tier, created then, holds
  nothing older) and returns each complete line once; a line without its newline (being
  written) is read at the next poll. A journal that was replaced, truncated or removed
  since the last poll (by hand: the commands only append) cannot say what was missed, so
  the reader answers ``EVERYTHING``: its tier drops every entry.
- Invalidations only ever cost misses: a tier that drops an entry reads it again from the
  store.
- Damage (random bytes over the file, a torn write) heals by itself: each line is written
  after a newline of its own, so a line always starts on a line, whatever garbage ends the
  file; a reader meeting a complete line that is not an invalidation cannot tell what it
  held and answers ``EVERYTHING`` for it (``invalidations.journal_damaged``, logged once per
  journal), then reads on. Nothing is set aside: the file is still a valid journal.

Limits: node-local (a cluster's other nodes are reached by running the command there); a
tier applies an invalidation when it is next asked for, so a scan planned before it reads
what that plan listed (a query in flight is not cut short); the file is never trimmed
(about 100 bytes per table invalidated, more with many partition locations).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field

from raptorx_py.damaged_index import report_damage
from raptorx_py.metrics import counters

JOURNAL_FILE = "invalidations.jsonl"

#: Every cache tier of a node, by the name ``raptorx cache`` gives it (here, where the
#: command line can read it without importing the tiers).
TIERS = ("metastore", "listing", "footer", "block", "fragment")

#: The in-memory tiers the journal reaches.
METASTORE = "metastore"
LISTING = "listing"
FOOTER = "footer"
MEMORY_TIERS = (METASTORE, LISTING, FOOTER)


@dataclass(frozen=True)
class Invalidation:
    """Drop, in ``tiers``, the entries of ``table`` (``"db.t"``), or every entry when
    ``table`` is None. ``locations``: the partition (or table) directories concerned, as the
    metastore names them (the listing cache's keys; empty: all of the table's); ``files``:
    the data files concerned, as planning lists them (the footer memory's keys; empty with a
    table: the footer memory drops everything, since it cannot tell a table's footers)."""

    tiers: tuple[str, ...] = MEMORY_TIERS
    table: str | None = None
    locations: tuple[str, ...] = field(default=())
    files: tuple[str, ...] = field(default=())

    def to_line(self) -> bytes:
        data = {
            "tiers": list(self.tiers),
            "table": self.table,
            "locations": list(self.locations),
            "files": list(self.files),
        }
        return (json.dumps(data, separators=(",", ":")) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes) -> Invalidation | None:
        """The invalidation a line holds; None for a line that is not one (skipped)."""
        try:
            data = json.loads(line)
            return cls(
                tuple(str(t) for t in data["tiers"]),
                None if data["table"] is None else str(data["table"]).lower(),
                tuple(str(loc) for loc in data["locations"]),
                tuple(str(f) for f in data.get("files", ())),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def covers(self, tier: str) -> bool:
        return tier in self.tiers


#: What ``JournalReader.poll`` returns when it cannot tell what it missed.
EVERYTHING = (Invalidation(),)


def journal_path(cache_base_directory: str) -> str:
    """The journal of the node whose cache directory is ``cache.base-directory``."""
    return os.path.join(os.path.abspath(os.path.expanduser(cache_base_directory)), JOURNAL_FILE)


def post(path: str, invalidation: Invalidation) -> None:
    """Append ``invalidation`` to the journal at ``path`` (created, with its directory,
    when missing; 0600 like the cache files)."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        # The leading newline ends whatever a damaged or torn file ends with, so this line
        # is read whole (readers skip the empty line it makes after a good one).
        os.write(fd, b"\n" + invalidation.to_line())
    finally:
        os.close(fd)


class JournalReader:
    """One tier's position in the journal at ``path`` (thread-safe)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._inode, self._offset = self._end()

    def _end(self) -> tuple[int | None, int]:
        try:
            st = os.stat(self.path)
        except OSError:
            return None, 0
        return st.st_ino, st.st_size

    def poll(self) -> tuple[Invalidation, ...]:
        """The invalidations appended since the last poll (``EVERYTHING`` when the journal
        was replaced, truncated or removed meanwhile)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            with self._lock:
                if self._inode is None:
                    return ()
                self._inode, self._offset = None, 0
                return EVERYTHING
        except OSError:
            return ()  # unreadable: nothing can have been posted by us either
        if st.st_ino == self._inode and st.st_size == self._offset:
            return ()  # nothing new (the common case: no lock taken)
        with self._lock:
            if self._inode is not None and (st.st_ino != self._inode or st.st_size < self._offset):
                self._inode, self._offset = st.st_ino, st.st_size
                return EVERYTHING
            if self._inode is None:
                # Created since this reader started: every line in it is new.
                self._inode, self._offset = st.st_ino, 0
            if st.st_size == self._offset:
                return ()
            try:
                with open(self.path, "rb") as f:
                    f.seek(self._offset)
                    data = f.read(st.st_size - self._offset)
            except OSError:
                return ()
            complete = data.rfind(b"\n") + 1  # a line still being written waits
            self._offset += complete
        found = []
        for line in data[:complete].split(b"\n"):
            if not line.strip():
                continue
            invalidation = Invalidation.from_line(line)
            if invalidation is None:
                # Damaged: what it said is unknown, so everything may be stale.
                counters.add("invalidations.journal_damaged")
                report_damage(
                    self.path,
                    "cache invalidation journal %s holds a damaged line; every "
                    "in-memory entry is dropped for it",
                    self.path,
                )
                return EVERYTHING
            found.append(invalidation)
        return tuple(found)
