"""raptorx_py: RaptorX-style tiered caching for PySpark reads of Hive-partitioned Parquet.

from raptorx_py import tiered_session
spark = tiered_session()
spark.read.format("tiered_hive").load("tpch.lineitem")

``register`` and ``tiered_session`` load on first use (``session``, which imports pyspark's
data source API and pyarrow), so that ``import raptorx_py`` and the ``raptorx`` command's
``--help`` stay light: the one lazy import outside ``cli/``'s command loading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raptorx_py.session import register, tiered_session

__all__ = ["register", "tiered_session"]
__version__ = "0.1.0"


def __getattr__(name: str):
    """``register`` and ``tiered_session``, from ``session`` on first use (PEP 562)."""
    if name in __all__:
        # Deferred, the one exception outside cli/: see the module docstring.
        from raptorx_py import session

        return getattr(session, name)
    raise AttributeError(f"module 'raptorx_py' has no attribute {name!r}")
