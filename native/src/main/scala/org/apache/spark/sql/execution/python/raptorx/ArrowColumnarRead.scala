package org.apache.spark.sql.execution.python.raptorx

import org.apache.arrow.vector.DecimalVector

import org.apache.spark.TaskContext
import org.apache.spark.api.python.ChainedPythonFunctions
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.metric.{CustomMetric, CustomTaskMetric}
import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReader, PartitionReaderFactory, Scan, Statistics, SupportsReportStatistics}
import org.apache.spark.sql.execution.datasources.v2.python.{PythonInputPartition, UserDefinedPythonDataSource}
import org.apache.spark.sql.execution.python.{ArrowPythonRunner, BatchedPythonArrowInput, MapInBatchEvaluatorFactory}
import org.apache.spark.sql.internal.connector.SupportsMetadata
import org.apache.spark.sql.types.{DataType, Decimal, DecimalType, StructField, StructType}
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnVector, ColumnarArray, ColumnarBatch, ColumnarMap}
import org.apache.spark.unsafe.types.UTF8String

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
    facts: Option[ScanFacts] = None)
    extends Scan with SupportsReportStatistics with SupportsMetadata {
  override def readSchema(): StructType = raptorx.QueryToken.untag(inner.readSchema())
  /** What the scan builder estimated (`raptorx.TableStatistics`), else unknown. */
  override def estimateStatistics(): Statistics = statistics.getOrElse(ArrowColumnarScan.Unknown)
  override def toBatch: Batch = new ArrowColumnarBatch(inner.toBatch, sparkReader.toOption)

  /** Spark's own Parquet reader for the splits the planner handed to the JVM
   * ([[JvmReadHandoff]], [[JvmParquetRead]]), made once on the driver; or why the Python
   * reader reads every split. */
  private lazy val sparkReader: Either[String, JvmParquetRead] = {
    val marked = inner.toBatch.planInputPartitions().iterator.collect {
      case p: PythonInputPartition => JvmReadHandoff.of(p.pickedPartition)
    }.flatten
    if (!marked.hasNext) Left("the planner chose the Python reader (hive.parquet.reader)")
    else {
      val plan = marked.next()
      val sample = plan.splits.flatten.headOption.map(_.path).getOrElse("file:///")
      JvmParquetRead.prepare(readSchema(), facts.map(_.pushedFilters).getOrElse(Seq.empty),
        plan.partitionKeys, plan.hadoop, sample)
    }
  }

  /** The plan summary the Python planning put in the first partition ([[PlanReport]]): the
   * partitions are planned already (one planning per scan), so this reads them, nothing more. */
  private lazy val plan: PlanReport = PlanReport.of(inner.toBatch.planInputPartitions().toSeq)

  /** `EXPLAIN`'s lines ([[ScanReport.metadata]]); pyspark's own description without facts. */
  override def getMetaData(): Map[String, String] =
    facts.map(ScanReport.metadata(_, readSchema(), plan)).getOrElse(Map.empty) ++
      Map("Reader" -> sparkReader.fold(why => s"Python ($why)",
        _ => "Spark's Parquet reader in the JVM, through the block cache, for the splits the " +
          "planner handed it; Python for the rest"))
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
  private val Unknown: Statistics = new Statistics {
    override def sizeInBytes(): java.util.OptionalLong = java.util.OptionalLong.empty()
    override def numRows(): java.util.OptionalLong = java.util.OptionalLong.empty()
  }
}

class ArrowColumnarBatch(inner: Batch, sparkReader: Option[JvmParquetRead] = None) extends Batch {
  // A partition marked for soft affinity prefers its executor (see `Affinity`).
  override def planInputPartitions(): Array[InputPartition] =
    inner.planInputPartitions().map(Affinity.placed)
  override def createReaderFactory(): PartitionReaderFactory =
    new ArrowColumnarReaderFactory(inner.createReaderFactory(), sparkReader)
}

