"""Keeping a write's transaction alive: the metastore expires an open transaction that has
not heartbeated for its timeout (``hive.txn.timeout``), so tasks and a commit waiting for a
lock heartbeat it now and then; no thread."""

from __future__ import annotations

import time
from collections.abc import Callable

from raptorx_py.config.settings import Settings
from raptorx_py.metastore.store import Metastore, open_metastore


class TxnHeartbeat:
    """Keeps a transaction alive from a task or a commit: a heartbeat at most every
    ``interval`` seconds (by ``clock``); no thread."""

    def __init__(
        self,
        settings: Settings,
        txn_id: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval: float | None = None,
        metastore: Metastore | None = None,
    ):
        self.settings, self.txn_id, self.clock = settings, txn_id, clock
        self.interval = settings.txn_timeout / 3 if interval is None else interval
        self.metastore = metastore  # None: open one per beat (a task has none of its own)
        self._last: float | None = None

    def beat(self, force: bool = False) -> None:
        now = self.clock()
        if not force and self._last is not None and now - self._last < self.interval:
            return
        if self.metastore is not None:
            self.metastore.heartbeat(txn_id=self.txn_id)
        else:
            with open_metastore(self.settings.metastore_connection) as ms:
                ms.heartbeat(txn_id=self.txn_id)
        self._last = now

    def sleeping_alive(self, sleep: Callable[[float], None]) -> Callable[[float], None]:
        """``sleep``, beating after every ``interval`` of it: waiting (for a lock) must not
        let the transaction expire meanwhile."""

        def sleep_alive(seconds: float) -> None:
            while seconds > 0:
                step = min(seconds, self.interval)
                sleep(step)
                seconds -= step
                self.beat(force=True)

        return sleep_alive
