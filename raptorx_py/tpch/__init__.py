"""TPC-H for raptorx_py: data in Hive layout, the 22 queries, and a DuckDB oracle.

- ``generate.generate_tpch`` runs ``tpchgen-cli`` and lays its Parquet output out Hive-style
  (lineitem by ``l_shipmonth``, orders by ``o_ordermonth``), cached by a marker file.
- ``queries.query_text`` gives the 22 queries with the specification's validation
  parameters; ``queries.register_views`` binds the table names to DataFrames in Spark.
- ``oracle.duckdb_results`` / ``oracle.compare_results`` check Spark's answers against DuckDB.
- ``load.load_tpch`` copies a generation into a warehouse (file:// or s3://) and registers
  the tables in the metastore (``raptorx tpch load``).

Submodules are imported lazily so that ``import raptorx_py.tpch.queries`` needs neither
DuckDB nor pyspark.
"""

from raptorx_py.tpch.queries import PARTITION_COLUMNS, QUERY_NUMBERS, TABLES

__all__ = ["PARTITION_COLUMNS", "QUERY_NUMBERS", "TABLES"]
