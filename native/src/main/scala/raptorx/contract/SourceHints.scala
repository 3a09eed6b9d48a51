package raptorx.contract

import scala.util.Try

import org.apache.spark.sql.sources
import org.apache.spark.sql.types._

/**
 * What the Python source tells the provider about a table, in the metadata of its schema's
 * first field (as [[TableStatistics]] does; [[SourceHints.split]] removes it):
 *
 *  - `exactColumns`: the columns whose pushed filters the Python reader evaluates exactly
 *    (partition keys, and the types `predicates.is_exact` accepts). The provider reports a
 *    filter as fully handled only if it names one of them and has a form and a literal the
 *    reader takes exactly ([[SourceHints.isExact]]); every other filter stays with Spark.
 *  - `aggregationPushdown`: the property `hive.aggregation-pushdown-enabled` of this read.
 *  - `aggregationKeys`: the columns a pushed aggregation may group by (None: any), chosen by
 *    the Python source (`table_schema.group_keys`: with Spark's own reader reading the splits,
 *    only keys that fold a split into few groups are worth a Python worker).
 *
 * A read whose schema was given (no `schema()` call) has no hints: no filter is reported as
 * handled and no aggregation is pushed, which is the plain scan.
 */
case class SourceHints(exactColumns: Set[String], aggregationPushdown: Boolean,
                       aggregationKeys: Option[Set[String]] = scala.None) {
  import SourceHints._

  /** Whether an aggregation grouped by `keys` may be pushed (every column they read is
   * one of [[aggregationKeys]]). */
  def mayGroupBy(keys: Seq[org.apache.spark.sql.connector.expressions.Expression]): Boolean =
    aggregationKeys.forall(allowed =>
      keys.forall(_.references().forall(r => allowed.contains(r.fieldNames().mkString(".")))))

  /** Whether the Python reader evaluates `f` exactly (so Spark need not re-apply it). */
  def isExact(f: sources.Filter, schema: StructType): Boolean = {
    def column(name: String): Option[DataType] =
      if (exactColumns.contains(name)) schema.fields.find(_.name == name).map(_.dataType)
      else scala.None
    def literal(name: String, v: Any): Boolean = v != null && column(name).exists(fits(_, v))
    f match {
      case sources.Not(child) => isExact(child, schema)
      case sources.EqualTo(a, v) => literal(a, v)
      case sources.EqualNullSafe(a, v) => if (v == null) column(a).isDefined else literal(a, v)
      case sources.GreaterThan(a, v) => literal(a, v)
      case sources.GreaterThanOrEqual(a, v) => literal(a, v)
      case sources.LessThan(a, v) => literal(a, v)
      case sources.LessThanOrEqual(a, v) => literal(a, v)
      case sources.In(a, vs) => vs.nonEmpty && vs.forall(literal(a, _))
      case sources.IsNull(a) => column(a).isDefined
      case sources.IsNotNull(a) => column(a).isDefined
      case sources.StringStartsWith(a, v) => column(a).contains(StringType) && v != null
      case sources.StringEndsWith(a, v) => column(a).contains(StringType) && v != null
      case sources.StringContains(a, v) => column(a).contains(StringType) && v != null
      case _ => false // And/Or and the rest: Spark splits conjunctions; the others stay with it
    }
  }
}

object SourceHints {
  val ExactColumnsKey: String = Protocol.ExactFilterColumnsKey
  val AggregationKey: String = Protocol.AggregationPushdownKey
  val AggregationKeysKey: String = Protocol.AggregationKeysKey
  val Empty: SourceHints = SourceHints(Set.empty, aggregationPushdown = false)

  /** The schema without the hints, and the hints (None when the source gave none). */
  def split(schema: StructType): (StructType, SourceHints) = {
    if (schema.isEmpty || !schema.head.metadata.contains(AggregationKey)) return (schema, Empty)
    val meta = schema.head.metadata
    val hints = SourceHints(
      Try(meta.getStringArray(ExactColumnsKey).toSet).getOrElse(Set.empty[String]),
      meta.getBoolean(AggregationKey),
      if (meta.contains(AggregationKeysKey)) {
        Some(Try(meta.getStringArray(AggregationKeysKey).toSet).getOrElse(Set.empty[String]))
      } else scala.None)
    val clean = new MetadataBuilder().withMetadata(meta).remove(ExactColumnsKey)
      .remove(AggregationKey).remove(AggregationKeysKey).build()
    (StructType(schema.head.copy(metadata = clean) +: schema.tail), hints)
  }

  /** A literal the Python reader compares exactly with a column of type `t`: of the column's
   * own kind and range (a literal of another kind, an out-of-range integer or a decimal of
   * more than 28 digits is left to Spark). */
  private def fits(t: DataType, v: Any): Boolean = (t, v) match {
    case (ByteType | ShortType | IntegerType | LongType, n: java.lang.Number)
        if n.isInstanceOf[java.lang.Byte] || n.isInstanceOf[java.lang.Short] ||
          n.isInstanceOf[java.lang.Integer] || n.isInstanceOf[java.lang.Long] =>
      val x = n.longValue()
      t match {
        case ByteType => x >= Byte.MinValue && x <= Byte.MaxValue
        case ShortType => x >= Short.MinValue && x <= Short.MaxValue
        case IntegerType => x >= Int.MinValue && x <= Int.MaxValue
        case _ => true
      }
    case (_: DecimalType, d: java.math.BigDecimal) => d.precision() <= 28
    case (DateType, _: java.sql.Date | _: java.time.LocalDate) => true
    case (StringType, _: String) => true
    case (BooleanType, _: java.lang.Boolean) => true
    case _ => false
  }
}
