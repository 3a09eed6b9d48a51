package org.apache.spark.sql.execution.python.raptorx

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path, Paths}
import java.util.Locale

import scala.util.control.NonFatal

import org.apache.spark.{SparkFiles, TaskContext}
import org.apache.spark.sql.connector.metric.{CustomMetric, CustomTaskMetric}
import org.apache.spark.sql.connector.read.InputPartition
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition
import org.apache.spark.sql.sources.Filter
import org.apache.spark.sql.types.StructType

import raptorx.contract.{PlanReport, TaskCountsFile}

/**
 * What a `tiered_hive` scan shows in Spark's UI, its REST API and `EXPLAIN`. What crosses
 * from Python (the plan mark, the task counts file) is the contract's
 * (`raptorx/contract/ScanReport.scala`), whose Python half is raptorx_py's
 * `jvm_contract/scan_report.py`.
 *
 * - Task metrics ([[ScanReport.TaskMetrics]]), summed by Spark over the scan's tasks: each
 *   is a sum of raptorx counters counted while the task read, the JVM's own (the fragment
 *   hits and the splits it reads, `SplitServingReader`) plus the Python reader's, which it writes to
 *   the task's file under Spark's files root ([[ScanReport.newTaskCountsFile]], read back by
 *   [[ScanReport.readTaskCounts]] when the Python stream ends, before Spark takes the task's
 *   last values).
 * - Driver metrics ([[ScanReport.DriverMetrics]]): the planning time the provider measured
 *   around its one planning call, and what the Python planning counted (partitions, metastore
 *   round trips, listing cache hits), read from the plan mark in the scan's first pickled
 *   partition ([[PlanReport]]).
 * - `EXPLAIN` ([[ScanReport.metadata]]): in the style of Spark's `FileScan`, the filters the
 *   source evaluates (on partition keys, on data columns) and those left to Spark, the read
 *   schema, a pushed aggregation, the snapshot, the tiers on and the partitions read.
 *
 * - Stage input bytes ([[InputBytes]]): Spark 4.3 takes a DSv2 scan's input bytes from
 *   Hadoop's per-thread file system statistics only, so the readers count theirs there.
 *
 * Every figure belongs to its query: task metrics are per task (pyspark's own "data sent to
 * Python workers" metrics too, which pyspark 4.3 keeps in one object per JVM, so they grow
 * from query to query: each reader here has its own, [[ScanReport.freshPythonMetrics]]).
 */
object ScanReport {
  /** A metric of the node: its name, what the UI shows, how it sums, and the raptorx
   * counters it adds up. */
  final case class Metric(name: String, description: String, kind: String, counters: Seq[String]) {
    def custom: CustomMetric = kind match {
      case "bytes" => new RaptorxBytesMetric(name, description)
      case "millis" => new RaptorxMillisMetric(name, description)
      case _ => new RaptorxCountMetric(name, description)
    }
  }

  /** The UI text of the block cache's hits (tests/unit/test_cache_healing.py reads it). */
  val BlockHitsText = "block cache hits (blocks this scan fetched, read again, included)"

  val TaskMetrics: Seq[Metric] = Seq(
    Metric("raptorxSplitsRead", "splits read", "count", Seq("reader.splits_read")),
    // Which reader read each split that was not a fragment hit served by the JVM.
    Metric("raptorxSparkReaderSplits", "splits read by Spark's Parquet reader (JVM)", "count",
      Seq("reader.spark_splits")),
    Metric("raptorxPythonReaderSplits", "splits read by the Python reader", "count",
      Seq("reader.python_splits")),
    Metric("raptorxFragmentHits", "fragment cache hits", "count", Seq("fragment_cache.hits")),
    Metric("raptorxFragmentMisses", "fragment cache misses", "count",
      Seq("fragment_cache.misses")),
    // A hit is a block read from the cache, whoever stored it: a cold scan's footer read
    // fetches a file's last block and its column chunks in that block are then hits, so
    // the text says so (a cold query showed "hits = 3, misses = 3", read as half cached).
    Metric("raptorxBlockHits", BlockHitsText, "count", Seq("block_cache.hits")),
    Metric("raptorxBlockMisses", "block cache misses", "count", Seq("block_cache.misses")),
    Metric("raptorxBlockBytes", "block cache bytes read", "bytes",
      Seq("block_cache.bytes_from_cache")),
    Metric("raptorxFooterHits", "footer cache hits", "count",
      Seq("footer_cache.hits_memory", "footer_cache.hits_disk")),
    Metric("raptorxFooterMisses", "footer cache misses", "count", Seq("footer_cache.misses")),
    Metric("raptorxRemoteRequests", "remote requests", "count", Seq("storage.remote_requests")),
    Metric("raptorxRemoteBytes", "remote bytes read", "bytes", Seq("storage.remote_bytes")),
    Metric("raptorxFilesOpened", "files opened", "count", Seq("reader.files_opened")),
    // Opens of the store's files by the JVM (block fetches, uncached reads); a kept handle
    // served is not an open.
    Metric("raptorxStoreOpens", "store file opens", "count", Seq("storage.file_opens")),
    Metric("raptorxHandleHits", "file handle cache hits", "count", Seq("file_handles.hits")),
    Metric("raptorxStatusRequests", "store status requests (HEAD)", "count",
      Seq("storage.status_requests")),
    Metric("raptorxRowsOut", "rows out of the source", "count", Seq("reader.rows_to_spark")))

