package raptorx

import java.time.{LocalDate, LocalDateTime}

import org.apache.spark.sql.catalyst.util.DateTimeUtils
import org.apache.spark.sql.sources._

/**
 * Which pushed filters pyspark can hand to the Python reader with their exact values.
 *
 * pyspark 4.3 sends each filter value as a Variant and decodes it in the Python worker
 * (`VariantUtils`) BEFORE the reader sees it, and that decoding is not exact for every value
 * Spark has:
 *  - a decimal is rebuilt as `Decimal(unscaled) * 10 ** -scale` in Python's default 28-digit
 *    context, so a value of more than 28 digits arrives rounded (and pruning with it drops
 *    rows);
 *  - a date or timestamp outside Python's `datetime` range (years 1 to 9999; a timestamp is
 *    also moved to the session time zone) fails the decoding, and with it the whole query.
 *
 * A filter holding such a value is not handed to Python: Spark applies every filter after the
 * scan anyway ([[TieredHiveScanBuilder]]), so such a filter just prunes nothing.
 */
object PythonFilterValues {
  /** Python's `decimal` default context precision. */
  val MaxDecimalDigits = 28
  private val MinDay = LocalDate.of(1, 1, 1).toEpochDay
  private val MaxDay = LocalDate.of(9999, 12, 31).toEpochDay
  private val MinMicros = DateTimeUtils.localDateTimeToMicros(LocalDateTime.of(1, 1, 1, 0, 0))
  private val MaxMicros =
    DateTimeUtils.localDateTimeToMicros(LocalDateTime.of(9999, 12, 31, 23, 59, 59, 999999000))
  /** A time zone moves an instant by less than a day. */
  private val DayMicros = 86400L * 1000000L

  def representable(f: Filter): Boolean = f match {
    case EqualTo(_, v) => exact(v)
    case EqualNullSafe(_, v) => exact(v)
    case GreaterThan(_, v) => exact(v)
    case GreaterThanOrEqual(_, v) => exact(v)
    case LessThan(_, v) => exact(v)
    case LessThanOrEqual(_, v) => exact(v)
    case In(_, vs) => vs.forall(exact)
    case Not(c) => representable(c)
    case And(l, r) => representable(l) && representable(r)
    case Or(l, r) => representable(l) && representable(r)
    case _ => true
  }

  private def exact(v: Any): Boolean = v match {
    case null => true
    case d: java.math.BigDecimal => d.precision <= MaxDecimalDigits
    case d: scala.math.BigDecimal => d.precision <= MaxDecimalDigits
    case d: org.apache.spark.sql.types.Decimal => d.toJavaBigDecimal.precision <= MaxDecimalDigits
    case d: java.sql.Date => inDays(DateTimeUtils.fromJavaDate(d))
    case d: LocalDate => inDays(d.toEpochDay)
    case t: LocalDateTime => inMicros(DateTimeUtils.localDateTimeToMicros(t), 0L)
    case t: java.sql.Timestamp => inMicros(DateTimeUtils.fromJavaTimestamp(t), DayMicros)
    case t: java.time.Instant => inMicros(DateTimeUtils.instantToMicros(t), DayMicros)
    case _ => true
  }

  private def inDays(days: Long): Boolean = days >= MinDay && days <= MaxDay

  private def inMicros(micros: Long, margin: Long): Boolean =
    micros >= MinMicros + margin && micros <= MaxMicros - margin
}
