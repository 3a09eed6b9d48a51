"""Statistics of a set of Parquet files: per-column bounds and Hive's basic statistics.

One summary for every path that records them: registration (footers of existing files) and
managed writes (footers of the files a write produced).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from raptorx_py.hive.model import ColumnStats, Partition
from raptorx_py.hive.table_parameters import (
    COUNT_PARAMS,
    NUM_FILES_PARAM,
    NUM_ROWS_PARAM,
    TOTAL_SIZE_PARAM,
)

#: The basic statistics of no files (a new unpartitioned table, an overwritten partition).
NO_ROWS_PARAMS = {NUM_ROWS_PARAM: "0", NUM_FILES_PARAM: "0", TOTAL_SIZE_PARAM: "0"}


class FileFacts(Protocol):
    """What one file contributes: its rows, its bytes and its footer's column statistics."""

    @property
    def num_rows(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def stats(self) -> Mapping[str, ColumnStats]: ...


def merge_stats(a: ColumnStats | None, b: ColumnStats) -> ColumnStats:
    """Statistics of the union of two sets of rows."""
    if a is None:
        return b
    nulls = None if a.num_nulls is None or b.num_nulls is None else a.num_nulls + b.num_nulls
    if a.low is None or b.low is None or a.high is None or b.high is None:
        return ColumnStats(nulls, None, None)
    return ColumnStats(nulls, min(a.low, b.low), max(a.high, b.high))


def summarize(files: Iterable[FileFacts]) -> tuple[dict[str, ColumnStats], dict[str, str]]:
    """``(column statistics, basic-statistics parameters)`` of ``files`` taken together."""
    files = list(files)
    stats: dict[str, ColumnStats] = {}
    for f in files:
        for name, s in f.stats.items():
            stats[name] = merge_stats(stats.get(name), s)
    params = {
        NUM_ROWS_PARAM: str(sum(f.num_rows for f in files)),
        NUM_FILES_PARAM: str(len(files)),
        TOTAL_SIZE_PARAM: str(sum(f.size for f in files)),
    }
    return stats, params


def appended(
    old: Partition, stats: dict[str, ColumnStats], params: dict[str, str]
) -> tuple[dict[str, ColumnStats], dict[str, str]]:
    """Statistics and counts of a partition ``old`` after an append whose files summarize to
    ``stats``/``params``: old rows plus new ones. A column the old partition has rows but no
    statistics for stays unknown, and so does the row count when the old one is unknown."""
    old_rows = old.row_count
    if old_rows == 0:
        merged_stats = dict(stats)
    elif old_rows is None:
        merged_stats = {}
    else:
        merged_stats = {n: merge_stats(old.stats[n], s) for n, s in stats.items() if n in old.stats}
    counts = {}
    for key in COUNT_PARAMS:
        try:
            counts[key] = str(int(old.parameters.get(key, "0")) + int(params[key]))
        except ValueError:
            counts[key] = params[key]
    if old_rows is None:
        counts.pop(NUM_ROWS_PARAM)
    return merged_stats, counts