class ArrowColumnarReaderFactory(inner: PartitionReaderFactory,
    sparkReader: Option[JvmParquetRead] = None) extends PartitionReaderFactory {
  override def createReader(partition: InputPartition): PartitionReader[InternalRow] =
    inner.createReader(Affinity.stamped(partition))

  override def supportColumnarReads(partition: InputPartition): Boolean = true

  /** A task whose partition carries a fragment hand-off is served from this node's fragment
   * result cache first, unless it runs away from its preferred executor (whose entries those
   * are); the splits the planner handed to the JVM are read by Spark's Parquet reader
   * (through the block cache, unless the task ran away); the rest by the Python reader
   * ([[SplitServingReader]]). A task with neither hand-off runs the Python reader. */
  override def createColumnarReader(partition: InputPartition): PartitionReader[ColumnarBatch] = {
    val stamped = Affinity.stamped(partition).asInstanceOf[PythonInputPartition]
    val ranAway = Affinity.ranAway(partition)
    val fragments = FragmentHits.handoff(stamped.pickedPartition).filter(_ => !ranAway)
    val jvm = sparkReader.flatMap(r => JvmReadHandoff.of(stamped.pickedPartition).map(_ -> r))
    if (fragments.isEmpty && jvm.isEmpty) new ArrowColumnarReader(inner, stamped)
    else new SplitServingReader(inner, stamped, fragments, jvm, fillCaches = !ranAway)
  }
}

class ArrowColumnarReader(factory: PartitionReaderFactory, partition: PythonInputPartition)
    extends PartitionReader[ColumnarBatch] {
  import raptorx.NativeCompatibility.{EvaluatorFactory, ReaderFactory}

  private val source = ReaderFactory.source.get[UserDefinedPythonDataSource](factory)
  private val outputSchema = ReaderFactory.outputSchema.get[StructType](factory)
  // This reader's own (pyspark's are one map per JVM: they would sum every query's).
  private val metrics = ScanReport.freshPythonMetrics()
  // Where the Python worker writes the task's counts at the end of its read (raptorx_py's
  // scan_report.py), made before the runner starts it.
  private val countsFile = ScanReport.newTaskCountsFile()
  private var pythonCounts: Map[String, Long] = Map.empty
  private var ended = false

  /** What the Python reader counted for this task (once its stream ended), by counter. */
  def taskCounts: Map[String, Long] = pythonCounts

  private val batches: Iterator[ColumnarBatch] = {
    val evaluator: MapInBatchEvaluatorFactory = source.createMapInBatchEvaluatorFactory(
      ReaderFactory.pickledReadFunc.get[Array[Byte]](factory), "read_from_data_source",
      UserDefinedPythonDataSource.readInputSchema, outputSchema, metrics,
      ReaderFactory.jobArtifactUUID.get[Option[String]](factory),
      ReaderFactory.sessionUUID.get[Option[String]](factory))
    val context = TaskContext.get()
    // The Python side reads one row, the pickled partition, wrapped as a one-column frame.
    // (Spark 4's Python runners consume their input on the task's own thread, so it needs no
    // `ContextAwareIterator`, which Spark 4.0 deprecated for that reason.)
    val input = Iterator.single(InternalRow(partition.pickedPartition)).map(InternalRow(_))
    val runner = new ArrowPythonRunner(
      EvaluatorFactory.chainedFunc.get[Seq[(ChainedPythonFunctions, Long)]](evaluator),
      EvaluatorFactory.pythonEvalType.get[Int](evaluator),
      Array(Array(0)),
      StructType(Array(StructField("struct", EvaluatorFactory.inputSchema.get[StructType](evaluator)))),
      EvaluatorFactory.sessionLocalTimeZone.get[String](evaluator),
      EvaluatorFactory.largeVarTypes.get[Boolean](evaluator),
      EvaluatorFactory.pythonRunnerConf.get[Map[String, String]](evaluator),
      evaluator.pythonMetrics,
      EvaluatorFactory.jobArtifactUUID.get[Option[String]](evaluator),
      EvaluatorFactory.sessionUUID.get[Option[String]](evaluator)) with BatchedPythonArrowInput
    val types = outputSchema.fields.map(_.dataType)
    runner.compute(Iterator.single(input), context.partitionId(), context).map { batch =>
      // The worker returns one struct column; its children are the output columns.
      val struct = batch.column(0).asInstanceOf[ArrowColumnVector]
      val columns: Array[ColumnVector] =
        types.indices.map(i => ArrowColumnarReader.column(struct.getChild(i), types(i))).toArray
      val flat = new ColumnarBatch(columns)
      flat.setNumRows(batch.numRows())
      flat
    }
  }

  private var current: ColumnarBatch = _

  override def next(): Boolean = {
    if (!batches.hasNext) {
      if (!ended) { // the Python read ended, so its counts are written
        ended = true
        pythonCounts = ScanReport.readTaskCounts(countsFile)
        ScanReport.deleteTaskCounts(countsFile)
        InputBytes.add(ScanReport.inputBytes(pythonCounts)) // before Spark's last update
      }
      return false
    }
    current = batches.next()
    true
  }

  override def get(): ColumnarBatch = current

  // The runner releases its Arrow memory when the task ends.
  override def close(): Unit = ScanReport.deleteTaskCounts(countsFile)

  /** pyspark's Python runner metrics, without the tiers' (see [[currentMetricsValues]]). */
  def pythonMetricValues: Array[CustomTaskMetric] =
    source.createPythonTaskMetrics(metrics.map { case (k, v) => k -> v.value })

  override def currentMetricsValues(): Array[CustomTaskMetric] =
    pythonMetricValues ++ ScanReport.taskValues(pythonCounts)
}

