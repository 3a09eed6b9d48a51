package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReader, PartitionReaderFactory}
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition
import org.apache.spark.sql.vectorized.ColumnarBatch

import raptorx.contract.{FragmentHandoff, JvmReadHandoff}

/** The reader factory of an [[ArrowColumnarScan]]: pyspark's row reader, and columnar reads by
 * the reader each task's hand-offs call for. */
class ArrowColumnarReaderFactory(inner: PartitionReaderFactory,
    sparkReader: Option[JvmFileRead] = None) extends PartitionReaderFactory {
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
    val fragments = FragmentHandoff.of(stamped.pickedPartition).filter(_ => !ranAway)
    val jvm = sparkReader.flatMap(r => JvmReadHandoff.of(stamped.pickedPartition).map(_ -> r))
    if (fragments.isEmpty && jvm.isEmpty) new ArrowColumnarReader(inner, stamped)
    else new SplitServingReader(inner, stamped, fragments, jvm, fillCaches = !ranAway)
  }
}
