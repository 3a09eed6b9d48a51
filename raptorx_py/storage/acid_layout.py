"""Hive's insert-only ACID directory layout of a managed table's partition.

A managed table's partition (or an unpartitioned managed table's location) holds one
directory per write: an append under write id ``w`` writes ``delta_<w>_<w>/``, an overwrite
``base_<w>/`` (names ``delta_%07d_%07d`` and ``base_%07d``, exactly Hive's). Which of them a
reader sees is decided by its snapshot (``ValidWriteIdList``), as Hive's
``AcidUtils.getAcidState`` does for insert-only tables:

- the base is the ``base_<w>`` with the highest ``w`` that is committed in the snapshot and
  below every write id open in it (``is_valid_base`` and ``is_visible``): a base written by a
  transaction the reader must not see, or that overlaps an open one, is never chosen;
- the deltas are the ``delta_<min>_<max>`` above the base whose every write id is committed
  (a range written by compaction covering an aborted or open id is skipped); a delta
  contained in a wider visible one (``delta_3_3`` inside ``delta_1_5``) is obsolete;
- files directly in the directory ("original" files, written before the table was
  transactional) belong under the base: visible only while no base is chosen;
- everything else (hidden names, other directories) is not ACID data and is ignored.

Hive's optional suffixes are parsed and ignored: a statement id (``delta_5_5_0002``) and a
visibility transaction id (``base_5_v0000123``). Limit: ``delete_delta_`` directories (full
ACID, row-level deletes) are not supported: insert-only tables never have them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from raptorx_py.hive.write_ids import ValidWriteIdList

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"

_DELTA_RE = re.compile(r"^delta_(\d+)_(\d+)(?:_(\d+))?(?:_v\d+)?$")
_BASE_RE = re.compile(r"^base_(\d+)(?:_v\d+)?$")


def delta_dir_name(write_id: int, max_write_id: int | None = None) -> str:
    """``delta_0000005_0000005`` (Hive's ``deltaSubdir`` without statement id)."""
    return f"delta_{write_id:07d}_{write_id if max_write_id is None else max_write_id:07d}"


def base_dir_name(write_id: int) -> str:
    """``base_0000005``."""
    return f"base_{write_id:07d}"


@dataclass(frozen=True, order=True)
class AcidDir:
    """One parsed ACID directory name: a base (``min_write_id == max_write_id``) or a delta
    covering write ids ``min_write_id..max_write_id``."""

    min_write_id: int
    max_write_id: int
    is_base: bool
    name: str

    @property
    def write_id(self) -> int:
        """A base's write id (or a delta's highest)."""
        return self.max_write_id


def parse_acid_dir(name: str) -> AcidDir | None:
    """The ACID directory ``name`` stands for, or ``None`` for any other name."""
    name = name.rstrip("/").rsplit("/", 1)[-1]
    m = _BASE_RE.match(name)
    if m:
        w = int(m.group(1))
        return AcidDir(w, w, True, name)
    m = _DELTA_RE.match(name)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if lo > hi:
            return None
        return AcidDir(lo, hi, False, name)
    return None


@dataclass(frozen=True)
class AcidState:
    """What a snapshot reads of one directory: ``base`` (or None), ``deltas`` (ascending),
    whether original files are read, and what it does not read: ``obsolete`` (committed but
    replaced by the base or a wider delta) and ``invisible`` (open, aborted or above the
    high-water mark in this snapshot)."""

    base: AcidDir | None
    deltas: tuple[AcidDir, ...]
    originals_visible: bool
    obsolete: tuple[AcidDir, ...]
    invisible: tuple[AcidDir, ...]

    @property
    def visible(self) -> tuple[str, ...]:
        """The names of the directories to read, base first."""
        return ((self.base.name,) if self.base else ()) + tuple(d.name for d in self.deltas)


def _range_committed(d: AcidDir, snapshot: ValidWriteIdList) -> bool:
    if d.max_write_id > snapshot.high_watermark:
        return False
    return not any(d.min_write_id <= w <= d.max_write_id for w in snapshot.exceptions)


def acid_state(dir_names: Iterable[str], snapshot: ValidWriteIdList) -> AcidState:
    """Hive's ``getAcidState`` for an insert-only directory (see the module docstring)."""
    if snapshot is None:
        raise ValueError("a managed table's directories need a ValidWriteIdList to be read")
    parsed = sorted({d for d in (parse_acid_dir(n) for n in dir_names) if d is not None})
    invisible: list[AcidDir] = []
    obsolete: list[AcidDir] = []
    base: AcidDir | None = None
    for d in (d for d in parsed if d.is_base):
        if snapshot.is_valid_base(d.write_id) and snapshot.is_visible(d.write_id):
            if base is not None:
                obsolete.append(base)
            base = d
        else:
            invisible.append(d)
    floor = base.write_id if base is not None else 0
    deltas: list[AcidDir] = []
    # Widest first among equal starts, so a delta inside a wider one is seen after it.
    for d in sorted(
        (d for d in parsed if not d.is_base), key=lambda d: (d.min_write_id, -d.max_write_id)
    ):
        if not _range_committed(d, snapshot):
            invisible.append(d)
        elif d.max_write_id <= floor:
            obsolete.append(d)
        else:
            deltas.append(d)
            floor = d.max_write_id
    return AcidState(
        base, tuple(deltas), base is None, tuple(sorted(obsolete)), tuple(sorted(invisible))
    )


def visible_directories(dir_names: Iterable[str], valid_write_ids: ValidWriteIdList) -> list[str]:
    """The ACID directories among ``dir_names`` a reader with ``valid_write_ids`` reads, base
    first, then deltas in write-id order."""
    return list(acid_state(dir_names, valid_write_ids).visible)


def visible_files(files, root: str, valid_write_ids: ValidWriteIdList) -> list:
    """Of a recursive listing ``files`` (objects with a ``path``) of the directory ``root``,
    those the snapshot reads: files inside the visible ACID directories, and original files
    (directly in ``root``) while no base is visible. Order is kept."""
    prefix = root.rstrip("/") + "/"

    def first_dir(path: str) -> str | None:
        rel = path[len(prefix) :] if path.startswith(prefix) else path
        head, sep, _ = rel.partition("/")
        return head if sep else None

    dirs = {d for d in (first_dir(f.path) for f in files) if d is not None}
    state = acid_state(dirs, valid_write_ids)
    visible = set(state.visible)
    out = []
    for f in files:
        d = first_dir(f.path)
        if (d is None and state.originals_visible) or d in visible:
            out.append(f)
    return out
