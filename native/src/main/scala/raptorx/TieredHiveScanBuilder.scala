package raptorx

import org.apache.spark.sql.connector.expressions.aggregate.Aggregation
import org.apache.spark.sql.connector.read.{Scan, ScanBuilder, SupportsPushDownAggregates, SupportsPushDownFilters, SupportsPushDownRequiredColumns}
import org.apache.spark.sql.execution.datasources.v2.python.{PythonDataSourceV2, PythonScanBuilder}
import org.apache.spark.sql.execution.datasources.v2.python.raptorx.PlannedPython
import org.apache.spark.sql.execution.python.raptorx.{Affinity, ArrowColumnarScan, ScanFacts, ScanIdentity}
import org.apache.spark.sql.sources.Filter
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import raptorx.contract.{SourceHints, TableStatistics}

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
 * Reuse: two scans of one query alike (the table and its options, the columns, the filters
 * offered, a pushed aggregation) are equal ([[ScanIdentity]]), so Spark reads one for both,
 * as it does with its own file scans.
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
    aggregation = if (hints.aggregationPushdown && !averageRewriteRefused &&
        hints.mayGroupBy(pushed.groupByExpressions().toSeq)) {
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
        val schema = QueryTokens.tag(partial.schemaForPython)
        val python = PlannedPython.plan(source, TieredHiveProvider.PythonName, schema,
          pythonOptions, Array.empty).map(_._1).getOrElse(
          new PythonScanBuilder(source, TieredHiveProvider.PythonName, schema, pythonOptions)
            .build())
        new AggregatedScan(python, partial, facts, identity(partial.schemaForPython,
          partial.partialSchema, Some((partial.aggregatesText, partial.groupByText))))
      case None =>
        val python = pythonScan(source, pythonOptions, requiredSchema)
        new ArrowColumnarScan(python, statistics.map(_.forColumns(requiredSchema, tableSchema)),
          Some(facts), identity(requiredSchema, requiredSchema, None))
    }
  }

  /** The scan's [[ScanIdentity]] (Spark reads one of two equal scans of a query for both),
   * when the query's token rides on `toPython`, the schema the Python reader is planned with:
   * the scan then reads the query's snapshot. */
  private def identity(toPython: StructType, output: StructType,
                       pushed: Option[(String, String)]): Option[ScanIdentity] =
    QueryTokens.current().filter(_ => toPython.nonEmpty).map { token =>
      ScanIdentity.of(tableName, options.asCaseSensitiveMap(), token, output, filters.toSeq,
        pushed)
    }

  /** Whether `f` is evaluated by the source, so Spark need not apply it again: the Python
   * rule for its column ([[SourceHints]]), and a value Python decodes exactly
   * ([[PythonFilterValues]]). */
  private def handled(f: Filter): Boolean =
    PythonFilterValues.representable(f) && hints.isExact(f, tableSchema)

  /** The Python scan reading `schema`, given every filter whose values Python decodes exactly
   * (the others stay with Spark only): it keeps those it can use; those reported to Spark as
   * handled it must keep. The query's token (QueryTokens) rides on the schema to the reader,
   * so every scan of the query reads one snapshot; ArrowColumnarScan reports the schema
   * without it. */
  private def pythonScan(source: PythonDataSourceV2, pythonOptions: CaseInsensitiveStringMap,
                         schema: StructType): Scan = {
    val tagged = QueryTokens.tag(schema)
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
