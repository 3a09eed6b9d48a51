package raptorx

import java.util
import java.util.concurrent.atomic.AtomicReference

import org.apache.spark.sql.connector.catalog.{SupportsRead, SupportsWrite, Table, TableCapability}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, WriteBuilder}
import org.apache.spark.sql.execution.datasources.v2.python.{PythonDataSourceCreationResult, PythonDataSourceV2, PythonWriteBuilder}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import raptorx.contract.{SourceHints, TableStatistics}

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
    // Spark creates all of a query's scan builders before it builds one: the planner starts
    // reading each scan's table now, so their round trips overlap.
    org.apache.spark.sql.execution.datasources.v2.python.raptorx.PlannedPython.prefetch(
      source, TieredHiveProvider.withCaseSensitivity(options))
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
