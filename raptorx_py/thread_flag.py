"""A per-thread boolean, on within a block (``with flag.on():``), off elsewhere; blocks nest."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ThreadFlag:
    """On for the thread running inside ``on()``; each thread sees only its own."""

    def __init__(self) -> None:
        self._local = threading.local()

    def is_on(self) -> bool:
        return bool(getattr(self._local, "on", False))

    @contextmanager
    def on(self) -> Iterator[None]:
        previous = self.is_on()
        self._local.on = True
        try:
            yield
        finally:
            self._local.on = previous
