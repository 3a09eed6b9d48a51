package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.types.{Decimal, StructType}
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarArray, ColumnarMap}
import org.apache.spark.unsafe.types.UTF8String

/**
 * The rows `selection(0 until count)` of `inner`, as a column of `count` rows: how a batch
 * of Spark's Parquet reader keeps only the rows the scan's filters pass without copying a
 * value (a selection vector; Spark's `ColumnVector` has none of its own). Reads of row `i`
 * go to row `selection(i)` of `inner`; a struct's children are selected the same way (one
 * view per child, made on its first read); an array or a map of row `i` is `inner`'s own
 * of row `selection(i)`, whose offsets point into `inner`'s element vectors, so nested
 * columns of any depth are kept by the one selection.
 *
 * Limits: a view of the reader's batch, valid until the reader's next batch (Spark consumes
 * a batch before asking for the next); `close` leaves `inner` to its reader.
 */
final class SelectedColumnVector(inner: ColumnVector, selection: Array[Int], count: Int)
    extends ColumnVector(inner.dataType()) {
  private lazy val nulls: Int = {
    var n = 0
    var i = 0
    while (i < count) {
      if (inner.isNullAt(selection(i))) n += 1
      i += 1
    }
    n
  }

  override def close(): Unit = ()
  override def hasNull: Boolean = inner.hasNull && nulls > 0
  override def numNulls(): Int = if (inner.hasNull) nulls else 0
  override def isNullAt(rowId: Int): Boolean = inner.isNullAt(selection(rowId))
  override def getBoolean(rowId: Int): Boolean = inner.getBoolean(selection(rowId))
  override def getByte(rowId: Int): Byte = inner.getByte(selection(rowId))
  override def getShort(rowId: Int): Short = inner.getShort(selection(rowId))
  override def getInt(rowId: Int): Int = inner.getInt(selection(rowId))
  override def getLong(rowId: Int): Long = inner.getLong(selection(rowId))
  override def getFloat(rowId: Int): Float = inner.getFloat(selection(rowId))
  override def getDouble(rowId: Int): Double = inner.getDouble(selection(rowId))
  override def getArray(rowId: Int): ColumnarArray = inner.getArray(selection(rowId))
  override def getMap(rowId: Int): ColumnarMap = inner.getMap(selection(rowId))
  override def getDecimal(rowId: Int, precision: Int, scale: Int): Decimal =
    inner.getDecimal(selection(rowId), precision, scale)
  override def getUTF8String(rowId: Int): UTF8String = inner.getUTF8String(selection(rowId))
  override def getBinary(rowId: Int): Array[Byte] = inner.getBinary(selection(rowId))
  // Spark reads a struct's field through `getChild` for every value (`ColumnarRow`).
  private lazy val children: Array[ColumnVector] = inner.dataType() match {
    case s: StructType => new Array[ColumnVector](s.length)
    case _ => new Array[ColumnVector](0)
  }
  override def getChild(ordinal: Int): ColumnVector =
    if (ordinal >= children.length) new SelectedColumnVector(inner.getChild(ordinal), selection, count)
    else {
      if (children(ordinal) == null) {
        children(ordinal) = new SelectedColumnVector(inner.getChild(ordinal), selection, count)
      }
      children(ordinal)
    }
}
