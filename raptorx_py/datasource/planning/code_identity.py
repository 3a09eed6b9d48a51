"""The identity of the code that computes a split's result, for the fragment key
(``datasource.planning.fragment_keys``): a result computed by other code is never served.

``code_identity()`` is a digest of
- every ``.py`` file of the raptorx_py package this process runs (its path in the package
  and its bytes): a fix to decoding, decimal rounding, the calendar check or the key itself
  is another identity, whether or not anyone remembered to bump a version, and
- pyarrow's version: it decodes the Parquet pages, casts and evaluates the filters, and
- Python's version: our code computes on its integers, ``Decimal`` and dates.

It is computed once per process (the package's sources are read once) and is the same
in every process that runs the same files, so the node's Python workers and a second
application share entries.

Not in it, and why:
- The native jar: it chooses what is pushed (the pushed aggregation's description, which
  the key holds by value) and turns a result into Spark's columns after the cache; it does
  not compute a cached result. pyspark likewise: the result is Arrow, and its Arrow schema
  is in the key.
- numpy and the other libraries: no cached result passes through them.

Limits: any change to any of the package's files, a comment too, is a new identity: the whole
fragment cache misses after an upgrade (the old entries age out by LRU and expiry). The files
are read at first use: a file edited while a process runs is taken into account by the
processes that start afterwards, while modules already imported run the old code: restart
the application after editing an installed package.
"""

from __future__ import annotations

import functools
import hashlib
import platform
from pathlib import Path

import pyarrow as pa

#: The raptorx_py package directory (this file is
#: ``raptorx_py/datasource/planning/code_identity.py``).
PACKAGE_DIR = Path(__file__).resolve().parents[2]


def source_digest(package_dir: Path) -> str:
    """A digest of every ``.py`` file under ``package_dir``: its relative path and bytes, in
    path order (compiled ``__pycache__`` files are not sources)."""
    h = hashlib.sha256()
    files = sorted(
        p
        for p in package_dir.rglob("*.py")
        if "__pycache__" not in p.relative_to(package_dir).parts
    )
    for path in files:
        data = path.read_bytes()
        name = path.relative_to(package_dir).as_posix().encode()
        # Lengths first: no two different file sets hash the same byte stream.
        h.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


@functools.cache
def code_identity() -> str:
    """This process's code identity: the package's source digest, pyarrow's and Python's
    versions."""
    return (
        f"raptorx_py:{source_digest(PACKAGE_DIR)[:32]};pyarrow:{pa.__version__};"
        f"python:{platform.python_implementation()}-{platform.python_version()}"
    )
