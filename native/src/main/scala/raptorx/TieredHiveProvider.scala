package raptorx

import java.util
import java.util.concurrent.atomic.AtomicReference

import org.apache.spark.sql.connector.catalog.{SupportsRead, SupportsWrite, Table, TableCapability, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation
import org.apache.spark.sql.connector.read.{Scan, ScanBuilder, SupportsPushDownAggregates, SupportsPushDownFilters, SupportsPushDownRequiredColumns}
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, WriteBuilder}
import org.apache.spark.sql.execution.datasources.v2.python.{PythonDataSourceCreationResult, PythonDataSourceV2, PythonScanBuilder, PythonWriteBuilder}
import org.apache.spark.sql.execution.datasources.v2.python.raptorx.PlannedPython
import org.apache.spark.sql.execution.python.raptorx.{Affinity, ArrowColumnarScan, ScanFacts}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.sources.{DataSourceRegister, Filter}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * The JVM face of `tiered_hive`: registered under the public name, it wraps the Python data
 * source (registered by raptorx_py under [[TieredHiveProvider.PythonName]]).
 *
 * Why it exists: pyspark 4.3's `PythonDataSourceV2` keeps ONE read plan (partitions + read
 * function) per instance, set by the last filter pushdown. Every scan of one DataFrame or view
 * shares that instance, so a second scan with other filters, or a later query with none,
 * silently reads with the wrong plan. Here every scan builder gets a fresh
 * `PythonDataSourceV2`, so each scan of each query plans exactly once, with its own filters.
 *
 * Contract: Spark's optimizer decides the columns and filters of each scan
 * ([[TieredHiveScanBuilder]]); the Python reader receives exactly those columns and every
 * filter; everything else (planning, reading) is the Python source's.
 *
 * `load()` creates the Python `DataSource` once (its `__init__` and `schema()`, in a Python
 * worker); the pickled instance is handed from `inferSchema` to the table `getTable` makes
 * next, and each scan's fresh `PythonDataSourceV2` starts from it instead of creating it
 * again: one Python worker call fewer per scan. The instance holds the read's options and
 * resolved properties, never a snapshot or a plan (the reader takes those, per scan).
 */
class TieredHiveProvider extends TableProvider with DataSourceRegister {
  /** What the last `inferSchema` created, for the `getTable` of the same read. Spark makes a
   * provider per `load()` and calls the two in turn; the options must match to be used. */
  @volatile private var inferred: Option[(util.Map[String, String], PythonDataSourceCreationResult)] =
    None

  override def shortName(): String = TieredHiveProvider.PublicName

  override def inferSchema(options: CaseInsensitiveStringMap): StructType = {
    // Here and in getTable, not in the constructor: Spark makes every registered provider
    // when it looks up any format, and a mismatch must not break reads of other formats.
    NativeCompatibility.check()
    val created = TieredHiveProvider.freshPythonSource().getOrCreateDataSourceInPython(
      TieredHiveProvider.PythonName, TieredHiveProvider.withCaseSensitivity(options), None)
    inferred = Some((options.asCaseSensitiveMap(), created))
    SourceHints.split(TableStatistics.split(TableDescription.split(created.schema)._1)._1)._1
  }

  override def getTable(
      schema: StructType,
      partitioning: Array[Transform],
      properties: util.Map[String, String]): Table = {
    NativeCompatibility.check()
    val created = inferred.collect { case (options, c) if options == properties => (options, c) }
    inferred = None
    new TieredHiveTable(schema, partitioning, created,
      created.flatMap { case (_, c) => TableStatistics.split(c.schema)._2 },
      created.map { case (_, c) =>
        SourceHints.split(TableDescription.split(c.schema)._1)._2
      }.getOrElse(SourceHints.Empty),
      tableName = TieredHiveProvider.describedName(properties))
  }

  override def supportsExternalMetadata(): Boolean = true
}

object TieredHiveProvider {
  val PublicName: String = Protocol.PublicName
  val PythonName: String = Protocol.PythonName
  /** The write option naming the partition keys of a table the write creates. */
  val PartitionByOption: String = Protocol.PartitionByOption
  /** The read option carrying the session's `spark.sql.caseSensitive` to the Python source,
   * which resolves the read's column names by it (raptorx_py/datasource/column_names.py):
   * the Python worker has no SQLConf. */
  val CaseSensitiveOption: String = Protocol.CaseSensitiveOption

