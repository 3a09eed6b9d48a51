package raptorx


import scala.util.Try

import org.apache.spark.sql.catalyst.expressions.{Add, AttributeReference, Expression => CatalystExpression, Literal => CatalystLiteral, Multiply, Subtract}
import org.apache.spark.sql.connector.expressions.{Cast => V2Cast, Expression => V2Expression, GeneralScalarExpression, Literal => V2Literal, NamedReference}
import org.apache.spark.sql.connector.expressions.aggregate.{Aggregation, Avg, Count, CountStar, Max, Min, Sum}
import org.apache.spark.sql.connector.read.Scan
import org.apache.spark.sql.execution.python.raptorx.{ArrowColumnarScan, ScanFacts}
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
 *
 * A read whose schema was given (no `schema()` call) has no hints: no filter is reported as
 * handled and no aggregation is pushed, which is the plain scan.
 */
case class SourceHints(exactColumns: Set[String], aggregationPushdown: Boolean) {
  import SourceHints._

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
  val Empty: SourceHints = SourceHints(Set.empty, aggregationPushdown = false)

  /** The schema without the hints, and the hints (None when the source gave none). */
  def split(schema: StructType): (StructType, SourceHints) = {
    if (schema.isEmpty || !schema.head.metadata.contains(AggregationKey)) return (schema, Empty)
    val meta = schema.head.metadata
    val hints = SourceHints(
      Try(meta.getStringArray(ExactColumnsKey).toSet).getOrElse(Set.empty[String]),
      meta.getBoolean(AggregationKey))
    val clean = new MetadataBuilder().withMetadata(meta).remove(ExactColumnsKey)
      .remove(AggregationKey).build()
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

/**
 * A partial aggregation the Python reader computes per split: group-by columns and
 * `SUM`/`COUNT`/`COUNT(*)`/`MIN`/`MAX` (Spark turns `AVG` into `SUM` and `COUNT` before it
 * asks, where [[AverageRewrite]] lets it) over columns and the arithmetic Spark translates (`+ - *`, casts, literals).
 *
 * The types of the partial result are exactly those Spark's rewrite of the plan expects
 * (`V2ScanRelationPushDown`): Spark merges `SUM` partials with a `SUM` over the partials cast
 * to the type of the original `SUM`'s input, `COUNT` partials with a `SUM` of longs, and
 * `MIN`/`MAX` partials with `MIN`/`MAX` over the input's type. So a `SUM` partial has the
 * input's type (the Python reader splits a group's sum over several rows should it not fit
 * that type, so nothing is cast with loss), a `COUNT` is a `bigint`, a `MIN`/`MAX` the
 * input's type. The type of each arithmetic node is Spark's own (its `Add`/`Subtract`/
 * `Multiply` under the session's decimal settings), and it travels with the node.
 *
 * Not pushed (the plain scan stays): `DISTINCT`, any other function, group-by expressions,
 * float/double sums, min/max and group keys (NaN and -0.0 compare differently in Arrow),
 * division, casts other than widening ones between integers and decimals, a multiplication
 * whose exact product would not fit Arrow's 76-digit decimal.
 *
 * `json` is what travels to the Python reader (raptorx_py/datasource/aggregation.py), in
 * the metadata of the partial schema's first field: it reaches Python's `reader(schema)`
 * with the schema, so no extra worker call is needed.
 */
case class PartialAggregation(
    aggregation: Aggregation,
    partialSchema: StructType,
    json: String) {
  /** The partial schema carrying the aggregation, for the Python reader. */
  def schemaForPython: StructType = {
    val first = partialSchema.head
    val meta = new MetadataBuilder().withMetadata(first.metadata)
      .putString(PartialAggregation.JsonKey, json).build()
    StructType(first.copy(metadata = meta) +: partialSchema.tail)
  }

  /** As Spark's own sources show a pushed aggregation in `EXPLAIN`: the aggregates, and the
   * group-by expressions. */
  def aggregatesText: String =
    aggregation.aggregateExpressions().map(_.describe()).mkString("[", ", ", "]")
  def groupByText: String =
    aggregation.groupByExpressions().map(_.describe()).mkString("[", ", ", "]")
}

object PartialAggregation {
  val JsonKey: String = Protocol.AggregationKey

  /** The partial aggregation of `aggregation` over `table` after `filters` (each one the
   * Python reader evaluates exactly: Spark pushes an aggregation only when none is left to
   * it), or None if it is not pushable. */
  def translate(aggregation: Aggregation, table: StructType, filters: Seq[sources.Filter],
      hints: SourceHints): Option[PartialAggregation] =
    if (!filters.forall(f => PythonFilterValues.representable(f) && hints.isExact(f, table))) scala.None
    else Try(translateOrThrow(aggregation, table, filters)).toOption.flatten

  /** A filter as JSON for the Python reader. pyspark's own filter pushdown resolves a
   * filter's column in the scan's output schema, which for an aggregated scan is the
   * partial schema, so the filters travel with the aggregation instead. */
  private def filterJson(f: sources.Filter): String = {
    def value(v: Any): String = {
      val (t, text) = v match {
        case d: java.math.BigDecimal => (Protocol.ValueDecimal, d.toPlainString)
        case n: java.lang.Number => (Protocol.ValueInteger, n.longValue().toString)
        case d: java.sql.Date => (Protocol.ValueDate, d.toLocalDate.toString)
        case d: java.time.LocalDate => (Protocol.ValueDate, d.toString)
        case b: java.lang.Boolean => (Protocol.ValueBoolean, b.toString)
        case s: String => (Protocol.ValueString, s)
        case _ => no()
      }
      Json.obj("type" -> Json.str(t), "value" -> Json.str(text))
    }
    def cmp(op: String, a: String, v: Any) = Json.obj("op" -> Json.str(op),
      "column" -> Json.str(a), "value" -> (if (v == null) "null" else value(v)))
    def col(op: String, a: String) = Json.obj("op" -> Json.str(op), "column" -> Json.str(a))
    def text(op: String, a: String, v: String) =
      Json.obj("op" -> Json.str(op), "column" -> Json.str(a), "value" -> Json.str(v))
    f match {
      case sources.Not(c) => Json.obj("op" -> Json.str(Protocol.FilterNot), "child" -> filterJson(c))
      case sources.EqualTo(a, v) => cmp(Protocol.FilterEqual, a, v)
      case sources.EqualNullSafe(a, v) => cmp(Protocol.FilterEqualNullSafe, a, v)
      case sources.GreaterThan(a, v) => cmp(Protocol.FilterGreater, a, v)
      case sources.GreaterThanOrEqual(a, v) => cmp(Protocol.FilterGreaterOrEqual, a, v)
      case sources.LessThan(a, v) => cmp(Protocol.FilterLess, a, v)
      case sources.LessThanOrEqual(a, v) => cmp(Protocol.FilterLessOrEqual, a, v)
      case sources.In(a, vs) => Json.obj("op" -> Json.str(Protocol.FilterIn), "column" -> Json.str(a),
        "values" -> Json.arr(vs.toSeq.map(value)))
      case sources.IsNull(a) => col(Protocol.FilterIsNull, a)
      case sources.IsNotNull(a) => col(Protocol.FilterIsNotNull, a)
      case sources.StringStartsWith(a, v) => text(Protocol.FilterStartsWith, a, v)
      case sources.StringEndsWith(a, v) => text(Protocol.FilterEndsWith, a, v)
      case sources.StringContains(a, v) => text(Protocol.FilterContains, a, v)
      case _ => no()
    }
  }

  private final class NotPushable extends RuntimeException(null, null, false, false)
  private def no(): Nothing = throw new NotPushable

  private def translateOrThrow(agg: Aggregation, table: StructType,
      filters: Seq[sources.Filter]): Option[PartialAggregation] = {
    def columnType(ref: NamedReference): (String, DataType) = {
      if (ref.fieldNames().length != 1) no()
      val name = ref.fieldNames()(0)
      (name, table.fields.find(_.name == name).getOrElse(no()).dataType)
    }
    val fields = Seq.newBuilder[StructField]
    val names = scala.collection.mutable.HashSet.empty[String]
    def field(name: String, t: DataType): Unit = {
      var n = name
      var i = 1
      while (names.contains(n)) { n = s"$name#$i"; i += 1 }
      names += n
      fields += StructField(n, t, nullable = true)
    }
    val keys = agg.groupByExpressions().map {
      case ref: NamedReference =>
        val (name, t) = columnType(ref)
        if (!groupable(t)) no()
        field(name, t)
        Json.obj("column" -> Json.str(name), "type" -> Json.str(t.simpleString))
      case _ => no()
    }
    val aggregates = agg.aggregateExpressions().map { fn =>
      val (kind, input, outType) = fn match {
        case _: CountStar => ("count_star", None, LongType)
        case c: Count if !c.isDistinct =>
          val e = expression(c.column(), table)
          ("count", Some(e), LongType)
        case s: Sum if !s.isDistinct =>
          val e = expression(s.column(), table)
          if (!summable(e.dataType)) no()
          ("sum", Some(e), e.dataType)
        case m: Min => val e = expression(m.column(), table); if (!ordered(e.dataType)) no()
          ("min", Some(e), e.dataType)
        case m: Max => val e = expression(m.column(), table); if (!ordered(e.dataType)) no()
          ("max", Some(e), e.dataType)
        case _ => no()
      }
      field(fn.describe(), outType)
      Json.obj(Seq("fn" -> Json.str(kind), "type" -> Json.str(outType.simpleString)) ++
        input.map(e => "input" -> e.json): _*)
    }
    val json = Json.obj("version" -> "1", "group_by" -> Json.arr(keys.toSeq),
      "aggregates" -> Json.arr(aggregates.toSeq), "filters" -> Json.arr(filters.map(filterJson)))
    Some(PartialAggregation(agg, StructType(fields.result()), json))
  }

  /** Spark's type of an input expression the provider translates (throws if it does not). */
  private[raptorx] def inputType(e: V2Expression, table: StructType): DataType =
    expression(e, table).dataType

  private def integral(t: DataType) = t match {
    case ByteType | ShortType | IntegerType | LongType => true
    case _ => false
  }
  private def numeric(t: DataType) = integral(t) || t.isInstanceOf[DecimalType]
  private def summable(t: DataType) = numeric(t)
  private def ordered(t: DataType) = numeric(t) || (t match {
    case StringType | DateType | BooleanType | TimestampType | TimestampNTZType => true
    case _ => false
  })
  private def groupable(t: DataType) = ordered(t) || t == BinaryType

  /** An input expression: its JSON for Python, its Spark type and its catalyst twin (whose
   * `dataType` is Spark's own answer for the result type of an arithmetic node). */
  private case class Translated(json: String, catalyst: CatalystExpression) {
    def dataType: DataType = catalyst.dataType
  }

  private def node(op: String, t: DataType, rest: (String, String)*): String =
    Json.obj(Seq("op" -> Json.str(op), "type" -> Json.str(t.simpleString)) ++ rest: _*)

  private def expression(e: V2Expression, table: StructType): Translated = e match {
    case ref: NamedReference =>
      if (ref.fieldNames().length != 1) no()
      val name = ref.fieldNames()(0)
      val t = table.fields.find(_.name == name).getOrElse(no()).dataType
      Translated(node("column", t, "name" -> Json.str(name)), AttributeReference(name, t)())
    case lit: V2Literal[_] =>
      val t = lit.dataType()
      val text = (lit.value(), t) match {
        case (null, _) => no()
        case (d: Decimal, _: DecimalType) => d.toJavaBigDecimal.toPlainString
        case (n: java.lang.Number, _) if integral(t) => n.longValue().toString
        case _ => no()
      }
      Translated(node("literal", t, "value" -> Json.str(text)), CatalystLiteral(lit.value(), t))
    case c: V2Cast =>
      val child = expression(c.expression(), table)
      val (from, to) = (child.dataType, c.dataType())
      val widening = (from, to) match {
        case (f, t) if integral(f) && integral(t) => t.defaultSize >= f.defaultSize
        case (f, t: DecimalType) if integral(f) =>
          val digits = f match { case ByteType => 3; case ShortType => 5; case IntegerType => 10; case _ => 20 }
          t.precision - t.scale >= digits
        case (f: DecimalType, t: DecimalType) =>
          t.scale >= f.scale && t.precision - t.scale >= f.precision - f.scale
        case _ => false
      }
      if (!widening) no()
      Translated(node("cast", to, "child" -> child.json),
        org.apache.spark.sql.catalyst.expressions.Cast(child.catalyst, to))
    case g: GeneralScalarExpression if g.children().length == 2 &&
        Set("+", "-", "*").contains(g.name()) =>
      val l = expression(g.children()(0), table)
      val r = expression(g.children()(1), table)
      val ok = (l.dataType, r.dataType) match {
        case (a, b) if integral(a) && integral(b) => a == b
        case (a: DecimalType, b: DecimalType) =>
          // Python computes the exact value in Arrow's decimal256 (76 digits) before rounding.
          g.name() != "*" || a.precision + b.precision + 1 <= 76
        case _ => false
      }
      if (!ok) no()
      val cat = g.name() match {
        case "+" => Add(l.catalyst, r.catalyst)
        case "-" => Subtract(l.catalyst, r.catalyst)
        case _ => Multiply(l.catalyst, r.catalyst)
      }
      if (!cat.checkInputDataTypes().isSuccess || !numeric(cat.dataType)) no()
      Translated(node(g.name(), cat.dataType, "left" -> l.json, "right" -> r.json), cat)
    case _ => no()
  }
}

/** The smallest JSON writer the aggregation needs (values are already JSON text). */
private object Json {
  def str(s: String): String = {
    val b = new StringBuilder("\"")
    s.foreach {
      case '"' => b.append("\\\"")
      case '\\' => b.append("\\\\")
      case c if c < ' ' => b.append(f"\\u${c.toInt}%04x")
      case c => b.append(c)
    }
    b.append('"').toString
  }
  def obj(kv: (String, String)*): String = kv.map { case (k, v) => s"${str(k)}:$v" }
    .mkString("{", ",", "}")
  def arr(vs: Seq[String]): String = vs.mkString("[", ",", "]")
}

/**
 * The scan of a pushed partial aggregation: the columnar Python scan whose reader returns the
 * partial rows; its schema is the partial schema (without the aggregation it carried to
 * Python), its size unknown, and its `EXPLAIN` names what was pushed (`PushedAggregates`,
 * `PushedGroupByExpressions`) with the rest of the scan's facts (`ScanReport.metadata`).
 */
class AggregatedScan(python: Scan, partial: PartialAggregation, facts: ScanFacts)
    extends ArrowColumnarScan(python, None,
      Some(facts.copy(aggregation = Some((partial.aggregatesText, partial.groupByText))))) {
  override def readSchema(): StructType = partial.partialSchema
}
