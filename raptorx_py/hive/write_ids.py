"""A reader's snapshot of one managed table: Hive's ``ValidWriteIdList``.

Every write to a managed table runs in a transaction that is allocated a table write id
(1, 2, 3 ... per table). A reader takes, per table, the high-water mark ``hwm`` (the highest
write id allocated when the snapshot was taken) and the *exceptions*: the write ids up to
``hwm`` whose transaction was still open, or had aborted. Write ids ``1..hwm`` minus the
exceptions are committed, and exactly those are visible to the reader.

Two string forms, both parsed and written exactly:

* Hive's serialised form (``ValidReaderWriteIdList.writeToString``), the one ``str()`` gives
  and ``from_string`` reads: ``<db>.<table>:<hwm>:<minOpenWriteId>:<open>:<aborted>``, e.g.
  ``sales.events:12:8:8:7,12`` (open and aborted lists comma-separated, possibly empty;
  ``minOpenWriteId`` is ``9223372036854775807``, Java's ``Long.MAX_VALUE``, when nothing is
  open; a missing table name is written ``null``). This form keeps everything.
* The synchronized-cache document's short form ``[hwm:exceptions]``, e.g. ``[12:7,8,12]``
  (``short_form`` / ``from_short_form``). It does not say which exceptions are open and
  which aborted, nor name the table; ``from_short_form`` takes every exception as *open*,
  which is the conservative reading (an open write id also forbids a ``base_`` directory
  above it, see ``is_valid_base``).

Freshness (``compare`` / ``is_fresh_for``) follows the document "Synchronized Metastore
Cache" and Hive's ``TxnIdUtils.compare``: two snapshots are at the same commit point when
they describe the same set of committed write ids, whatever their high-water marks. The
document's example: a query's ``[12:7,8,12]`` against a cached ``[11:7,8]`` is fresh (both
commit 1..6, 9, 10, 11; write id 12 is allocated but not committed), against a cached
``[12:7,12]`` it is not (write id 8 committed in between). A cached entry may serve a query
only at the same commit point: an older entry misses commits, a newer one shows the query
commits its snapshot must not see.

Limits: a snapshot cannot tell an aborted write id whose record was cleaned up from a
committed one (Hive's ``TxnIdUtils`` has the same blind spot); this metastore never cleans
aborted write ids up, so the question does not arise here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

#: Java's Long.MAX_VALUE: Hive's "no open write id" marker in the serialised form.
NO_OPEN_WRITE_ID = 9223372036854775807


@dataclass(frozen=True)
class ValidWriteIdList:
    """The committed write ids of one table as of one snapshot.

    ``open_write_ids`` and ``aborted_write_ids`` are the exceptions (disjoint, each in
    ``1..high_watermark``). ``min_open_write_id`` is Hive's: the smallest write id of a
    transaction that was open when the snapshot was taken, ``None`` when none was; it
    defaults to ``min(open_write_ids)``. Immutable and hashable.
    """

    table_name: str | None
    high_watermark: int
    open_write_ids: frozenset[int] = field(default_factory=frozenset)
    aborted_write_ids: frozenset[int] = field(default_factory=frozenset)
    min_open_write_id: int | None = None

    def __post_init__(self) -> None:
        opened, aborted = frozenset(self.open_write_ids), frozenset(self.aborted_write_ids)
        object.__setattr__(self, "open_write_ids", opened)
        object.__setattr__(self, "aborted_write_ids", aborted)
        if self.high_watermark < 0:
            raise ValueError(f"{self._label()}: negative high-water mark {self.high_watermark}")
        if opened & aborted:
            raise ValueError(
                f"{self._label()}: write ids {sorted(opened & aborted)} are both open and aborted"
            )
        bad = sorted(w for w in opened | aborted if not 1 <= w <= self.high_watermark)
        if bad:
            raise ValueError(f"{self._label()}: exceptions {bad} outside 1..{self.high_watermark}")
        if self.min_open_write_id is None and opened:
            object.__setattr__(self, "min_open_write_id", min(opened))
        if not opened and not aborted:
            # Hive keeps minOpenWriteId only when there are exceptions at all.
            object.__setattr__(self, "min_open_write_id", None)

    def _label(self) -> str:
        return f"ValidWriteIdList of {self.table_name or '(no table)'}"

    # -- what a reader may see -----------------------------------------------------------
    @property
    def exceptions(self) -> tuple[int, ...]:
        """Open and aborted write ids, ascending (Hive's ``getInvalidWriteIds``)."""
        return tuple(sorted(self.open_write_ids | self.aborted_write_ids))

    def is_visible(self, write_id: int) -> bool:
        """Whether data written under ``write_id`` is committed in this snapshot
        (Hive's ``isWriteIdValid``)."""
        return (
            write_id <= self.high_watermark
            and write_id not in self.open_write_ids
            and write_id not in self.aborted_write_ids
        )

    def is_aborted(self, write_id: int) -> bool:
        return write_id in self.aborted_write_ids

    def is_valid_base(self, write_id: int) -> bool:
        """Whether a ``base_<write_id>`` directory may be read: it must not cover a write
        id that was open in this snapshot (Hive's ``isValidBase``)."""
        below_open = self.min_open_write_id is None or write_id < self.min_open_write_id
        return below_open and write_id <= self.high_watermark

    def committed_count(self) -> int:
        return self.high_watermark - len(self.open_write_ids) - len(self.aborted_write_ids)

    # -- freshness -------------------------------------------------------------------------
    def compare(self, other: ValidWriteIdList) -> int:
        """0 when both snapshots commit the same write ids; 1 when ``self`` is more recent
        (the smallest write id on which they disagree is committed in ``self``); -1 when
        ``other`` is. Raises ``ValueError`` for snapshots of two different tables."""
        self._check_same_table(other)
        first = _first_difference(self, other)
        if first is None:
            return 0
        return 1 if self.is_visible(first) else -1

    def is_fresh_for(self, requested: ValidWriteIdList) -> bool:
        """Whether an entry cached under this snapshot may serve a read made under
        ``requested``: no transaction committed between the two (``compare == 0``)."""
        return self.compare(requested) == 0

    def _check_same_table(self, other: ValidWriteIdList) -> None:
        mine, theirs = self.table_name, other.table_name
        if mine is not None and theirs is not None and mine.lower() != theirs.lower():
            raise ValueError(f"cannot compare the write ids of {mine} with those of {theirs}")

    # -- string forms ----------------------------------------------------------------------
    def to_string(self) -> str:
        """Hive's serialised form ``<table>:<hwm>:<minOpen>:<open>:<aborted>``."""
        min_open = NO_OPEN_WRITE_ID if self.min_open_write_id is None else self.min_open_write_id
        return ":".join(
            (
                self.table_name if self.table_name is not None else "null",
                str(self.high_watermark),
                str(min_open),
                _ids(self.open_write_ids),
                _ids(self.aborted_write_ids),
            )
        )

    __str__ = to_string

    @classmethod
    def from_string(cls, text: str) -> ValidWriteIdList:
        """Parse Hive's serialised form. Like Hive's ``readFromString``, trailing empty
        fields may be missing (``db.t:5:9223372036854775807`` has no exceptions)."""
        parts = text.split(":")
        if not 3 <= len(parts) <= 5:
            raise ValueError(
                f"not a ValidWriteIdList: '{text}' (expected "
                f"<db.table>:<hwm>:<minOpenWriteId>:<open ids>:<aborted ids>)"
            )
        name, hwm, min_open, *rest = parts
        opened = rest[0] if rest else ""
        aborted = rest[1] if len(rest) > 1 else ""
        try:
            min_open_id = int(min_open)
            return cls(
                None if name.lower() == "null" else name,
                int(hwm),
                _parse_ids(opened),
                _parse_ids(aborted),
                None if min_open_id == NO_OPEN_WRITE_ID else min_open_id,
            )
        except ValueError as e:
            raise ValueError(f"not a ValidWriteIdList: '{text}': {e}") from e

    def short_form(self) -> str:
        """The document's ``[hwm:exceptions]`` form, e.g. ``[12:7,8,12]``."""
        return f"[{self.high_watermark}:{_ids(self.exceptions)}]"

    @classmethod
    def from_short_form(cls, text: str, table_name: str | None = None) -> ValidWriteIdList:
        """Parse ``[hwm:exceptions]``; every exception is taken as open (see the module
        docstring)."""
        body = text.strip()
        if not (body.startswith("[") and body.endswith("]")) or body.count(":") != 1:
            raise ValueError(f"not a [hwm:exceptions] write id list: '{text}'")
        hwm, exceptions = body[1:-1].split(":")
        try:
            return cls(table_name, int(hwm), _parse_ids(exceptions))
        except ValueError as e:
            raise ValueError(f"not a [hwm:exceptions] write id list: '{text}': {e}") from e

    def __repr__(self) -> str:
        return f"ValidWriteIdList({self.to_string()!r})"


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def _parse_ids(text: str) -> frozenset[int]:
    if not text:
        return frozenset()
    ids = [int(i) for i in text.split(",")]
    if len(set(ids)) != len(ids):
        raise ValueError(f"repeated write id in '{text}'")
    return frozenset(ids)


def _first_difference(a: ValidWriteIdList, b: ValidWriteIdList) -> int | None:
    """The smallest write id committed in one snapshot and not in the other, or ``None``.

    Works on the exceptions only (never on ``1..hwm``, which may be large): below the lower
    high-water mark the two differ exactly where their exception sets differ; between the
    two marks, every id must be an exception of the snapshot with the higher mark.
    """
    low, high = sorted((a, b), key=lambda s: s.high_watermark)
    h = low.high_watermark
    a_exc = {w for w in a.exceptions if w <= h}
    b_exc = {w for w in b.exceptions if w <= h}
    candidates = sorted(a_exc ^ b_exc)
    if candidates:
        return candidates[0]
    # Above h: the first id in h+1..high.hwm that is not an exception of ``high``.
    expected = h + 1
    for w in high.exceptions:
        if w <= h:
            continue
        if w != expected:
            break
        expected += 1
    return expected if expected <= high.high_watermark else None
