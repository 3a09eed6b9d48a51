"""Names of the table and partition parameters raptorx_py writes or reads: one spelling each.

The statistics keys are Hive's basic statistics (``StatsSetupConst``: ``numRows``,
``numFiles``, ``totalSize``); ``writeId`` records the write id that last wrote a managed
partition (or unpartitioned managed table), ``sealed`` marks an external partition complete
(value ``"true"``: its listing may be cached), ``statsFileSet`` names the files an external
partition's statistics describe.
"""

from __future__ import annotations

#: Rows of a partition (or an unpartitioned table); absent when unknown.
NUM_ROWS_PARAM = "numRows"
#: Data files of a partition (or an unpartitioned table).
NUM_FILES_PARAM = "numFiles"
#: Bytes of those files.
TOTAL_SIZE_PARAM = "totalSize"
#: The basic statistics a write or a registration records, in this order.
COUNT_PARAMS = (NUM_ROWS_PARAM, NUM_FILES_PARAM, TOTAL_SIZE_PARAM)
#: The write id that last wrote a managed table's partition (or the unpartitioned table).
WRITE_ID_PARAM = "writeId"
#: Seals a partition (value ``"true"``): its file listing may be cached.
SEALED_PARAM = "sealed"
#: The fingerprint (``storage.file_sets``) of the files an external partition's (or
#: unpartitioned table's) statistics were computed from: they are trusted only while its
#: listing has this fingerprint.
STATS_FILES_PARAM = "statsFileSet"