  /** The table a read names (`load("db.t")`: the option `path`, or `table`), as given. */
  def tableOf(options: util.Map[String, String]): Option[String] = {
    val lower = new CaseInsensitiveStringMap(options)
    Option(lower.get("path")).orElse(Option(lower.get("table"))).filter(_.nonEmpty)
  }

  /** `tiered_hive db.t`, or `tiered_hive` when the read names no table. */
  def describedName(options: util.Map[String, String]): String =
    tableOf(options).map(t => s"$PublicName $t").getOrElse(PublicName)

  /** `options` plus the session's `spark.sql.caseSensitive`, for creating the Python source. */
  def withCaseSensitivity(options: CaseInsensitiveStringMap): CaseInsensitiveStringMap = {
    val merged = new util.HashMap[String, String](options.asCaseSensitiveMap())
    merged.put(CaseSensitiveOption, SQLConf.get.caseSensitiveAnalysis.toString)
    new CaseInsensitiveStringMap(merged)
  }

  /** A fresh `PythonDataSourceV2` whose Python `DataSource` the application's planner
   * creates when one is registered (`DriverPlanners`), else a planning worker. */
  def freshPythonSource(): PythonDataSourceV2 = {
    val ds = new org.apache.spark.sql.execution.datasources.v2.python.raptorx.PlannedPythonDataSource()
    ds.setShortName(PythonName)
    ds
  }

  /** A fresh `PythonDataSourceV2` (its own read plan) whose Python `DataSource` is `created`. */
  def pythonSourceFrom(created: PythonDataSourceCreationResult): PythonDataSourceV2 = {
    val ds = new CreatedPythonDataSource(created)
    ds.setShortName(PythonName)
    ds
  }
}

/** pyspark's source, with the Python `DataSource` already created (pickled); everything else,
 * the read plan above all, is its own. */
private class CreatedPythonDataSource(created: PythonDataSourceCreationResult)
    extends PythonDataSourceV2 {
  override def getOrCreateDataSourceInPython(
      shortName: String,
      options: CaseInsensitiveStringMap,
      userSpecifiedSchema: Option[StructType]): PythonDataSourceCreationResult = created
}

/**
 * Reads (see [[TieredHiveScanBuilder]]) and batch writes: `df.write.format("tiered_hive")
 * .mode("append" | "overwrite").save("db.table")`. A write is the Python source's writer over a
 * fresh `PythonDataSourceV2` (pyspark's `PythonWriteBuilder`, which also handles TRUNCATE, the
 * overwrite of the whole table). `partitionBy(...)` reaches here as identity transforms; they
 * are handed to the Python writer as the option `partition_by` (what a Python-only session
 * passes by hand), and reported by `partitioning()` so that Spark's check of a `partitionBy`
 * against the table passes: whether it matches the table's keys is the Python writer's check.
 *
 * A table of the Spark catalog ([[TieredHiveCatalog]]) is this table too, with its name,
 * `tableOptions` (the table's `path` and the catalog's property overrides: a SQL statement's
 * own scan and write options are empty), and `tableProperties` (what `DESCRIBE EXTENDED`
 * shows); a scan's or a write's own options win over `tableOptions`.
 */
