"""The tiered_hive Spark data source: the pyspark ``DataSource`` (``source``), its reader
(``reader``) and writer (``writer``), over two halves: the planning side in the driver
(``planning/``) and the reading side in the executors (``reading/``)."""