  val PlanningTime: Metric = Metric("raptorxPlanningTime", "planning time", "millis", Seq.empty)
  val DriverMetrics: Seq[Metric] = Seq(
    PlanningTime,
    Metric("raptorxPartitionsTotal", "partitions in the table", "count",
      Seq("planner.partitions_total")),
    Metric("raptorxPartitionsAfterPartitionPruning", "partitions after partition pruning",
      "count", Seq.empty),
    Metric("raptorxPartitionsAfterStatsPruning", "partitions after statistics pruning",
      "count", Seq.empty),
    Metric("raptorxMetastoreRoundTrips", "metastore round trips", "count",
      Seq("metastore.round_trips")),
    Metric("raptorxListingCacheHits", "listing cache hits", "count", Seq("listing_cache.hits")),
    Metric("raptorxAbsentPartitionsSkipped", "absent partitions read as empty", "count",
      Seq("planner.partitions_absent_skipped")))

  /** Bytes a task read, for Spark's stage input metrics: Parquet bytes (from the store or
   * the block cache) and fragment entries served. */
  val InputBytesCounters: Seq[String] = Seq("reader.bytes_read", "fragment_cache.bytes_read")

  /** The plan summary in the first of `partitions` carrying the plan mark. */
  def plan(partitions: Seq[InputPartition]): PlanReport =
    PlanReport.of(partitions.iterator.collect { case p: PythonInputPartition => p.pickedPartition })

  def supportedMetrics: Array[CustomMetric] = (TaskMetrics ++ DriverMetrics).map(_.custom).toArray

  private def sum(counts: collection.Map[String, Long], names: Seq[String]): Long =
    names.map(n => counts.getOrElse(n, 0L)).sum

  /** The task metrics' values for a task's `counts` (missing counters are 0). */
  def taskValues(counts: collection.Map[String, Long]): Array[CustomTaskMetric] =
    TaskMetrics.map(m => value(m.name, sum(counts, m.counters))).toArray

  /** The driver metrics of a scan planned in `planningMillis` as `plan` reports. */
  def driverValues(plan: PlanReport, planningMillis: Long): Array[CustomTaskMetric] = {
    val c = plan.counts
    val total = c.getOrElse("planner.partitions_total", 0L)
    val afterValues = total - c.getOrElse("planner.partitions_pruned_by_value", 0L)
    val afterStats = total - c.getOrElse("planner.partitions_pruned", 0L)
    DriverMetrics.map {
      case m if m == PlanningTime => value(m.name, planningMillis)
      case m if m.name == "raptorxPartitionsAfterPartitionPruning" => value(m.name, afterValues)
      case m if m.name == "raptorxPartitionsAfterStatsPruning" => value(m.name, afterStats)
      case m => value(m.name, sum(c, m.counters))
    }.toArray
  }

  private def value(n: String, v: Long): CustomTaskMetric = new CustomTaskMetric {
    override def name(): String = n
    override def value(): Long = v
  }

  /** pyspark's Python runner metrics ("data sent to Python workers" ...), new for one reader:
   * pyspark's `PythonCustomMetric.pythonMetrics` is one map per JVM, never reset. */
  def freshPythonMetrics(): Map[String, org.apache.spark.sql.execution.metric.SQLMetric] =
    org.apache.spark.sql.execution.datasources.v2.python.PythonCustomMetric.pythonMetrics.map {
      case (k, m) => k -> new org.apache.spark.sql.execution.metric.SQLMetric(m.metricType, -1L)
    }

  /** The file for the Python reader's counts of this task: `<Spark's files root>/raptorx-
   * task-counts/<task attempt id>.tsv`. Both sides of the task know the root (the JVM sends
   * it to the Python worker with the task: pyspark's `SparkFiles.getRootDirectory()`), and
   * the attempt id is the JVM's, unique in it; the directory is made here, so a Python reader
   * without this provider finds none and writes nothing. A reader reads and deletes the file
   * when its Python stream ends, so a second reader in the same task starts clean. None
   * outside a task or when the directory cannot be made (the figures are then missing, the
   * read goes on). */
  def newTaskCountsFile(): Option[Path] = {
    val context = TaskContext.get()
    if (context == null) return None
    try {
      val file = TaskCountsFile.path(Paths.get(SparkFiles.getRootDirectory()), context.taskAttemptId())
      Files.createDirectories(file.getParent)
      Files.deleteIfExists(file)
      Some(file)
    } catch { case NonFatal(_) => None }
  }

