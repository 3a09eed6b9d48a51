"""The tiered_hive Spark data source: planning (pruning, splits), scanning, and the
pyspark DataSource/DataSourceReader that compose them."""
