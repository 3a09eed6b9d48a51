package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.sources
import org.apache.spark.sql.sources.Filter
import org.apache.spark.sql.types.StructType

/**
 * What makes two scans of one query return the same rows, so that Spark reads one for both:
 * Spark's `ReuseExchangeAndSubquery` (and adaptive execution's stage cache) replaces an
 * exchange or subquery by an equal one already planned, and compares scans by their batches
 * (`BatchScanExec.equals`); Spark's own file scans are equal by table, columns and filters,
 * and a TPC-H query that reads a table twice alike (Q18's lineitem, Q11's supplier and
 * nation) reads it once.
 *
 * Two scans are equal when they read the same table as loaded (its name and read options),
 * in the same query (its snapshot token: every scan of a query reads one snapshot), the same
 * columns, with the same filters offered to the source ([[ScanIdentity.canonical]]: in any
 * order, the operands of `AND` and `OR` and the values of `IN` in any order too, as Spark's
 * canonical plans compare them; every other filter by its serialized form, so filters equal
 * by value but not alike, `1` and `1L`, make scans unequal, which only forgoes the reuse),
 * and the same pushed aggregation. Which reader reads each split (a
 * fragment hit, Spark's reader, the Python reader) is not part of it: each returns the same
 * rows.
 *
 * Made only under a query token ([[raptorx.QueryTokens]]) and for a scan that carries it (a
 * scan of no column carries none): without one, each scan takes its own snapshot and equals
 * no other scan.
 */
final case class ScanIdentity private (
    table: String,
    options: Map[String, String],
    token: String,
    schema: StructType,
    filters: Set[String],
    aggregation: Option[(String, String)])

object ScanIdentity {
  /** The identity of a scan of `table` read with `options`, under the query's `token`,
   * returning `schema` (without the token) with `filters` offered and `aggregation` pushed. */
  def of(table: String, options: java.util.Map[String, String], token: String,
         schema: StructType, filters: Seq[Filter],
         aggregation: Option[(String, String)]): ScanIdentity = {
    val opts = scala.jdk.CollectionConverters.MapHasAsScala(options).asScala.iterator
      .map { case (k, v) => k.toLowerCase(java.util.Locale.ROOT) -> v }.toMap
    ScanIdentity(table, opts, token, schema, filters.map(canonical).toSet, aggregation)
  }

  /** `f` as text equal for filters that select alike by their form: a chain of `AND`s (of
   * `OR`s) as the set of its operands, `IN` as its column and the set of its values, `NOT`
   * around its operand's text, and any other filter by a digest of its serialized form. */
  def canonical(f: Filter): String = {
    def leaf(g: Filter): String = JvmFileRead.ReaderFunctions.digest(Seq(g))
    def operands(g: Filter, and: Boolean): Seq[Filter] = g match {
      case sources.And(l, r) if and => operands(l, and) ++ operands(r, and)
      case sources.Or(l, r) if !and => operands(l, and) ++ operands(r, and)
      case other => Seq(other)
    }
    def set(parts: Seq[Filter], name: String): String =
      parts.map(canonical).distinct.sorted.mkString(s"$name(", ",", ")")
    f match {
      case sources.And(_, _) => set(operands(f, and = true), "and")
      case sources.Or(_, _) => set(operands(f, and = false), "or")
      case sources.Not(child) => s"not(${canonical(child)})"
      case sources.In(a, vs) =>
        vs.toSeq.map(v => leaf(sources.EqualTo(a, v))).distinct.sorted
          .mkString(s"in(${leaf(sources.IsNull(a))}:", ",", ")")
      case other => leaf(other)
    }
  }
}
