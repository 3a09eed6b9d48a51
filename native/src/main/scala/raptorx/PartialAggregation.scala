package raptorx

import scala.util.Try

import org.apache.spark.sql.catalyst.expressions.{Add, AttributeReference, Expression => CatalystExpression, Literal => CatalystLiteral, Multiply, Subtract}
import org.apache.spark.sql.connector.expressions.{Cast => V2Cast, Expression => V2Expression, GeneralScalarExpression, Literal => V2Literal, NamedReference}
import org.apache.spark.sql.connector.expressions.aggregate.{Aggregation, Count, CountStar, Max, Min, Sum}
import org.apache.spark.sql.sources
import org.apache.spark.sql.types._

import raptorx.contract.PushedAggregation.{node, str}
import raptorx.contract.{PushedAggregation, SourceHints}

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
 * `json` is what travels to the Python reader (written with the contract's
 * `PushedAggregation`, read by raptorx_py's `jvm_contract/pushed_aggregation.py` and
 * evaluated by `datasource/reading/aggregation.py`), in the metadata of the partial
 * schema's first field: it reaches Python's `reader(schema)`
 * with the schema, so no extra worker call is needed. `splitAggregation` is the same
 * aggregation for the JVM's own computation of it over Spark's reader's batches, which read
 * `inputSchema`: the table's columns the keys, the aggregates and the filters need, in the
 * table's order.
 */
case class PartialAggregation(
    aggregation: Aggregation,
    partialSchema: StructType,
    json: String,
    splitAggregation: SplitAggregation,
    inputSchema: StructType) {
  /** The partial schema carrying the aggregation, for the Python reader. */
  def schemaForPython: StructType = PushedAggregation.withJson(partialSchema, json)

  /** As Spark's own sources show a pushed aggregation in `EXPLAIN`: the aggregates, and the
   * group-by expressions. */
  def aggregatesText: String =
    aggregation.aggregateExpressions().map(_.describe()).mkString("[", ", ", "]")
  def groupByText: String =
    aggregation.groupByExpressions().map(_.describe()).mkString("[", ", ", "]")
}

object PartialAggregation {
  /** The partial aggregation of `aggregation` over `table` after `filters` (each one the
   * Python reader evaluates exactly: Spark pushes an aggregation only when none is left to
   * it), or None if it is not pushable. */
  def translate(aggregation: Aggregation, table: StructType, filters: Seq[sources.Filter],
      hints: SourceHints): Option[PartialAggregation] =
    if (!filters.forall(f => PythonFilterValues.representable(f) && hints.isExact(f, table))) scala.None
    else Try(translateOrThrow(aggregation, table, filters)).toOption.flatten

  /** A filter as JSON for the Python reader (`PushedAggregation.filter`). pyspark's own
   * filter pushdown resolves a filter's column in the scan's output schema, which for an
   * aggregated scan is the partial schema, so the filters travel with the aggregation
   * instead. */
  private def filterJson(f: sources.Filter): String = PushedAggregation.filter(f).getOrElse(no())

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
    val keyColumns = agg.groupByExpressions().map {
      case ref: NamedReference =>
        val (name, t) = columnType(ref)
        if (!groupable(t)) no()
        field(name, t)
        (name, t)
      case _ => no()
    }
    val keys = keyColumns.map { case (name, t) => PushedAggregation.groupKey(name, t) }
    val jvmAggregates = Seq.newBuilder[SplitAggregation.Aggregate]
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
      jvmAggregates += SplitAggregation.Aggregate(kind, input.map(_.input), outType)
      PushedAggregation.aggregate(kind, outType, input.map(_.json))
    }
    val json = PushedAggregation.document(keys.toSeq, aggregates.toSeq, filters.map(filterJson))
    val partialSchema = StructType(fields.result())
    val split = new SplitAggregation(keyColumns.toIndexedSeq, jvmAggregates.result().toIndexedSeq,
      partialSchema)
    val read = keyColumns.map(_._1).toSet ++ split.aggregates.flatMap(_.input).flatMap(_.columns) ++
      filters.flatMap(_.references)
    Some(PartialAggregation(agg, partialSchema, json, split,
      StructType(table.fields.filter(f => read.contains(f.name)))))
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
  private def nested(t: DataType) = t match {
    case _: StructType | _: ArrayType | _: MapType => true
    case _ => false
  }

  /** An input expression: its JSON for Python, its Spark type and its catalyst twin (whose
   * `dataType` is Spark's own answer for the result type of an arithmetic node). */
  private case class Translated(json: String, catalyst: CatalystExpression,
      input: SplitAggregation.Input) {
    def dataType: DataType = catalyst.dataType
  }

  private def expression(e: V2Expression, table: StructType): Translated = e match {
    case ref: NamedReference =>
      if (ref.fieldNames().length != 1) no()
      val name = ref.fieldNames()(0)
      val t = table.fields.find(_.name == name).getOrElse(no()).dataType
      // A nested column (struct, array, map) is no aggregate's input, not even count's:
      // Spark aggregates it above the scan (docs/design/types.md, "Nested columns").
      if (nested(t)) no()
      Translated(node("column", t, "name" -> str(name)), AttributeReference(name, t)(),
        SplitAggregation.Column(name, t))
    case lit: V2Literal[_] =>
      val t = lit.dataType()
      val text = (lit.value(), t) match {
        case (null, _) => no()
        case (d: Decimal, _: DecimalType) => d.toJavaBigDecimal.toPlainString
        case (n: java.lang.Number, _) if integral(t) => n.longValue().toString
        case _ => no()
      }
      val unscaled = new java.math.BigDecimal(text).movePointRight(SplitAggregation.scaleOf(t))
        .toBigIntegerExact
      Translated(node("literal", t, "value" -> str(text)), CatalystLiteral(lit.value(), t),
        SplitAggregation.Literal(unscaled, t))
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
        org.apache.spark.sql.catalyst.expressions.Cast(child.catalyst, to),
        SplitAggregation.Cast(child.input, to))
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
      Translated(node(g.name(), cat.dataType, "left" -> l.json, "right" -> r.json), cat,
        SplitAggregation.Arithmetic(g.name(), l.input, r.input, cat.dataType))
    case _ => no()
  }
}
