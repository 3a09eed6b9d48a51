"""Hive's value types, below the metastore and everything that reads it: what a metastore
holds (``model``), partition names, parameter names, write-id lists and column types. Pure
values and rules: nothing here opens a database, a file or a connection."""