class TieredHiveTable(
    tableSchema: StructType,
    tablePartitioning: Array[Transform] = Array.empty,
    inferred: Option[(util.Map[String, String], PythonDataSourceCreationResult)] = None,
    statistics: Option[TableStatistics] = None,
    hints: SourceHints = SourceHints.Empty,
    tableName: String = TieredHiveProvider.PublicName,
    tableOptions: util.Map[String, String] = util.Collections.emptyMap(),
    tableProperties: util.Map[String, String] = util.Collections.emptyMap())
    extends Table with SupportsRead with SupportsWrite {
  /** The Python `DataSource` of this read, created once: by `inferSchema`, or by the first
   * scan when the schema was given. Scans with other options create their own. */
  private val created = new AtomicReference(inferred.orNull)

  /** The Python `DataSource` made with the read's options plus the live executors (soft
   * affinity on a cluster), kept for the next scan while the executors (and the options)
   * stay the same: a DataFrame or view read by query after query then creates it once, not
   * once per scan (one planner callback, or one Python worker call, fewer per scan). */
  private val createdWithExecutors =
    new AtomicReference[(util.Map[String, String], PythonDataSourceCreationResult)]()

  /** What EXPLAIN and the UI name the scan (`BatchScan <name>`), so the two sides of a join
   * say which table each reads: `tiered_hive db.table` for a `load()`, the catalog's name of
   * the table (`raptorx.db.table`) for a catalog's table. */
  override def name(): String = tableName

  override def properties(): util.Map[String, String] = tableProperties

  override def schema(): StructType = tableSchema

  override def partitioning(): Array[Transform] = tablePartitioning

  override def capabilities(): util.Set[TableCapability] =
    util.EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE,
      TableCapability.TRUNCATE)

  override def newScanBuilder(scanOptions: CaseInsensitiveStringMap): ScanBuilder = {
    val started = System.nanoTime()
    val options = withTableOptions(scanOptions)
    // Creating the Python source (a scan with options of its own) is part of its planning.
    val source = pythonSource(options)
    new TieredHiveScanBuilder(tableSchema, options, source, statistics, hints,
      pythonSourceWithExecutors,
      TieredHiveProvider.tableOf(options.asCaseSensitiveMap()).getOrElse(name()),
      System.nanoTime() - started)
  }

  private def pythonSourceWithExecutors(options: CaseInsensitiveStringMap): PythonDataSourceV2 = {
    val key = TieredHiveProvider.withCaseSensitivity(options)
    val known = createdWithExecutors.get()
    if (known != null && known._1 == key.asCaseSensitiveMap()) {
      return TieredHiveProvider.pythonSourceFrom(known._2)
    }
    val made = TieredHiveProvider.freshPythonSource().getOrCreateDataSourceInPython(
      TieredHiveProvider.PythonName, key, Some(tableSchema))
    createdWithExecutors.set((key.asCaseSensitiveMap(), made))
    TieredHiveProvider.pythonSourceFrom(made)
  }

  /** `options` over the table's own (none but for a catalog's table). */
  private def withTableOptions(options: CaseInsensitiveStringMap): CaseInsensitiveStringMap = {
    if (tableOptions.isEmpty) return options
    val merged = new util.HashMap[String, String](tableOptions)
    merged.putAll(options.asCaseSensitiveMap())
    new CaseInsensitiveStringMap(merged)
  }

  private def pythonSource(options: CaseInsensitiveStringMap): PythonDataSourceV2 = {
    val known = created.get()
    if (known != null && known._1 == options.asCaseSensitiveMap()) {
      return TieredHiveProvider.pythonSourceFrom(known._2)
    }
    val made = TieredHiveProvider.freshPythonSource().getOrCreateDataSourceInPython(
      TieredHiveProvider.PythonName, TieredHiveProvider.withCaseSensitivity(options),
      Some(tableSchema))
    created.compareAndSet(null, (options.asCaseSensitiveMap(), made))
    TieredHiveProvider.pythonSourceFrom(made)
  }

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder =
    new PythonWriteBuilder(TieredHiveProvider.freshPythonSource(), TieredHiveProvider.PythonName,
      withPartitionBy(info))

  /** The write's options over the table's own, with the partition keys as `partition_by`
   * unless the write names them. */
  private def withPartitionBy(info: LogicalWriteInfo): LogicalWriteInfo = {
    val options = new util.HashMap[String, String](tableOptions)
    options.putAll(info.options().asCaseSensitiveMap())
    if (!tablePartitioning.isEmpty &&
        !new CaseInsensitiveStringMap(options).containsKey(TieredHiveProvider.PartitionByOption)) {
      options.put(TieredHiveProvider.PartitionByOption, partitionKeys().mkString(","))
    }
    if (options == info.options().asCaseSensitiveMap()) return info
    val merged = new CaseInsensitiveStringMap(options)
    new LogicalWriteInfo {
      override def options(): CaseInsensitiveStringMap = merged
      override def queryId(): String = info.queryId()
      override def schema(): StructType = info.schema()
      override def rowIdSchema(): util.Optional[StructType] = info.rowIdSchema()
      override def metadataSchema(): util.Optional[StructType] = info.metadataSchema()
    }
  }

  /** The partition keys of `partitionBy(...)` or of a catalog's table. */
  private def partitionKeys(): Array[String] = {
    val keys = tablePartitioning.map { t =>
      if (t.name() != "identity" || t.references().length != 1) {
        throw new IllegalArgumentException(
          s"tiered_hive partitions by columns only (Hive partition keys); got ${t.describe()}")
      }
      t.references()(0).fieldNames().mkString(".")
    }
    keys
  }
}