object ArrowColumnarReader {
  def column(vector: ArrowColumnVector, dataType: DataType): ColumnVector = dataType match {
    case d: DecimalType if d.precision <= Decimal.MAX_LONG_DIGITS =>
      new LongDecimalColumnVector(vector, d)
    case _ => vector
  }
}

/**
 * An Arrow decimal column of precision at most 18 read as Spark keeps such decimals: the
 * unscaled value in a long (the low 8 bytes of Arrow's 16-byte little-endian value, exact
 * because the value fits in 63 bits). Everything else is the wrapped vector's.
 */
class LongDecimalColumnVector(inner: ArrowColumnVector, decimalType: DecimalType)
    extends ColumnVector(decimalType) {
  private val data = inner.getValueVector.asInstanceOf[DecimalVector].getDataBuffer

  override def getDecimal(rowId: Int, precision: Int, scale: Int): Decimal =
    if (inner.isNullAt(rowId)) null
    else Decimal.createUnsafe(data.getLong(rowId.toLong * DecimalVector.TYPE_WIDTH), precision, scale)

  override def close(): Unit = inner.close()
  override def hasNull: Boolean = inner.hasNull
  override def numNulls(): Int = inner.numNulls()
  override def isNullAt(rowId: Int): Boolean = inner.isNullAt(rowId)
  override def getBoolean(rowId: Int): Boolean = inner.getBoolean(rowId)
  override def getByte(rowId: Int): Byte = inner.getByte(rowId)
  override def getShort(rowId: Int): Short = inner.getShort(rowId)
  override def getInt(rowId: Int): Int = inner.getInt(rowId)
  override def getLong(rowId: Int): Long = inner.getLong(rowId)
  override def getFloat(rowId: Int): Float = inner.getFloat(rowId)
  override def getDouble(rowId: Int): Double = inner.getDouble(rowId)
  override def getArray(rowId: Int): ColumnarArray = inner.getArray(rowId)
  override def getMap(rowId: Int): ColumnarMap = inner.getMap(rowId)
  override def getUTF8String(rowId: Int): UTF8String = inner.getUTF8String(rowId)
  override def getBinary(rowId: Int): Array[Byte] = inner.getBinary(rowId)
  override def getChild(ordinal: Int): ColumnVector = inner.getChild(ordinal)
}
