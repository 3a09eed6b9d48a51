"""The tables layer: registering, writing and cleaning tables (no Spark here).

- ``table_registration``: an existing Hive-layout directory as an EXTERNAL table.
- A write to a MANAGED table, as a Hive insert-only ACID transaction, one module per job:
  ``write_job`` (the protocol; ``begin_write``), ``write_target`` (which table, at which
  location, with which columns), ``staging`` (the write's own hidden directory),
  ``heartbeat`` (keeping the transaction alive), ``task_files`` (a task's Parquet files),
  ``commit`` (``commit_write``), ``commit_files`` (moving files into ACID directories the
  write owns), ``partition_records`` (the partitions and statistics a commit records),
  ``rollback`` (undoing a failed commit; ``abort_write``).
- ``file_statistics``: the statistics of a set of files (registration and writes alike).
- ``cleaner``: removes what failed writes left on storage.
"""
