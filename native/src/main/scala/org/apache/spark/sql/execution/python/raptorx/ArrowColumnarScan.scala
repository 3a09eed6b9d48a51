package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.connector.metric.{CustomMetric, CustomTaskMetric}
import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReaderFactory, Scan, Statistics, SupportsReportStatistics}
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition
import org.apache.spark.sql.internal.connector.SupportsMetadata
import org.apache.spark.sql.types.StructType

import raptorx.contract.JvmReadHandoff
import raptorx.contract.PlanReport

/**
 * A Python data source scan whose batches reach Spark as the Arrow vectors the Python worker
 * sent, instead of as rows.
 *
 * pyspark 4.3's reader of a Python data source turns every Arrow batch from the worker into
 * rows and copies each into an `UnsafeRow`; Spark's own Parquet reader hands its scans
 * columnar batches. This wraps the scan `PythonScanBuilder.build()` made: planning and the
 * row reader stay pyspark's, and its reader factory also offers columnar reads, which run the
 * same pickled read function through the same Python runner (`ArrowPythonRunner`, as
 * `MapInBatchEvaluatorFactory` does) and return each batch's columns as they arrived. A
 * `decimal` of precision up to 18 is read as the long Spark itself keeps it in, where
 * `ArrowColumnVector` builds a `BigDecimal` per value.
 *
 * Limits: tied to pyspark 4.3's internals (the fields of `PythonPartitionReaderFactory` and
 * `MapInBatchEvaluatorFactory`, read by name, and the runner's constructor: all listed in
 * `raptorx.NativeCompatibility`, which checks them when the provider is first made and when
 * raptorx_py registers the source; the jar is built against the installed pyspark). The Arrow schema check pyspark makes per batch
 * (`SQLConf.pysparkArrowValidateSchema`) is not repeated: the Python
 * reader casts every batch to the schema it was given.
 */
class ArrowColumnarScan(inner: Scan, statistics: Option[Statistics] = None,
    facts: Option[ScanFacts] = None, identity: Option[ScanIdentity] = None)
    extends Scan with SupportsReportStatistics with SupportsMetadata {
  override def readSchema(): StructType = raptorx.contract.QueryToken.untag(inner.readSchema())
  /** What the scan builder estimated (`raptorx.TableStatistics`), else unknown. */
  override def estimateStatistics(): Statistics = statistics.getOrElse(ArrowColumnarScan.Unknown)
  override def toBatch: Batch =
    new ArrowColumnarBatch(inner.toBatch, sparkReader.toOption, identity)

  /** The columns Spark's reader reads for the scan: its output, unless the scan aggregates. */
  protected def jvmReadSchema: StructType = readSchema()
  /** The partial aggregation the JVM computes over what Spark's reader reads, if any. */
  protected def jvmAggregation: Option[raptorx.SplitAggregation] = None

  /** Spark's own Parquet or ORC reader for the splits the planner handed to the JVM
   * ([[JvmReadHandoff]], [[JvmFileRead]]), made once on the driver; or why the Python
   * reader reads every split. */
  private lazy val sparkReader: Either[String, JvmFileRead] = {
    val marked = inner.toBatch.planInputPartitions().iterator.collect {
      case p: PythonInputPartition => JvmReadHandoff.of(p.pickedPartition)
    }.flatten
    if (!marked.hasNext) Left("the planner chose the Python reader (hive.parquet.reader)")
    else {
      val plan = marked.next()
      val sample = plan.splits.flatten.headOption.map(_.path).getOrElse("file:///")
      val prepared = JvmFileRead.prepare(jvmReadSchema,
        facts.map(_.pushedFilters).getOrElse(Seq.empty), plan.partitionKeys, plan.hadoop, sample,
        jvmAggregation, plan.formats, ArrowColumnarScan.dataSchema(plan.dataSchemaDdl))
      prepared.left.foreach { why =>
        // The Python reader reads Parquet only: an ORC scan Spark's reader cannot take fails.
        if (plan.formats.contains(JvmReadHandoff.Orc)) throw new UnsupportedOperationException(
          s"tiered_hive: this table's files are ORC${if (plan.formats.size > 1) " in some " +
            "partitions" else ""}, which only Spark's ORC reader in the JVM reads here, and it " +
            s"cannot read this scan: $why")
      }
      prepared
    }
  }

  /** The plan summary the Python planning put in the first partition ([[raptorx.contract.PlanReport]]): the
   * partitions are planned already (one planning per scan), so this reads them, nothing more. */
  private lazy val plan: PlanReport = ScanReport.plan(inner.toBatch.planInputPartitions().toSeq)

  /** `EXPLAIN`'s lines ([[ScanReport.metadata]]); pyspark's own description without facts. */
  override def getMetaData(): Map[String, String] =
    facts.map(ScanReport.metadata(_, readSchema(), plan)).getOrElse(Map.empty) ++
      Map("Reader" -> sparkReader.fold(why => s"Python ($why)",
        read => s"Spark's ${read.formats.map(f => if (f == JvmReadHandoff.Orc) "ORC" else
          "Parquet").mkString(" and ")} reader in the JVM, through the block cache, for the splits the " +
          "planner handed it" + (if (jvmAggregation.isDefined) ", aggregated in the JVM" else "") +
          "; Python for the rest"))
  override def description(): String =
    if (facts.isEmpty) inner.description() else ScanReport.description(getMetaData())

  /** pyspark's Python runner metrics (made per reader, so per query: see
   * [[ScanReport.freshPythonMetrics]]) and the tiers' task and driver metrics. */
  override def supportedCustomMetrics(): Array[CustomMetric] =
    inner.supportedCustomMetrics() ++ ScanReport.supportedMetrics
  override def reportDriverMetrics(): Array[CustomTaskMetric] =
    ScanReport.driverValues(plan, facts.map(_.planningMillis).getOrElse(0L))
}

object ArrowColumnarScan {
  /** The table's data columns from the plan's DDL (char and varchar as Spark reads them:
   * strings), or None when the plan has none or it does not parse. */
  def dataSchema(ddl: String): Option[StructType] =
    Option(ddl).filter(_.nonEmpty).flatMap { text =>
      scala.util.Try(org.apache.spark.sql.catalyst.util.CharVarcharUtils
        .replaceCharVarcharWithStringInSchema(StructType.fromDDL(text))).toOption
    }

  private val Unknown: Statistics = new Statistics {
    override def sizeInBytes(): java.util.OptionalLong = java.util.OptionalLong.empty()
    override def numRows(): java.util.OptionalLong = java.util.OptionalLong.empty()
  }
}

/** The batch of an [[ArrowColumnarScan]]; equal to the batch of another scan of the same
 * [[ScanIdentity]] (Spark then reads one for both), else only to itself. */
class ArrowColumnarBatch(inner: Batch, sparkReader: Option[JvmFileRead] = None,
    private val identity: Option[ScanIdentity] = None) extends Batch {
  override def equals(other: Any): Boolean = other match {
    case that: ArrowColumnarBatch =>
      (this eq that) || (identity.isDefined && identity == that.identity)
    case _ => false
  }
  override def hashCode(): Int = identity.fold(System.identityHashCode(this))(_.hashCode())

  // A partition marked for soft affinity prefers its executor (see `Affinity`).
  override def planInputPartitions(): Array[InputPartition] =
    inner.planInputPartitions().map(Affinity.placed)
  override def createReaderFactory(): PartitionReaderFactory =
    new ArrowColumnarReaderFactory(inner.createReaderFactory(), sparkReader)
}