  /** The counts the Python reader wrote to `file` (`<name>\t<value>` lines), empty when it
   * wrote none. */
  def readTaskCounts(file: Option[Path]): Map[String, Long] = file match {
    case None => Map.empty
    case Some(f) =>
      try TaskCountsFile.parse(new String(Files.readAllBytes(f), UTF_8))
      catch { case NonFatal(_) => Map.empty }
  }

  def deleteTaskCounts(file: Option[Path]): Unit =
    file.foreach(f => try Files.deleteIfExists(f) catch { case NonFatal(_) => () })

  def merged(a: collection.Map[String, Long], b: collection.Map[String, Long]): Map[String, Long] =
    (a.keySet ++ b.keySet).iterator.map(k => k -> (a.getOrElse(k, 0L) + b.getOrElse(k, 0L))).toMap

  /** Bytes a task read (per [[InputBytesCounters]]) in `counts`. */
  def inputBytes(counts: collection.Map[String, Long]): Long = sum(counts, InputBytesCounters)

  /** `EXPLAIN`'s lines for a scan, by key (`SupportsMetadata`, as Spark's `FileScan`). */
  def metadata(facts: ScanFacts, readSchema: StructType, plan: PlanReport): Map[String, String] = {
    val keys = plan.partitionKeys.map(_.toLowerCase(Locale.ROOT)).toSet
    val onKeys = (f: Filter) =>
      f.references.nonEmpty && f.references.forall(r => keys.contains(r.toLowerCase(Locale.ROOT)))
    val (partitionFilters, dataFilters) = facts.pushedFilters.partition(onKeys)
    val base = Map(
      "Table" -> plan.table.getOrElse(facts.table),
      "ReadSchema" -> readSchema.catalogString,
      "PartitionFilters" -> describe(partitionFilters),
      "PushedFilters" -> describe(dataFilters),
      "PostScanFilters" -> describe(facts.postScanFilters),
      "Snapshot" -> plan.snapshot.getOrElse(""),
      "Tiers" -> plan.tiers.mkString("[", ", ", "]"),
      "Partitions" -> plan.partitionsText.getOrElse(""))
    base ++ facts.aggregation.map { case (aggregates, groupBy) =>
      Map("PushedAggregates" -> aggregates, "PushedGroupByExpressions" -> groupBy)
    }.getOrElse(Map.empty)
  }

  /** The one-line form (`df.explain()`): the metadata's keys in order, as `FileScan` does
   * (a key without a value left out; an empty list kept, `PushedFilters: []`). */
  def description(metadata: Map[String, String]): String =
    "TieredHiveScan " + metadata.toSeq.filter(_._2.nonEmpty).sorted
      .map { case (k, v) => s"$k: $v" }.mkString(", ")

  /** Filters as SQL text (`l_quantity > 45`, `ds = DATE '2021-01-03'`). */
  def describe(filters: Seq[Filter]): String = filters.map(sql).mkString("[", ", ", "]")

  /** One filter as SQL text; a filter of another kind as Spark prints it. */
  def sql(f: Filter): String = {
    import org.apache.spark.sql.sources._
    def col(a: String) = if (a.matches("[A-Za-z_][A-Za-z0-9_]*")) a else s"`${a.replace("`", "``")}`"
    def cmp(a: String, op: String, v: Any) = s"${col(a)} $op ${literal(v)}"
    f match {
      case EqualTo(a, v) => cmp(a, "=", v)
      case EqualNullSafe(a, v) => cmp(a, "<=>", v)
      case GreaterThan(a, v) => cmp(a, ">", v)
      case GreaterThanOrEqual(a, v) => cmp(a, ">=", v)
      case LessThan(a, v) => cmp(a, "<", v)
      case LessThanOrEqual(a, v) => cmp(a, "<=", v)
      case In(a, vs) => s"${col(a)} IN (${vs.map(literal).mkString(", ")})"
      case IsNull(a) => s"${col(a)} IS NULL"
      case IsNotNull(a) => s"${col(a)} IS NOT NULL"
      case StringStartsWith(a, v) => s"${col(a)} LIKE ${literal(v + "%")}"
      case StringEndsWith(a, v) => s"${col(a)} LIKE ${literal("%" + v)}"
      case StringContains(a, v) => s"${col(a)} LIKE ${literal("%" + v + "%")}"
      case Not(c) => s"NOT (${sql(c)})"
      case And(l, r) => s"(${sql(l)}) AND (${sql(r)})"
      case Or(l, r) => s"(${sql(l)}) OR (${sql(r)})"
      case other => other.toString
    }
  }

  private def literal(v: Any): String = v match {
    case null => "NULL"
    case s: String => "'" + s.replace("'", "\\'") + "'"
    case d: java.sql.Date => s"DATE '$d'"
    case d: java.time.LocalDate => s"DATE '$d'"
    case t: java.sql.Timestamp => s"TIMESTAMP '$t'"
    case t: java.time.Instant => s"TIMESTAMP '$t'"
    case t: java.time.LocalDateTime => s"TIMESTAMP_NTZ '$t'"
    case d: java.math.BigDecimal => d.toPlainString
    case other => other.toString
  }
}