/**
 * One scan of one query. Spark's optimizer (`V2ScanRelationPushDown`) calls, in order,
 * `pushFilters`, `pruneColumns` and `build`; only `build` talks to Python, once, with both.
 *
 * Filters: all of them are handed to the Python reader at `build`, which uses those it can
 * evaluate exactly to prune partitions, row groups and rows. Python is not asked at
 * `pushFilters`: pyspark 4.3 plans a Python read (partitions, listing) as part of filter
 * pushdown, and that must happen after `pruneColumns`, so asking first would plan every scan
 * twice. Instead the filters the reader evaluates exactly are known from the table's
 * [[SourceHints]] (Python's own rule, per column, from `schema()`), and only the others are
 * returned to Spark as post-scan filters (all of them when the source gave no hints). Spark
 * pushes an aggregation only when no post-scan filter is left. `build` checks that Python
 * took every filter reported as handled, and fails the query naming the filter otherwise.
 *
 * Columns: `pruneColumns` receives exactly what the query references (none for `count(*)`),
 * and the Python reader is built with that schema, so only those columns are decoded.
 *
 * Batches: the scan is wrapped in `ArrowColumnarScan`, so Spark reads the Python worker's
 * Arrow batches as columns instead of row by row.
 *
 * Statistics: the table's size ([[TableStatistics]]), scaled to the columns read, so that
 * Spark broadcasts small tables.
 *
 * Aggregates: a partial aggregation Spark pushes ([[PartialAggregation]]; never complete:
 * Spark keeps the final aggregate) is read by the Python reader, which returns per split one
 * row per group; the scan's schema is then the partial schema. `hive.aggregation-pushdown-
 * enabled` false (a hint from Python) refuses every aggregation; so does an `AVG` whose
 * rewrite into `SUM`/`COUNT` would answer differently ([[AverageRewrite]]).
 *
 * Metrics and EXPLAIN: the scan reports the tiers' work per task and its planning
 * (`ScanReport`), and describes itself as Spark's `FileScan` does, from the facts known here
 * (the table, the filters the source evaluates and those left to Spark, the time planning
 * took) and the plan summary the Python planning sends back.
 */
