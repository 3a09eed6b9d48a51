"""Soft affinity: which executor a file's split should run on, so that the same file is read
on the same node every time and finds that node's caches warm there.

Caches live per node (the block, footer and fragment caches are directories on the node's
local disk, shared by every executor of the node), so a file's place is chosen in two steps,
both by rendezvous (highest random weight) hashing of its path:

1. the **host**: among the hosts of the live executors, the one with the highest
   ``xxh3_64("host", host, path)``;
2. the **executor** of that host: among its executors, the highest ``xxh3_64(executor id,
   path)``.

``ranked`` lists every executor in that order: the preferred host's executors first (best
first), then the next host's, and so on. So a file's second choice is a sibling executor on
its own host when the host has one (same caches), else the best executor of its second host.

Consequences (each tested by counts in ``tests/unit/test_affinity.py``):

- an executor replaced on the same host (a new id) keeps the host's files: hosts are weighed
  without ids, and within the host the new executor takes its rendezvous share;
- a host that leaves moves only its own files (each to its second host), and one that joins
  takes only the files for which it is now the highest, about ``1/hosts`` of them; unlike
  ``hash(path) % n``, nothing moves between the hosts that stay;
- ``balanced_assignment`` bounds how unevenly one scan's files load the executors: files of
  an executor holding more than ``max_imbalance`` splits above the least loaded one go to
  their second choice instead, as few as it takes (RaptorX's "busy worker, secondary
  worker").

Usable without Spark: an executor is an ``Executor(host, id)``; ``location`` renders the
executor-level location string Spark's scheduler understands (``executor_<host>_<id>``,
``TaskLocation``), so two executors on one host are told apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import xxhash

from raptorx_py.jvm_contract import protocol

NO_PREFERENCE = "NO_PREFERENCE"
SOFT_AFFINITY = "SOFT_AFFINITY"
STRATEGIES = (NO_PREFERENCE, SOFT_AFFINITY)

#: The read option by which the JVM provider hands the live executors to the Python scan:
#: ``host/id`` pairs joined by commas (``native/.../Affinity.scala``; ``jvm_contract.protocol``).
EXECUTORS_OPTION = protocol.EXECUTORS_OPTION

#: Spark's prefix of an executor-level location (``ExecutorCacheTaskLocation``).
LOCATION_PREFIX = "executor_"


@dataclass(frozen=True, order=True)
class Executor:
    """One live executor: the host its block manager registered with, and its id."""

    host: str
    id: str

    @property
    def location(self) -> str:
        """Spark's executor-level preferred location (``ExecutorCacheTaskLocation``)."""
        return f"{LOCATION_PREFIX}{self.host}_{self.id}"


def host_of_location(location: str) -> str:
    """The host of an executor-level location (``executor_<host>_<id>``), as Spark's
    ``TaskLocation`` reads it: up to the first ``_`` after the prefix (Spark's hosts have
    none)."""
    if not location.startswith(LOCATION_PREFIX) or "_" not in location[len(LOCATION_PREFIX) :]:
        raise ValueError(f"not an executor location: {location!r} (expected executor_<host>_<id>)")
    return location[len(LOCATION_PREFIX) :].split("_", 1)[0]


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
    """The rendezvous weight of ``path`` on ``executor_id`` (within its host): stable across
    processes and runs (xxh3, not Python's salted ``hash``)."""
    return xxhash.xxh3_64_intdigest(f"{executor_id}\x00{path}".encode())


def host_weight(host: str, path: str) -> int:
    """The rendezvous weight of ``path`` on ``host``: no executor id in it, so a host keeps
    its files whichever executors it runs. A separate name space from ``weight``'s."""
    return xxhash.xxh3_64_intdigest(f"host\x00{host}\x00{path}".encode())


def ranked(path: str, executors: Sequence[Executor], k: int = 1) -> tuple[Executor, ...]:
    """The ``k`` executors ``path`` prefers, best first (fewer if there are fewer): hosts by
    ``host_weight``, and within a host its executors by ``weight``. Ties (equal 64-bit
    weights) go to the smaller host, then the smaller executor id, so the order is total."""
    if not executors or k <= 0:
        return ()
    order = sorted(
        executors, key=lambda e: (-host_weight(e.host, path), e.host, -weight(e.id, path), e.id)
    )
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


def balanced_assignment(
    loads: Mapping[str, int], executors: Sequence[Executor], max_imbalance: int
) -> tuple[dict[str, Executor], int]:
    """Each path's executor for one scan, and how many paths went to their second choice.

    ``loads``: each path's splits (the load it puts on its executor). Every path starts on
    its preferred executor. Then, with ``max_imbalance`` > 0, paths are taken in sorted
    order, and one whose executor holds more than ``max_imbalance`` splits above the least
    loaded executor (it is busy) moves to its second choice (``ranked(path, executors,
    2)[1]``) when that leaves the second choice lighter than the busy one was, so only as
    many paths move as it takes to come within the bound. The second choice reads and
    caches the file as its own. ``max_imbalance`` 0: no bound (``assignment``).

    Limits: the bound is per scan and counted in splits, not bytes or time; a path moves at
    most to its second choice, so each file is cached on at most two executors; one pass
    (with three or more executors, a busy executor none of whose paths has the least loaded
    one as second choice stays busy). Which paths move depends on the scan's other paths,
    so a file may run on its second choice in one query and its first in another (both
    then cache it)."""
    choices = {p: ranked(p, executors, 2) for p in sorted(loads)}
    out = {p: c[0] for p, c in choices.items() if c}
    load = {e: 0 for e in executors}
    for p, e in out.items():
        load[e] += loads[p]
    moved = 0
    if max_imbalance <= 0 or len(executors) < 2:
        return out, moved
    for p, c in choices.items():
        first, second = c[0], c[1]
        w = loads[p]
        if load[first] - min(load.values()) > max_imbalance and load[second] + w < load[first]:
            out[p] = second
            load[first] -= w
            load[second] += w
            moved += 1
    return out, moved
