"""What a scan tells the native provider for Spark's SQL metrics and EXPLAIN
(``native/.../contract/ScanReport.scala``, read by ``native/.../python/raptorx/ScanReport.scala``):
its planning, once, and each task's reading.

- **The plan mark** (driver). ``partitions()`` runs in the driver's planner or in a planning
  Python worker, and what reaches the JVM from there is pyspark's answer: the pickled read
  function and partitions. So the scan's plan summary rides in its FIRST partition as the
  ASCII string ``raptorx-plan|<TSV, UTF-8 in hex>|`` (a pickle keeps an ASCII string
  verbatim; the JVM finds it without unpickling, as it finds the fragment hand-off). The TSV
  lines are ``<name>\\t<value>``: the table, its partition keys, its snapshot and the tiers
  that are on (``PLAN_*_KEY``), then every counter the scan's planning counted (partitions
  in the table and pruned, metastore round trips, listing cache hits ...). A scan that
  planned no split returns one partition holding no task (``read`` yields nothing), marked.
- **The task's counts** (executors). ``read`` collects what its task counted (a
  ``metrics.Counters`` scope) and, when the task's read ends, writes them as
  ``<name>\\t<value>`` lines (temp file + ``os.replace``) to
  ``<Spark's files root>/raptorx-task-counts/<task attempt id>.tsv``: the JVM sends the
  files root to the Python worker with the task (``SparkFiles.getRootDirectory()``) and the
  attempt id is the task's, so both sides name the same file without a channel of their own.
  The provider's columnar reader makes the directory (a reader without it finds none and
  writes nothing), reads the file when the Python stream ends, before Spark takes the task's
  last metric values, and deletes it. (Not the task's local properties: in local mode every
  task of a stage shares one ``Properties`` object.) Why a file and not a trailer in the Arrow
  stream: the stream's batches must have the scan's schema, and pyspark checks it; a side
  file the JVM owns (it creates and deletes it) needs nothing from pyspark's protocol.

Limits: a task Spark stops early (a ``LIMIT`` satisfied) writes no counts (its figures are
missing from the node, never another task's); a scan planned without the native provider
(no pushdown) carries no mark.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping

from pyspark import SparkFiles, TaskContext

from raptorx_py.jvm_contract import protocol

log = logging.getLogger(__name__)

PLAN_MARK = protocol.PLAN_MARK
TASK_COUNTS_DIR = protocol.TASK_COUNTS_DIR
ATTRIBUTE = "plan"

#: Counters of a planning that the mark leaves out: per-column names, not figures of a scan.
_NOT_REPORTED = ("scan.column.", "scan.planned.")


def snapshot_text(snapshot, table) -> str:
    """The snapshot a scan reads, for EXPLAIN: a managed table's write ids (Hive's
    ``[hwm:exceptions]``), or that an external table has none."""
    ts = snapshot.tables.get(table.qualified_name) if snapshot is not None else None
    if ts is not None and ts.write_ids is not None:
        return f"write ids {ts.write_ids.short_form()} (table id {ts.table_id})"
    if ts is not None:
        return f"external, no write ids (table id {ts.table_id})"
    return "none"


def plan_mark(
    table_name: str,
    partition_keys,
    snapshot: str,
    tiers,
    planning_counts: Mapping[str, int],
) -> str:
    """The mark of a scan's plan (see the module docstring)."""
    lines = [
        (protocol.PLAN_TABLE_KEY, table_name),
        (protocol.PLAN_PARTITION_KEYS_KEY, ",".join(partition_keys)),
        (protocol.PLAN_SNAPSHOT_KEY, snapshot),
        (protocol.PLAN_TIERS_KEY, ",".join(tiers)),
    ]
    lines += [
        (name, str(value))
        for name, value in sorted(planning_counts.items())
        if not name.startswith(_NOT_REPORTED)
    ]
    text = "".join(f"{_one_line(k)}\t{_one_line(v)}\n" for k, v in lines)
    return f"{PLAN_MARK}{text.encode().hex()}|"


def _one_line(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " ").replace("\r", " ")


def mark_plan(partition, mark: str):
    """``partition`` carrying the plan ``mark`` (as its ``plan`` attribute)."""
    setattr(partition, ATTRIBUTE, mark)
    return partition


def parse_plan_mark(mark: str) -> dict[str, str]:
    """The lines of a plan mark (for tests; the JVM reads it in ``contract/ScanReport.scala``)."""
    if not mark.startswith(PLAN_MARK) or not mark.endswith("|"):
        raise ValueError(f"not a plan mark: {mark[:40]!r}")
    text = bytes.fromhex(mark[len(PLAN_MARK) : -1]).decode()
    return dict(line.split("\t", 1) for line in text.splitlines())


def task_counts_path() -> str | None:
    """Where this task's counts go (see the module docstring), or None: not in a Spark task,
    or no provider made the directory."""
    context = TaskContext.get()
    if context is None:
        return None
    directory = os.path.join(SparkFiles.getRootDirectory(), TASK_COUNTS_DIR)
    if not os.path.isdir(directory):
        return None
    return os.path.join(directory, f"{context.taskAttemptId()}.tsv")


def write_task_counts(path: str, counts: Mapping[str, int]) -> None:
    """Publish ``counts`` as ``<name>\\t<value>`` lines at ``path`` (whole: temp file +
    ``os.replace``). A failure loses the task's figures in Spark's UI, never the task."""
    text = "".join(f"{name}\t{int(value)}\n" for name, value in sorted(counts.items()) if value)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        log.warning("could not write the task's counts to %s (%s)", path, e)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
