package raptorx.contract

import org.apache.spark.sql.sources
import org.apache.spark.sql.types.{DataType, MetadataBuilder, StructType}

/**
 * The pushed aggregation's JSON, the JVM's half of raptorx_py's
 * `jvm_contract/pushed_aggregation.py`, which reads it: the provider writes it
 * (`PartialAggregation` decides what is pushed and builds it with these functions) in the
 * metadata of the partial schema's first field ([[JsonKey]], [[withJson]]).
 *
 * The document ([[document]], `version` 1): `group_by`, a list of `{"column", "type"}`
 * ([[groupKey]]); `aggregates`, a list of `{"fn", "type", "input"}` ([[aggregate]]);
 * `filters`, the scan's filters ([[filter]]). An expression is `{"op": "column", "name"}`,
 * `{"op": "literal", "value"}`, `{"op": "cast", "child"}` or `{"op": "+" | "-" | "*",
 * "left", "right"}`, each with its Spark `type` ([[node]]). A filter is `{"op", "column",
 * "value" | "values" | "child"}` in the words of `Protocol.Filter*`, a literal `{"type",
 * "value"}` with `type` one of `Protocol.Value*`.
 */
object PushedAggregation {
  val JsonKey: String = Protocol.AggregationKey

  /** The document of a partial aggregation: its group-by keys, aggregates and filters,
   * each already JSON. */
  def document(groupBy: Seq[String], aggregates: Seq[String], filters: Seq[String]): String =
    Json.obj("version" -> "1", "group_by" -> Json.arr(groupBy),
      "aggregates" -> Json.arr(aggregates), "filters" -> Json.arr(filters))

  /** A group-by key: a column and its type. */
  def groupKey(column: String, t: DataType): String =
    Json.obj("column" -> Json.str(column), "type" -> Json.str(t.simpleString))

  /** An aggregate: its function (`sum`, `count`, `count_star`, `min`, `max`), its partial
   * type and its input expression (none for `count_star`). */
  def aggregate(fn: String, t: DataType, input: Option[String]): String =
    Json.obj(Seq("fn" -> Json.str(fn), "type" -> Json.str(t.simpleString)) ++
      input.map(e => "input" -> e): _*)

  /** An expression node: its op, its Spark type and the rest of its fields (JSON). */
  def node(op: String, t: DataType, rest: (String, String)*): String =
    Json.obj(Seq("op" -> Json.str(op), "type" -> Json.str(t.simpleString)) ++ rest: _*)

  /** A JSON string. */
  def str(s: String): String = Json.str(s)

  /** A filter as JSON for the Python reader, or None for a filter or value of a kind the
   * JSON has no word for. */
  def filter(f: sources.Filter): Option[String] = {
    def value(v: Any): Option[String] = {
      val typed = v match {
        case d: java.math.BigDecimal => Some((Protocol.ValueDecimal, d.toPlainString))
        case n: java.lang.Number => Some((Protocol.ValueInteger, n.longValue().toString))
        case d: java.sql.Date => Some((Protocol.ValueDate, d.toLocalDate.toString))
        case d: java.time.LocalDate => Some((Protocol.ValueDate, d.toString))
        case b: java.lang.Boolean => Some((Protocol.ValueBoolean, b.toString))
        case s: String => Some((Protocol.ValueString, s))
        case _ => None
      }
      typed.map { case (t, text) => Json.obj("type" -> Json.str(t), "value" -> Json.str(text)) }
    }
    def cmp(op: String, a: String, v: Any): Option[String] =
      (if (v == null) Some("null") else value(v)).map { json =>
        Json.obj("op" -> Json.str(op), "column" -> Json.str(a), "value" -> json)
      }
    def col(op: String, a: String) = Some(Json.obj("op" -> Json.str(op), "column" -> Json.str(a)))
    def text(op: String, a: String, v: String) =
      Some(Json.obj("op" -> Json.str(op), "column" -> Json.str(a), "value" -> Json.str(v)))
    f match {
      case sources.Not(c) =>
        filter(c).map(child => Json.obj("op" -> Json.str(Protocol.FilterNot), "child" -> child))
      case sources.EqualTo(a, v) => cmp(Protocol.FilterEqual, a, v)
      case sources.EqualNullSafe(a, v) => cmp(Protocol.FilterEqualNullSafe, a, v)
      case sources.GreaterThan(a, v) => cmp(Protocol.FilterGreater, a, v)
      case sources.GreaterThanOrEqual(a, v) => cmp(Protocol.FilterGreaterOrEqual, a, v)
      case sources.LessThan(a, v) => cmp(Protocol.FilterLess, a, v)
      case sources.LessThanOrEqual(a, v) => cmp(Protocol.FilterLessOrEqual, a, v)
      case sources.In(a, vs) =>
        val values = vs.toSeq.map(value)
        if (values.exists(_.isEmpty)) None
        else Some(Json.obj("op" -> Json.str(Protocol.FilterIn), "column" -> Json.str(a),
          "values" -> Json.arr(values.flatten)))
      case sources.IsNull(a) => col(Protocol.FilterIsNull, a)
      case sources.IsNotNull(a) => col(Protocol.FilterIsNotNull, a)
      case sources.StringStartsWith(a, v) => text(Protocol.FilterStartsWith, a, v)
      case sources.StringEndsWith(a, v) => text(Protocol.FilterEndsWith, a, v)
      case sources.StringContains(a, v) => text(Protocol.FilterContains, a, v)
      case _ => None
    }
  }

  /** `partialSchema` with `json` on its first field, for the Python reader. */
  def withJson(partialSchema: StructType, json: String): StructType = {
    val first = partialSchema.head
    val meta = new MetadataBuilder().withMetadata(first.metadata).putString(JsonKey, json).build()
    StructType(first.copy(metadata = meta) +: partialSchema.tail)
  }
}
