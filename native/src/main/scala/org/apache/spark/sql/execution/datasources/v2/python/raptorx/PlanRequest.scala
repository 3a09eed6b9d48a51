package org.apache.spark.sql.execution.datasources.v2.python.raptorx

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}
import java.util
import java.util.concurrent.atomic.AtomicLong

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper
import com.fasterxml.jackson.module.scala.DefaultScalaModule
import net.razorvine.pickle.Pickler

import org.apache.spark.api.python.{PythonFunction, PythonWorkerUtils}
import org.apache.spark.sql.catalyst.CatalystTypeConverters
import org.apache.spark.sql.catalyst.expressions.variant.VariantExpressionEvalUtils
import org.apache.spark.sql.catalyst.parser.CatalystSqlParser
import org.apache.spark.sql.execution.datasources.v2.python.{PythonDataSourceReadInfo, PythonFilterPushdownResult, UserDefinedPythonDataSourceFilterPushdownRunner}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.sources
import org.apache.spark.sql.sources.Filter
import org.apache.spark.sql.types.{ArrayType, DataType, StructType}

import _root_.raptorx.contract.Protocol

/**
 * pyspark's request to plan a read with filters pushed (`data_source_pushdown_filters`), and
 * its answer, without pyspark's runner (`UserDefinedPythonDataSourceFilterPushdownRunner`).
 *
 * Why: the runner makes a Jackson `ObjectMapper` with the Scala module in its constructor, and
 * that mapper builds its serializers anew for its one request, per scan planned (the JVM's
 * CPU to make the runner and to write its request was most of a warm scan's planning, Q2).
 * Here the request is written by one mapper made once ([[PlanRequest.FilterJson]],
 * configured as the runner's).
 *
 * Contract: the same bytes as the runner's `writeToPython`, field for field (the source's
 * pickled function, the schema's JSON, the offered filters' JSON, `arrowMaxRecordsPerBatch`,
 * `pysparkBinaryAsBytes`), and the answer read as its `receiveFromPython` reads it (the read
 * plan, then the indices of the serialized filters taken, mapped back to the filters
 * offered). The filters are serialized by the runner's rule ([[PlanRequest.serialize]]): a
 * `Not` around one filter is that filter negated; the comparisons, `In` (its values as an
 * array of the column's type), `IsNull`, `IsNotNull` and the three string matches are sent,
 * each value converted by Spark's own `CatalystTypeConverters` and `castToVariant`; a value
 * with no variant, and every other filter (`And`, `Or`, collation-aware ones), is left out
 * (the reader never sees it, so Spark keeps it). A filter whose column is not in the schema
 * is the runner's own error: such a request is made by the runner itself.
 *
 * Limits: pyspark's runner is the reference. With [[Protocol.CheckPlanRequestsConf]] on
 * (tests) the runner writes each request too and reads each answer too, and any difference
 * fails the planning ([[PlanRequest.checked]] counts the requests compared);
 * `test_type_fidelity.py` checks every filter form on every column in both session time
 * zones. `NativeCompatibility` names the Spark internals used here.
 */
private[raptorx] class PlanRequest(source: PythonFunction, schema: StructType,
    filters: Seq[Filter]) {
  /** pyspark's runner, made only to check (`CheckPlanRequestsConf`). */
  private val runner: Option[PlanRequest.Runner] =
    if (PlanRequest.checking) Some(new PlanRequest.Runner(source, schema, filters)) else None

  /** The filters sent, each with its index among the filters offered; None: the runner's. */
  private val serialized: Option[Seq[PlanRequest.Serialized]] = PlanRequest.serialize(schema, filters)

  /** pyspark's runner, for a filter on a column the schema lacks (its error is the answer). */
  private lazy val fallback: PlanRequest.Runner =
    runner.getOrElse(new PlanRequest.Runner(source, schema, filters))

  def write(out: DataOutputStream): Unit = serialized match {
    case None => fallback.write(out)
    case Some(sent) =>
      val bytes = new ByteArrayOutputStream()
      val data = new DataOutputStream(bytes)
      PythonWorkerUtils.writePythonFunction(source, data)
      PythonWorkerUtils.writeUTF(schema.json, data)
      PythonWorkerUtils.writeUTF(PlanRequest.FilterJson.writeValueAsString(
        sent.map(_.json).asJava), data)
      data.writeInt(SQLConf.get.arrowMaxRecordsPerBatch)
      data.writeBoolean(SQLConf.get.pysparkBinaryAsBytes)
      data.flush()
      val ours = bytes.toByteArray
      for (spark <- runner) {
        val theirs = new ByteArrayOutputStream()
        spark.write(new DataOutputStream(theirs))
        val sparks = theirs.toByteArray
        if (!util.Arrays.equals(ours, sparks)) {
          throw new IllegalStateException("raptorx: the plan request differs from the one " +
            s"pyspark's runner writes, for the filters ${filters.mkString(", ")} over " +
            s"$schema: ${PlanRequest.difference(ours, sparks)}")
        }
      }
      out.write(ours)
  }

  def read(in: DataInputStream): PythonFilterPushdownResult = serialized match {
    case None => fallback.read(in)
    case Some(sent) =>
      // Checking, the runner reads the same answer: keep its bytes.
      val answer = runner.map(_ => in.readAllBytes())
      val data = answer.fold(in)(bytes => new DataInputStream(new ByteArrayInputStream(bytes)))
      val readInfo = PythonDataSourceReadInfo.receive(data)
      val taken = ArrayBuffer.fill(filters.length)(false)
      for (_ <- 0 until data.readInt()) taken(sent(data.readInt()).index) = true
      for (spark <- runner; bytes <- answer) {
        val theirs = spark.read(new DataInputStream(new ByteArrayInputStream(bytes)))
        if (theirs.isFilterPushed != taken) {
          throw new IllegalStateException("raptorx: the filters taken differ from those " +
            s"pyspark's runner reads, for the filters ${filters.mkString(", ")} over $schema")
        }
        PlanRequest.checked.incrementAndGet()
      }
      PythonFilterPushdownResult(readInfo, taken)
  }
}

