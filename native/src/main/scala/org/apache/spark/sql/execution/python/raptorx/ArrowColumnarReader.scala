package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.TaskContext
import org.apache.spark.api.python.ChainedPythonFunctions
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.{PartitionReader, PartitionReaderFactory}
import org.apache.spark.sql.execution.datasources.v2.python.{PythonInputPartition, UserDefinedPythonDataSource}
import org.apache.spark.sql.execution.python.{ArrowPythonRunner, BatchedPythonArrowInput, MapInBatchEvaluatorFactory}
import org.apache.spark.sql.types.{DataType, Decimal, DecimalType, StructField, StructType}
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnVector, ColumnarBatch}

/** A task's columnar read by the Python reader: pyspark's pickled read function through
 * `ArrowPythonRunner`, each batch's columns as the worker sent them ([[ArrowColumnarScan]]). */
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
    val chained = EvaluatorFactory.chainedFunc.get[Seq[(ChainedPythonFunctions, Long)]](evaluator)
    chained.flatMap(_._1.funcs).headOption.foreach(f => ArrowColumnarReader.requirePython(f.pythonExec))
    val context = TaskContext.get()
    // The Python side reads one row, the pickled partition, wrapped as a one-column frame.
    // (Spark 4's Python runners consume their input on the task's own thread, so it needs no
    // `ContextAwareIterator`, which Spark 4.0 deprecated for that reason.)
    val input = Iterator.single(InternalRow(partition.pickedPartition)).map(InternalRow(_))
    val runner = new ArrowPythonRunner(
      chained,
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
  /** Fails, saying what to do, when `exec` (the Python the task's worker would run) is not an
   * executable file here, by its path or on this process's `PATH`: pyspark's own error is a
   * worker that cannot start, far from the setting that made the task need one. */
  def requirePython(exec: String): Unit = {
    import java.nio.file.{Files, Paths}
    val found = if (exec.contains("/")) Files.isExecutable(Paths.get(exec))
      else Option(System.getenv("PATH")).getOrElse("").split(java.io.File.pathSeparator)
        .exists(d => d.nonEmpty && Files.isExecutable(Paths.get(d, exec)))
    if (!found) {
      throw new IllegalStateException(s"tiered_hive: this task is read by the Python reader " +
        s"(hive.parquet.reader=PYTHON, or a split Spark's Parquet reader could not read), but " +
        s"this executor has no Python '$exec' (spark.pyspark.python / PYSPARK_PYTHON). Set " +
        "hive.parquet.reader=AUTO (the default: Spark's reader in the JVM reads every split " +
        "and needs no Python on the executors), or install Python with raptorx_py there.")
    }
  }

  def column(vector: ArrowColumnVector, dataType: DataType): ColumnVector = dataType match {
    case d: DecimalType if d.precision <= Decimal.MAX_LONG_DIGITS =>
      new LongDecimalColumnVector(vector, d)
    case _ => vector
  }
}
