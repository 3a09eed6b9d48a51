package raptorx

import org.apache.spark.sql.execution.vectorized.{Dictionary, WritableColumnVector}
import org.apache.spark.sql.types._
import org.apache.spark.sql.vectorized.ColumnVector

/**
 * A column of Spark's vectors read as longs, as Spark's vectorized Parquet reader keeps it:
 * integers, dates (days), timestamps (microseconds), booleans (0, 1) and decimals of up to
 * 18 digits (unscaled, in an int up to 9 digits, else a long). For the executor's filters
 * ([[org.apache.spark.sql.execution.python.raptorx.VectorizedFilter]]) and the partial
 * aggregation ([[SplitAggregation]]).
 *
 * A decimal is read as an int or a long where the vector is a `WritableColumnVector` (Spark's
 * Parquet reader's, and the partition values' of either reader), whose layout that is; from
 * any other vector (Spark's ORC reader's `OrcColumnVector`, a selection over a vector) by
 * `getDecimal`, which every vector answers. Callers pick the read once per vector
 * (`Reader.readerOf`).
 */
object ColumnLongs {
  /** `read` a row of a vector whose layout is Spark's Parquet reader's; `decode` an entry of
   * the vector's dictionary as `read` would (`getInt` or `getLong` of a dictionary-encoded
   * vector), where one is defined; `other`, for a decimal, the read of any other vector. */
  final case class Reader(read: (ColumnVector, Int) => Long,
                          decode: Option[(Dictionary, Int) => Long],
                          other: Option[(ColumnVector, Int) => Long] = None) {
    /** The read of rows of `v`: chosen once per vector, not per row (a type test per row
     * cost an eighth of Q1's aggregation). */
    def readerOf(v: ColumnVector): (ColumnVector, Int) => Long = other match {
      case Some(any) if !v.isInstanceOf[WritableColumnVector] => any
      case _ => read
    }
  }

  private val Ints = Reader((v, i) => v.getInt(i).toLong, Some((d, id) => d.decodeToInt(id).toLong))
  private val Longs = Reader((v, i) => v.getLong(i), Some((d, id) => d.decodeToLong(id)))
  private val Bytes = Reader((v, i) => v.getByte(i).toLong, None)
  private val Shorts = Reader((v, i) => v.getShort(i).toLong, None)
  private val Booleans = Reader((v, i) => if (v.getBoolean(i)) 1L else 0L, None)

  private def decimals(d: DecimalType, layout: Reader): Reader = layout.copy(other = Some {
    (v: ColumnVector, i: Int) =>
      val x = v.getDecimal(i, d.precision, d.scale)
      if (x == null) 0L else x.toUnscaledLong // a null row: callers test isNullAt
  })

  /** The reader of a column of `t`, or None (not a column of numbers kept as longs). */
  def of(t: DataType): Option[Reader] = t match {
    case ByteType => Some(Bytes)
    case ShortType => Some(Shorts)
    case IntegerType | DateType => Some(Ints)
    case LongType | TimestampType | TimestampNTZType => Some(Longs)
    case BooleanType => Some(Booleans)
    case d: DecimalType if d.precision <= Decimal.MAX_INT_DIGITS => Some(decimals(d, Ints))
    case d: DecimalType if d.precision <= Decimal.MAX_LONG_DIGITS => Some(decimals(d, Longs))
    case _ => None
  }
}