class TieredHiveScanBuilder(
    tableSchema: StructType,
    options: CaseInsensitiveStringMap,
    pythonSource: PythonDataSourceV2,
    statistics: Option[TableStatistics] = None,
    hints: SourceHints = SourceHints.Empty,
    withExecutorsSource: CaseInsensitiveStringMap => PythonDataSourceV2 =
      _ => TieredHiveProvider.freshPythonSource(),
    tableName: String = TieredHiveProvider.PublicName,
    creationNanos: Long = 0L)
    extends ScanBuilder with SupportsPushDownFilters with SupportsPushDownRequiredColumns
    with SupportsPushDownAggregates {
  private var filters: Array[Filter] = Array.empty
  private var requiredSchema: StructType = tableSchema
  private var aggregation: Option[PartialAggregation] = None

  override def pushFilters(pushed: Array[Filter]): Array[Filter] = {
    filters = pushed
    pushed.filterNot(handled)
  }

  // Set once Spark offered an AVG its rewrite into SUM/COUNT would answer differently.
  private var averageRewriteRefused = false

  override def supportCompletePushDown(aggregation: Aggregation): Boolean = {
    if (!AverageRewrite.keepsAnswer(aggregation, tableSchema)) averageRewriteRefused = true
    false
  }

  override def pushAggregation(pushed: Aggregation): Boolean = {
    aggregation = if (hints.aggregationPushdown && !averageRewriteRefused) {
      PartialAggregation.translate(pushed, tableSchema, filters.toSeq, hints)
    } else None
    aggregation.isDefined
  }

  override def pushedFilters(): Array[Filter] = filters

  override def pruneColumns(required: StructType): Unit = {
    // Keep the table's column order: the reader's output must match the schema it was given.
    // pyspark resolves each pushed filter's column in the scan's schema, so the columns of
    // the filters reported as handled (which Spark no longer asks for) are read too.
    val names = required.fieldNames.toSet ++
      filters.filter(handled).flatMap(_.references)
    requiredSchema = StructType(tableSchema.fields.filter(f => names.contains(f.name)))
  }

  def readSchema(): StructType = requiredSchema

  override def build(): Scan = {
    val started = System.nanoTime()
    def facts = ScanFacts(tableName, filters.filter(handled).toSeq, filters.filterNot(handled).toSeq,
      planningMillis = (creationNanos + System.nanoTime() - started) / 1000000L)
    // On a cluster the Python scan also gets the live executors (soft affinity), which
    // takes a Python source created with them: the table keeps it while the executors stay
    // the same, so only the first scan after a change creates it (with the driver's
    // planner one callback, without it one Python worker call).
    val withExecutors = Affinity.withExecutors(options)
    val source = if (withExecutors eq options) pythonSource else withExecutorsSource(withExecutors)
    val pythonOptions = TieredHiveProvider.withCaseSensitivity(withExecutors)
    aggregation match {
      case Some(partial) => // the filters travel in the aggregation (see PartialAggregation)
        val schema = QueryToken.tag(partial.schemaForPython)
        val python = PlannedPython.plan(source, TieredHiveProvider.PythonName, schema,
          pythonOptions, Array.empty).map(_._1).getOrElse(
          new PythonScanBuilder(source, TieredHiveProvider.PythonName, schema, pythonOptions)
            .build())
        new AggregatedScan(python, partial, facts)
      case None =>
        val python = pythonScan(source, pythonOptions, requiredSchema)
        new ArrowColumnarScan(python, statistics.map(_.forColumns(requiredSchema, tableSchema)),
          Some(facts))
    }
  }

  /** Whether `f` is evaluated by the source, so Spark need not apply it again: the Python
   * rule for its column ([[SourceHints]]), and a value Python decodes exactly
   * ([[PythonFilterValues]]). */
  private def handled(f: Filter): Boolean =
    PythonFilterValues.representable(f) && hints.isExact(f, tableSchema)

  /** The Python scan reading `schema`, given every filter whose values Python decodes exactly
   * (the others stay with Spark only): it keeps those it can use; those reported to Spark as
   * handled it must keep. The query's token (QueryToken) rides on the schema to the reader,
   * so every scan of the query reads one snapshot; ArrowColumnarScan reports the schema
   * without it. */
  private def pythonScan(source: PythonDataSourceV2, pythonOptions: CaseInsensitiveStringMap,
                         schema: StructType): Scan = {
    val tagged = QueryToken.tag(schema)
    val offered = filters.filter(PythonFilterValues.representable)
    // One callback into the driver's planner when there is one, else pyspark's planning
    // worker (pushFilters plans the read there).
    val (scan, notTaken) =
      PlannedPython.plan(source, TieredHiveProvider.PythonName, tagged, pythonOptions, offered)
        .getOrElse {
          val python = new PythonScanBuilder(
            source, TieredHiveProvider.PythonName, tagged, pythonOptions)
          val refused = python.pushFilters(offered)
          (python.build(), refused)
        }
    val notTakenSet = notTaken.toSet
    val lost = offered.filter(f => notTakenSet.contains(f) && handled(f))
    if (lost.nonEmpty) {
      throw new IllegalStateException(s"tiered_hive: the Python reader did not take the " +
        s"filters ${lost.mkString(", ")}, which the provider reported to Spark as evaluated " +
        "by the source (is spark.sql.python.filterPushdown.enabled false?)")
    }
    scan
  }
}
