package raptorx

import scala.util.Try

import org.apache.spark.sql.connector.expressions.aggregate.{Aggregation, Avg}
import org.apache.spark.sql.types.{ByteType, DecimalType, ShortType, StructType}

/**
 * Whether Spark's rewrite of `AVG` keeps its answer. A source that does not complete an
 * aggregation is offered it first with `AVG` ([[TieredHiveScanBuilder]]'s
 * `supportCompletePushDown`); Spark then replaces each `AVG(e)` by `SUM(e)` and `COUNT(e)`
 * (`V2ScanRelationPushDown`) and offers that. The `SUM` it substitutes is typed as `SUM`'s
 * own result and evaluated under the session's ANSI mode, which `AVG` is not:
 *
 *  - `AVG` of an integral column adds in double and never overflows; the substituted `SUM` is
 *    a bigint, which the exact sum of bigints passes with two rows (a wrong, wrapped average
 *    with ANSI off, `ARITHMETIC_OVERFLOW` with it on) and of ints past 2^32 rows. So `AVG`
 *    over int and bigint is not pushed; over tinyint and smallint the bigint sum would need
 *    2^48 rows of one group to overflow, and below 2^53 the double sum is exact as well.
 *  - `AVG` of decimal(p, s) sums in decimal(min(p + 10, 38), s), as `SUM` does, but
 *    `try_avg` (which the source cannot tell from `avg`: both are `Avg`) is null on overflow
 *    where the substituted `SUM` under ANSI fails. For p <= 28 the sum type has ten digits
 *    more than the input and cannot overflow below 10^10 rows of one group; for p > 28 it
 *    can with two rows, so such an `AVG` is not pushed.
 *  - `AVG` of anything else (float, double, intervals) is not pushed anyway (no float `SUM`).
 *
 * Once an `AVG` that is not kept was offered, the builder refuses the rewritten aggregation
 * too, whole: the plain scan and Spark's own `AVG` answer it.
 */
object AverageRewrite {
  /** Whether every `AVG` in `aggregation` keeps its answer as `SUM`/`COUNT` over `table`. */
  def keepsAnswer(aggregation: Aggregation, table: StructType): Boolean =
    aggregation.aggregateExpressions().forall {
      case avg: Avg => Try(PartialAggregation.inputType(avg.column(), table)).toOption.exists {
        case ByteType | ShortType => true
        case d: DecimalType => d.precision <= 28
        case _ => false
      }
      case _ => true
    }
}
