"""raptorx_py: RaptorX-style tiered caching for PySpark reads of Hive-partitioned Parquet.

from raptorx_py import tiered_session
spark = tiered_session()
spark.read.format("tiered_hive").load("tpch.lineitem")
"""

from raptorx_py.session import register, tiered_session

__all__ = ["register", "tiered_session"]
__version__ = "0.1.0"
