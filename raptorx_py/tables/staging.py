"""A write's staging directory: where its tasks write before the commit moves their files.

``<table location>/.raptorx-staging-<txn>-<token>``: named after the write's transaction (so
the cleaner can tell, by the transaction's state, whether it may go) and hidden (readers and
listings skip names starting with ``.``). It belongs to the write alone and is removed,
best effort, when the write commits or aborts; the cleaner removes what a dead one left.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from raptorx_py.config.settings import Settings
from raptorx_py.storage.fs import filesystem_for

log = logging.getLogger(__name__)

STAGING_PREFIX = ".raptorx-staging-"


def staging_dir_name(txn_id: int, token: str | None = None) -> str:
    return f"{STAGING_PREFIX}{txn_id}-{token or uuid.uuid4().hex[:12]}"


def staging_txn_id(name: str) -> int | None:
    """The transaction a staging directory belongs to, or None for any other name."""
    name = name.rstrip("/").rsplit("/", 1)[-1]
    if not name.startswith(STAGING_PREFIX):
        return None
    txn, _, _ = name[len(STAGING_PREFIX) :].partition("-")
    return int(txn) if txn.isdigit() else None


def remove_staging(settings: Settings, staging_url: str) -> None:
    """Remove the staging directory and everything in it, best effort."""
    fs, path = filesystem_for(staging_url, settings)
    best_effort(lambda: fs.rm(path, recursive=True))


def best_effort(action: Callable[[], object]) -> None:
    """Run one cleanup step; a missing file is already clean, any other failure is logged
    and ignored (the cleaner removes leftovers; the error that caused the cleanup matters
    more)."""
    try:
        action()
    except FileNotFoundError:
        pass
    except Exception:  # noqa: BLE001 - best-effort cleanup; the cleaner removes leftovers
        log.warning("cleanup step failed", exc_info=True)