private[raptorx] object PlanRequest {
  /** A mapper configured as the runner's (`new ObjectMapper().registerModules(
   * DefaultScalaModule)`), made once: Jackson keeps the serializers it builds per mapper, and
   * a configured mapper is safe to share between threads. */
  val FilterJson: ObjectMapper = new ObjectMapper().registerModules(DefaultScalaModule)

  /** Requests compared with the runner's own (tests). */
  val checked = new AtomicLong()

  /** Where two requests first differ, with the text around it in each. */
  def difference(ours: Array[Byte], theirs: Array[Byte]): String = {
    val at = ours.indices.find(i => i >= theirs.length || ours(i) != theirs(i))
      .getOrElse(ours.length)
    def around(b: Array[Byte]): String = {
      val from = math.max(0, at - 60)
      new String(b, from, math.min(b.length, at + 60) - from,
        java.nio.charset.StandardCharsets.ISO_8859_1)
    }
    s"at byte $at of ${ours.length} (pyspark's: ${theirs.length}): ours '${around(ours)}', " +
      s"pyspark's '${around(theirs)}'"
  }

  private def checking: Boolean =
    SQLConf.get.getConfString(Protocol.CheckPlanRequestsConf, "false").toBoolean

  /** One filter as the runner serializes it: its JSON object (the runner's properties, in
   * its order: `name`, `columnPath`, `value` (null for none), `isNegated` and `index`, its
   * annotations to leave some out notwithstanding) and its index among the filters offered. */
  final case class Serialized(json: util.Map[String, AnyRef], index: Int)

  /** The filters the runner would send, in its order; None when a filter names a column
   * the schema lacks (the runner's own error is then the answer). */
  def serialize(schema: StructType, filters: Seq[Filter]): Option[Seq[Serialized]] = {
    val out = ArrayBuffer[Serialized]()
    var missing = false
    val offered = filters.iterator.zipWithIndex
    while (!missing && offered.hasNext) {
      val (filter, i) = offered.next()
      val (child, negated) = filter match {
        case sources.Not(f) => (f, true)
        case f => (f, false)
      }
      for ((name, attribute, value, typeOf) <- parts(child)) {
        val path = CatalystSqlParser.parseMultipartIdentifier(attribute)
        schema.findNestedField(path, includeCollections = true) match {
          case None => missing = true
          case Some((_, field)) =>
            val variant = value.map { v =>
              try Some(VariantExpressionEvalUtils.castToVariant(
                CatalystTypeConverters.convertToCatalyst(v), typeOf(field.dataType)))
              catch { case _: MatchError => None } // no variant: the runner leaves it out
            }
            if (!variant.contains(None)) {
              val json = new util.LinkedHashMap[String, AnyRef]()
              json.put("name", name)
              json.put("columnPath", path.asJava)
              json.put("value", variant.flatten.orNull)
              json.put("isNegated", java.lang.Boolean.valueOf(negated))
              json.put("index", Integer.valueOf(i))
              out += Serialized(json, i)
            }
        }
      }
    }
    if (missing) None else Some(out.toSeq)
  }

  /** A filter the runner sends: its name, column, value and the type the value is cast to
   * (given the column's); None for one it leaves out. */
  private def parts(f: Filter): Option[(String, String, Option[Any], DataType => DataType)] =
    f match {
      case sources.EqualTo(a, v) => Some(("EqualTo", a, Some(v), identity))
      case sources.EqualNullSafe(a, v) => Some(("EqualNullSafe", a, Some(v), identity))
      case sources.GreaterThan(a, v) => Some(("GreaterThan", a, Some(v), identity))
      case sources.GreaterThanOrEqual(a, v) => Some(("GreaterThanOrEqual", a, Some(v), identity))
      case sources.LessThan(a, v) => Some(("LessThan", a, Some(v), identity))
      case sources.LessThanOrEqual(a, v) => Some(("LessThanOrEqual", a, Some(v), identity))
      case sources.In(a, vs) => Some(("In", a, Some(vs), (t: DataType) => ArrayType(t)))
      case sources.IsNull(a) => Some(("IsNull", a, None, identity))
      case sources.IsNotNull(a) => Some(("IsNotNull", a, None, identity))
      case sources.StringStartsWith(a, v) => Some(("StringStartsWith", a, Some(v), identity))
      case sources.StringEndsWith(a, v) => Some(("StringEndsWith", a, Some(v), identity))
      case sources.StringContains(a, v) => Some(("StringContains", a, Some(v), identity))
      case _ => None
    }

  /** pyspark's runner, for its own bytes. */
  final class Runner(source: PythonFunction, schema: StructType, filters: Seq[Filter])
      extends UserDefinedPythonDataSourceFilterPushdownRunner(source, schema, filters) {
    def write(out: DataOutputStream): Unit = {
      writeToPython(out, new Pickler())
      out.flush()
    }
    def read(in: DataInputStream): PythonFilterPushdownResult = receiveFromPython(in)
  }
}
