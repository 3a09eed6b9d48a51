"""One instance per key in this process: how each tier keeps its cache between queries.

Spark reuses a Python worker across queries and splits, so a tier's cache (its memory, its
open index connection, its recovery) belongs to the process, not to the query that opened
it. Each tier's ``*_cache_for(settings)`` keeps its instances in a ``ProcessRegistry``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


def _always(_value: object) -> bool:
    return True


class ProcessRegistry(Generic[V]):
    """This process's instances, one per key.

    ``get(key, create, reuse)`` returns the instance kept for ``key`` while ``reuse(it)``
    holds (always, by default), and otherwise the one ``create()`` makes, which then replaces
    it for later callers. ``create`` runs under the registry's lock, so two threads asking
    for the same key never make two instances; it may return None (the instance cannot be
    made now), which is returned and not kept: the next call tries again. Nothing is ever
    closed or evicted: a tier with a bounded number of configurations per process keeps
    them all.
    """

    def __init__(self) -> None:
        self._instances: dict[Hashable, V] = {}
        self._lock = threading.Lock()

    def get(
        self,
        key: Hashable,
        create: Callable[[], V | None],
        reuse: Callable[[V], bool] = _always,
    ) -> V | None:
        with self._lock:
            instance = self._instances.get(key)
            if instance is not None and reuse(instance):
                return instance
            instance = create()
            if instance is not None:
                self._instances[key] = instance
            return instance
