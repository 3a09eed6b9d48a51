"""Storage: filesystems for table URLs, the Hive and ACID directory layouts, opening Parquet
and file versions. The cache tiers over it are in ``raptorx_py.cache``."""
