"""The one rule for damage a cache tier finds in its own bookkeeping: the block cache's and
the fragment result cache's SQLite indexes, and the node's invalidation journal.

Contract:

- A damaged index (``sqlite_wal.is_damage``: not a database, malformed, emptied) is set
  aside (``sqlite_wal.set_aside``: renamed with its journals, never truncated, and only the
  very file found damaged, which another process may have replaced already), then rebuilt
  by its tier from the files it indexes, each file's MAC saying whether to keep it
  (``rebuild_index``, with the tier's ``rebuild``).
- Damage is counted by the tier (its own counter, each time: the counter table of
  docs/design/observability.md names each) and logged as a warning once per file in this
  process, at debug level after that (``report_damage``): the first tells the operator,
  more would only fill the log of a process that meets it on every store.
- A journal is not set aside (a damaged line leaves the file a valid journal: its readers
  drop every in-memory entry and read on); it is only counted and reported.

Limits: "once" is per process; each process that meets the damage warns once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from raptorx_py.sqlite_wal import set_aside

log = logging.getLogger(__name__)

#: Files whose damage this process has warned about.
_warned: set[str] = set()


def report_damage(path: str, message: str, *args) -> None:
    """Log ``message % args``: a warning the first time this process reports damage of
    ``path``, a debug line after."""
    if path in _warned:
        log.debug(message, *args)
        return
    _warned.add(path)
    log.warning(message, *args)


def rebuild_index(
    path: str,
    *,
    inode: int | None,
    error: BaseException,
    what: str,
    rebuild: Callable[[], str],
) -> str:
    """Set the damaged index at ``path`` aside (only the file of ``inode``; None: the file
    there now), have its tier ``rebuild`` it (which says what it was rebuilt from and what
    it kept), then report it (``report_damage``); where it was set aside. The tier counts
    it."""
    aside = set_aside(path, inode=inode)
    how = rebuild()
    report_damage(
        path,
        "%s: its index was damaged (%s: %s); set aside as %s and rebuilt %s",
        what,
        type(error).__name__,
        error,
        aside,
        how,
    )
    return aside
