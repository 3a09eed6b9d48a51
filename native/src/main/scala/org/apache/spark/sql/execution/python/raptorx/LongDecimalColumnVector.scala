package org.apache.spark.sql.execution.python.raptorx

import org.apache.arrow.vector.DecimalVector

import org.apache.spark.sql.types.{Decimal, DecimalType}
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnVector, ColumnarArray, ColumnarMap}
import org.apache.spark.unsafe.types.UTF8String

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
