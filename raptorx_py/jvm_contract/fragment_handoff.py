"""What a task's input partition tells the JVM about its splits' fragment cache entries, and
what the JVM tells the Python reader back.

With the fragment result cache on, the planner attaches to each task's partition one ASCII
string, the hand-off mark::

    raptorx-fragments|<cache directory, UTF-8 in hex>|<metrics directory, UTF-8 in hex>|
        <key of split 0 in hex>,<key of split 1>,...|<one flag per split>|

(one line; a split without a key, whose file has no version, is ``-``). pyspark pickles the
partition and a pickle keeps an ASCII string verbatim, so the JVM's columnar reader
(``native/.../contract/FragmentHandoff.scala``, ``FragmentHits.scala``) finds the mark in the
pickled bytes without unpickling them, as soft affinity's mark is found (``placement``). On
the executor it opens each key's entry under the cache directory (resolved there as the
Python side resolves it: ``fragment_cache_directory``), verifies it, and serves it as
columnar batches; for each split it served it overwrites the split's flag with ``J`` (same
length: the pickle stays valid). A task whose splits it all served starts no Python worker;
otherwise the Python reader runs with the stamped partition and computes only the splits
whose flag is still ``-`` (``served_by_jvm``). The JVM appends its counts to the metrics
directory (``metrics.MetricsSink`` folds them in).

The keys of this mark are spelled once here and once in ``FragmentHandoff.scala`` (the
JVM's contract package, ``raptorx.contract``).
"""

from __future__ import annotations

MARKER = "raptorx-fragments|"
NO_KEY = "-"
UNSERVED, SERVED = "-", "J"
ATTRIBUTE = "fragments"


def handoff_mark(cache_directory: str, metrics_directory: str | None, keys) -> str:
    """The mark for a task whose splits have ``keys`` (bytes, or None without a key).
    Directories are the settings' strings, resolved by each executor as its Python workers
    resolve them."""
    digests = ",".join(NO_KEY if k is None else k.hex() for k in keys)
    return (
        f"{MARKER}{cache_directory.encode().hex()}|{(metrics_directory or '').encode().hex()}|"
        f"{digests}|{UNSERVED * len(keys)}|"
    )


def mark_partition(partition, mark: str):
    """``partition`` carrying ``mark`` (as its ``fragments`` attribute)."""
    setattr(partition, ATTRIBUTE, mark)
    return partition


def served_by_jvm(partition, splits: int) -> tuple[bool, ...]:
    """Per split of ``partition`` (which has ``splits``), whether the JVM already served it;
    all False without a mark or with one that does not match (the Python reader then
    computes every split)."""
    return served_flags(getattr(partition, ATTRIBUTE, None), MARKER, splits)


def served_flags(mark, marker: str, splits: int) -> tuple[bool, ...]:
    """Per split, whether a mark starting with ``marker`` and ending ``|<flags>|`` has its
    flag stamped ``J`` (all False without such a mark, or with flags of another length):
    the rule of this mark and of ``jvm_read_handoff``'s."""
    if not isinstance(mark, str) or not mark.startswith(marker):
        return (False,) * splits
    flags = mark.rstrip("|").rsplit("|", 1)[-1]
    if len(flags) != splits:
        return (False,) * splits
    return tuple(f == SERVED for f in flags)
