"""A fingerprint of the set of data files a directory holds: what statistics are bound to.

Statistics (min/max/null counts, row counts) are true only for the files they were computed
from. Whoever records them for an external partition (or unpartitioned table) records this
fingerprint of those files beside them (the ``statsFileSet`` parameter); the planner trusts
them only while the directory's current listing has the same fingerprint.

The fingerprint is a digest of every file's name relative to the directory, its size and its
version as the listing gives it (``storage.file_versions``: a local file's inode, change and
modification times, an ETag on S3), so a file added, removed, renamed, resized or rewritten
changes it. It is exactly as strong as a listed version is; it never reads a file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from raptorx_py.storage.hive_layout import DataFile

#: Spelling of the fingerprint's scheme: a change to what is hashed changes it, so a
#: fingerprint of the old scheme never matches (its statistics are then not trusted).
_SCHEME = "v1"


def file_set_fingerprint(directory: str, files: Iterable[DataFile]) -> str:
    """The fingerprint of ``files`` listed under ``directory`` (a filesystem path, as
    ``hive_layout.list_data_files`` was given it): independent of the listing's order."""
    root = directory.rstrip("/") + "/"
    entries = sorted(
        (
            f.path[len(root) :] if f.path.startswith(root) else f.path,
            f.size,
            f.version,
        )
        for f in files
    )
    canonical = json.dumps(entries, separators=(",", ":"))
    return f"{_SCHEME}:{hashlib.sha256(canonical.encode()).hexdigest()}"
