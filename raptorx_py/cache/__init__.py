"""The storage tiers: file-listing cache (driver), Parquet footer cache and local-disk block
cache (executors). Each module is usable and tested without Spark and without the others;
``raptorx_py.datasource`` composes them."""
