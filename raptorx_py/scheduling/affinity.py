"""Soft affinity: which executor a file's split should run on, so that the same file is read
by the same executor every time and finds its caches warm there.

A split's preferred executor is chosen by rendezvous (highest random weight) hashing of its
file path over the application's live executors: every executor gets a weight
``xxh3_64(executor id, path)`` and the highest wins. Unlike ``hash(path) % n``, an executor
that leaves moves only the files it owned (each to its second-highest executor), and one
that joins takes only the files for which it is now the highest, about ``1/n`` of them.

Usable without Spark: an executor is an ``Executor(host, id)``; ``location`` renders the
executor-level location string Spark's scheduler understands (``executor_<host>_<id>``,
``TaskLocation``), so two executors on one host are told apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import xxhash

from raptorx_py import jvm_protocol

NO_PREFERENCE = "NO_PREFERENCE"
SOFT_AFFINITY = "SOFT_AFFINITY"
STRATEGIES = (NO_PREFERENCE, SOFT_AFFINITY)

#: The read option by which the JVM provider hands the live executors to the Python scan:
#: ``host/id`` pairs joined by commas (``native/.../Affinity.scala``; ``jvm_protocol``).
EXECUTORS_OPTION = jvm_protocol.EXECUTORS_OPTION


@dataclass(frozen=True, order=True)
class Executor:
    """One live executor: the host its block manager registered with, and its id."""

    host: str
    id: str

    @property
    def location(self) -> str:
        """Spark's executor-level preferred location (``ExecutorCacheTaskLocation``)."""
        return f"executor_{self.host}_{self.id}"


def parse_executors(text: str | None) -> tuple[Executor, ...]:
    """The executors of an ``EXECUTORS_OPTION`` value (``host/id,host/id``), sorted; empty
    for None or ''. A host may itself contain no ``/``; the id is after the last one."""
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, ident = item.rpartition("/")
        if not sep or not host or not ident:
            raise ValueError(
                f"bad executor '{item}' in option {EXECUTORS_OPTION}: expected host/id"
            )
        out.append(Executor(host, ident))
    return tuple(sorted(set(out)))


def format_executors(executors: Iterable[Executor]) -> str:
    return ",".join(f"{e.host}/{e.id}" for e in executors)


def weight(executor_id: str, path: str) -> int:
    """The rendezvous weight of ``path`` on ``executor_id``: stable across processes and
    runs (xxh3, not Python's salted ``hash``)."""
    return xxhash.xxh3_64_intdigest(f"{executor_id}\x00{path}".encode())


def ranked(path: str, executors: Sequence[Executor], k: int = 1) -> tuple[Executor, ...]:
    """The ``k`` executors ``path`` prefers, best first (fewer if there are fewer). Ties
    (equal 64-bit weights) go to the smaller executor id, so the order is total."""
    if not executors or k <= 0:
        return ()
    order = sorted(executors, key=lambda e: (-weight(e.id, path), e.id, e.host))
    return tuple(order[:k])


def preferred(path: str, executors: Sequence[Executor]) -> Executor | None:
    """The executor ``path`` prefers, or None without executors."""
    best = ranked(path, executors, 1)
    return best[0] if best else None


def assignment(paths: Iterable[str], executors: Sequence[Executor]) -> dict[str, Executor]:
    """Each path's preferred executor (paths without one are left out)."""
    out = {}
    for p in paths:
        e = preferred(p, executors)
        if e is not None:
            out[p] = e
    return out
