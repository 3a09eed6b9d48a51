package raptorx

import java.util

import org.apache.spark.sql.connector.catalog.{SupportsRead, Table, TableCapability, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.read.{Scan, ScanBuilder, SupportsPushDownFilters}
import org.apache.spark.sql.execution.datasources.v2.python.{PythonDataSourceV2, PythonScanBuilder}
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
 * Contract: filters are handed to the Python reader's `pushFilters` unchanged; the schema is
 * the table's (or the user's); everything else is the Python source's. Column pruning,
 * aggregate pushdown, limits, preferred locations and metrics belong in [[TieredHiveScanBuilder]]
 * next (issue 3).
 */
class TieredHiveProvider extends TableProvider with DataSourceRegister {
  override def shortName(): String = TieredHiveProvider.PublicName

  override def inferSchema(options: CaseInsensitiveStringMap): StructType =
    TieredHiveProvider.freshPythonSource().inferSchema(options)

  override def getTable(
      schema: StructType,
      partitioning: Array[Transform],
      properties: util.Map[String, String]): Table = new TieredHiveTable(schema)

  override def supportsExternalMetadata(): Boolean = true
}

object TieredHiveProvider {
  val PublicName = "tiered_hive"
  val PythonName = "tiered_hive_python"

  def freshPythonSource(): PythonDataSourceV2 = {
    val ds = new PythonDataSourceV2()
    ds.setShortName(PythonName)
    ds
  }
}

class TieredHiveTable(tableSchema: StructType) extends Table with SupportsRead {
  override def name(): String = TieredHiveProvider.PublicName

  override def schema(): StructType = tableSchema

  override def capabilities(): util.Set[TableCapability] =
    util.EnumSet.of(TableCapability.BATCH_READ)

  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder =
    new TieredHiveScanBuilder(tableSchema, options)
}

/** One scan of one query: a fresh Python data source, so its read plan is its own. */
class TieredHiveScanBuilder(schema: StructType, options: CaseInsensitiveStringMap)
    extends ScanBuilder with SupportsPushDownFilters {
  private val python = new PythonScanBuilder(
    TieredHiveProvider.freshPythonSource(), TieredHiveProvider.PythonName, schema, options)

  override def pushFilters(filters: Array[Filter]): Array[Filter] = python.pushFilters(filters)

  override def pushedFilters(): Array[Filter] = python.pushedFilters()

  override def build(): Scan = python.build()
}
