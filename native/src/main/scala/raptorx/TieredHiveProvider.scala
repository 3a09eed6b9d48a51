package raptorx

import java.util

import org.apache.spark.sql.connector.catalog.{Table, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.execution.datasources.v2.python.{PythonDataSourceCreationResult, PythonDataSourceV2}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import raptorx.contract.{Protocol, SourceHints, TableDescription, TableStatistics}


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
   * which resolves the read's column names by it (raptorx_py/datasource/planning/column_names.py):
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
