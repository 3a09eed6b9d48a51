package raptorx.contract

/**
 * The contract between raptorx_py and this jar: every name one side writes and the other
 * reads, spelled once on this side. Its twin is `raptorx_py/jvm_contract/protocol.py`,
 * which spells each constant here once on the Python side, named in upper snake case
 * (`QueryTokenKey` is `QUERY_TOKEN_KEY`); `tests/unit/test_jvm_protocol.py` reads this file
 * as text and fails when a constant is missing on either side or the two values differ.
 *
 * What crosses, and by which channel:
 *  - the source names: the public one this provider registers, the internal one the Python
 *    source registers under;
 *  - read and write options the provider adds to a Python source's options, and the
 *    catalog's requests;
 *  - metadata keys on the first field of a schema: the Python source's `schema()` tells the
 *    provider the table's size, its hints and its description, and a catalog request its
 *    answer; the provider tells the Python reader the
 *    query's token and a pushed aggregation;
 *  - the soft-affinity mark inside a pickled input partition, and its one-byte flag;
 *  - the vocabulary of the filter JSON the provider writes for an aggregated scan
 *    (`PushedAggregation`) and `raptorx_py.jvm_contract.pushed_aggregation` parses;
 *  - the metrics plugin's class and Spark conf, and the files Python processes publish their
 *    counter totals in for it (`CacheMetricsPlugin`, `raptorx_py.metrics`).
 *  - what a scan reports for Spark's SQL metrics and EXPLAIN (`ScanReport`): the plan mark
 *    in a scan's first pickled partition and its keys, and the directory (under Spark's
 *    files root, which both sides of a task know) a Python reader writes its task's counts to.
 *
 * Only constants live here (values must be plain string literals, one per `val`, for the
 * test's reading); the formats built from them are this package's other files, each
 * mirroring a module of `raptorx_py/jvm_contract/` (docs/design/jvm-contract.md).
 */
object Protocol {
  // Source names
  val PublicName = "tiered_hive"
  val PythonName = "tiered_hive_python"

  // Options
  /** The write option naming the partition keys of a table the write creates. */
  val PartitionByOption = "partition_by"
  /** The live executors (`host/id,host/id`) handed to the Python scan (soft affinity). */
  val ExecutorsOption = "raptorx.executors"
  /** The session's `spark.sql.caseSensitive`, by which the Python source resolves a read's
   * column names (the Python worker has no SQLConf). */
  val CaseSensitiveOption = "raptorx.case_sensitive"
  /** A request of the Spark catalog (JSON), made as a source creation (`TieredHiveCatalog`). */
  val CatalogRequestOption = "raptorx.catalog_request"
  /** Which options came from the catalog's Spark conf (`spark.sql.catalog.<name>.<property>`),
   * `<catalog name>:<key>,<key>`, so the Python source's errors say where each came from. */
  val CatalogOptionsOption = "raptorx.catalog_options"

  // Metadata keys on a schema's first field
  val QueryTokenKey = "raptorx.query_token"
  val TableBytesKey = "raptorx.table_bytes"
  val TableRowsKey = "raptorx.table_rows"
  val ExactFilterColumnsKey = "raptorx.exact_filter_columns"
  val AggregationPushdownKey = "raptorx.aggregation_pushdown"
  /** The columns a pushed aggregation may group by (absent: any). */
  val AggregationKeysKey = "raptorx.aggregation_keys"
  val AggregationKey = "raptorx.aggregation"
  /** The answer (JSON) to a catalog request, on the one field of its schema. */
  val CatalogAnswerKey = "raptorx.catalog_answer"
  /** What the catalog shows of a table (JSON: partition keys, type, location). */
  val TableDescriptionKey = "raptorx.table_description"

  // Soft affinity: `<mark><location>|<flag>` at the start of a pickled partition
  val AffinityMark = "raptorx-affinity|"
  val AffinityUnknown = "-"
  val AffinityPreferred = "P"
  /** On another executor of the preferred executor's host, whose caches it shares. */
  val AffinityPreferredHost = "H"
  val AffinityFallback = "F"

  // A scan's report (`ScanReport`): the plan mark `<mark><hex of TSV>|` in the first pickled
  // partition, the keys of its descriptive lines (the others are counter names), and the
  // directory under Spark's files root for the Python readers' task counts
  val PlanMark = "raptorx-plan|"
  val PlanTableKey = "plan.table"
  val PlanPartitionKeysKey = "plan.partition_keys"
  val PlanSnapshotKey = "plan.snapshot"
  val PlanTiersKey = "plan.tiers"
  val TaskCountsDir = "raptorx-task-counts"

  // The status byte opening a driver planner's answer (`DriverPlanner`): ok, or an error text
  val PlannerOk = "O"
  val PlannerFailed = "E"

  // A session conf (tests): the driver's planner's plan requests are also written as Spark's
  // own runner writes them, and a query whose two differ fails (`PlanRequest`)
  val CheckPlanRequestsConf = "spark.raptorx.planning.checkRequests"

  // Spark's metrics system (`CacheMetricsPlugin`): the plugin class for `spark.plugins`, the
  // Spark conf naming the node-local directory the processes of each application publish
  // their totals under (`<dir>/<application id>/<process>/*.tsv`), its default, and the
  // kind opening each line of a published file (a counter, or a size)
  val MetricsPluginClass = "raptorx.CacheMetricsPlugin"
  val MetricsDirConf = "spark.raptorx.metrics.dir"
  val MetricsDirDefault = "~/.raptorx/spark-metrics"
  val SnapshotSuffix = ".tsv"
  val SnapshotCounter = "c"
  val SnapshotGauge = "g"

  // The filter JSON of an aggregated scan: operators
  val FilterNot = "not"
  val FilterEqual = "="
  val FilterEqualNullSafe = "<=>"
  val FilterGreater = ">"
  val FilterGreaterOrEqual = ">="
  val FilterLess = "<"
  val FilterLessOrEqual = "<="
  val FilterIn = "in"
  val FilterIsNull = "is_null"
  val FilterIsNotNull = "is_not_null"
  val FilterStartsWith = "starts"
  val FilterEndsWith = "ends"
  val FilterContains = "contains"
  // ... and the kinds of a literal value
  val ValueDecimal = "decimal"
  val ValueInteger = "integer"
  val ValueDate = "date"
  val ValueBoolean = "boolean"
  val ValueString = "string"
}
