"""The contract between raptorx_py and the native jar: every name one side writes and the
other reads, spelled once on the Python side.

Its twin is ``native/src/main/scala/raptorx/contract/Protocol.scala``: each constant here
is one of that object's, named in upper snake case (``QueryTokenKey`` is
``QUERY_TOKEN_KEY``), with the same value. ``tests/unit/test_jvm_protocol.py`` reads the
Scala file as text and fails when a constant is missing on either side or the values differ.

What crosses, and by which channel (each format in full: docs/design/jvm-contract.md):

- the source names: the public one the JVM provider registers, the internal one the Python
  source registers under behind it (``native.py``, ``session.py``);
- options the provider adds to a Python source's options (``datasource/writer.py``,
  ``scheduling/affinity.py``), and the catalog's requests
  (``datasource/planning/catalog_requests.py``);
- metadata keys on the first field of a schema: the Python source's ``schema()`` tells the
  provider the table's size, its hints and its description
  (``datasource/planning/table_schema.py``), and a catalog request its answer; the provider
  tells the Python reader the query's token (``datasource/planning/query_snapshots.py``) and
  a pushed aggregation (``jvm_contract/pushed_aggregation.py``);
- the soft-affinity mark inside a pickled input partition and its one-byte flag
  (``jvm_contract/placement.py``);
- the vocabulary of the filter JSON the provider writes for an aggregated scan and
  ``jvm_contract/pushed_aggregation.py`` parses;
- the metrics plugin's class and Spark conf, and the files Python processes publish their
  counter totals in for it (``metrics.py``, ``session.py``).
- what a scan reports for Spark's SQL metrics and EXPLAIN (``jvm_contract/scan_report.py``):
  the plan mark in a scan's first pickled partition and its keys, and the directory (under
  Spark's files root, which both sides of a task know) a Python reader writes its task's
  counts to.

Only constants (plain strings) live here, so every layer may import it; what each side does
with them stays in its own module.
"""

from __future__ import annotations

# Source names
PUBLIC_NAME = "tiered_hive"
PYTHON_NAME = "tiered_hive_python"

# Options
#: The write option naming the partition keys of a table the write creates.
PARTITION_BY_OPTION = "partition_by"
#: The live executors (``host/id,host/id``) the provider hands the Python scan.
EXECUTORS_OPTION = "raptorx.executors"
#: The session's ``spark.sql.caseSensitive`` (``datasource.planning.column_names``).
CASE_SENSITIVE_OPTION = "raptorx.case_sensitive"
#: A request of the Spark catalog (JSON), made as a source creation
#: (``datasource/planning/catalog_requests.py``, ``TieredHiveCatalog.scala``).
CATALOG_REQUEST_OPTION = "raptorx.catalog_request"
#: Which options came from the catalog's Spark conf (``spark.sql.catalog.<name>.<property>``),
#: ``<catalog name>:<key>,<key>`` (``datasource/planning/options.py``'s errors name it).
CATALOG_OPTIONS_OPTION = "raptorx.catalog_options"

# Metadata keys on a schema's first field
QUERY_TOKEN_KEY = "raptorx.query_token"
TABLE_BYTES_KEY = "raptorx.table_bytes"
TABLE_ROWS_KEY = "raptorx.table_rows"
EXACT_FILTER_COLUMNS_KEY = "raptorx.exact_filter_columns"
AGGREGATION_PUSHDOWN_KEY = "raptorx.aggregation_pushdown"
#: The columns a pushed aggregation may group by (absent: any; ``aggregation.group_keys``).
AGGREGATION_KEYS_KEY = "raptorx.aggregation_keys"
AGGREGATION_KEY = "raptorx.aggregation"
#: The answer (JSON) to a catalog request, on the one field of its schema.
CATALOG_ANSWER_KEY = "raptorx.catalog_answer"
#: What the catalog shows of a table (JSON: partition keys, type, location).
TABLE_DESCRIPTION_KEY = "raptorx.table_description"

# Soft affinity: ``<mark><location>|<flag>`` at the start of a pickled partition
AFFINITY_MARK = "raptorx-affinity|"
AFFINITY_UNKNOWN = "-"
AFFINITY_PREFERRED = "P"
AFFINITY_PREFERRED_HOST = "H"
AFFINITY_FALLBACK = "F"

# A scan's report (``jvm_contract/scan_report.py``): the plan mark ``<mark><hex of TSV>|`` in
# the first pickled partition, the keys of its descriptive lines (the others are counter
# names), and the directory under Spark's files root for the Python readers' task counts
PLAN_MARK = "raptorx-plan|"
PLAN_TABLE_KEY = "plan.table"
PLAN_PARTITION_KEYS_KEY = "plan.partition_keys"
PLAN_SNAPSHOT_KEY = "plan.snapshot"
PLAN_TIERS_KEY = "plan.tiers"
TASK_COUNTS_DIR = "raptorx-task-counts"

# The status byte opening a driver planner's answer (``DriverPlanner``): ok, or an error text
PLANNER_OK = "O"
PLANNER_FAILED = "E"

# A session conf (tests): the driver's planner's plan requests are also written as Spark's
# own runner writes them, and a query whose two differ fails (``PlanRequest``)
CHECK_PLAN_REQUESTS_CONF = "spark.raptorx.planning.checkRequests"

# Spark's metrics system (``CacheMetricsPlugin``): the plugin class for ``spark.plugins``, the
# Spark conf naming the node-local directory the processes of each application publish their
# totals under (``<dir>/<application id>/<process>/*.tsv``), its default, and the kind opening
# each line of a published file (a counter, or a size)
METRICS_PLUGIN_CLASS = "raptorx.CacheMetricsPlugin"
METRICS_DIR_CONF = "spark.raptorx.metrics.dir"
METRICS_DIR_DEFAULT = "~/.raptorx/spark-metrics"
SNAPSHOT_SUFFIX = ".tsv"
SNAPSHOT_COUNTER = "c"
SNAPSHOT_GAUGE = "g"

# The filter JSON of an aggregated scan: operators
FILTER_NOT = "not"
FILTER_EQUAL = "="
FILTER_EQUAL_NULL_SAFE = "<=>"
FILTER_GREATER = ">"
FILTER_GREATER_OR_EQUAL = ">="
FILTER_LESS = "<"
FILTER_LESS_OR_EQUAL = "<="
FILTER_IN = "in"
FILTER_IS_NULL = "is_null"
FILTER_IS_NOT_NULL = "is_not_null"
FILTER_STARTS_WITH = "starts"
FILTER_ENDS_WITH = "ends"
FILTER_CONTAINS = "contains"
# ... and the kinds of a literal value
VALUE_DECIMAL = "decimal"
VALUE_INTEGER = "integer"
VALUE_DATE = "date"
VALUE_BOOLEAN = "boolean"
VALUE_STRING = "string"


def constants() -> dict[str, str]:
    """Every constant of the contract, by its Python name."""
    return {k: v for k, v in globals().items() if k.isupper() and isinstance(v, str)}
