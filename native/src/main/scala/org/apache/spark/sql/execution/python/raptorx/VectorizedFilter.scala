package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.catalyst.expressions.{And, BasePredicate, BinaryComparison, BoundReference, EqualTo, Expression, GreaterThan, GreaterThanOrEqual, In, IsNotNull, IsNull, LessThan, LessThanOrEqual, Literal, Predicate}
import org.apache.spark.sql.execution.vectorized.{Dictionary, WritableColumnVector}
import org.apache.spark.sql.types._
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.types.UTF8String

import raptorx.ColumnLongs

/**
 * A scan's filters (one Catalyst predicate over the reader's columns, bound by position) kept
 * as a selection of a batch's rows, a column at a time where it can: each conjunct of the
 * form `column <op> literal` (`=`, `<`, `<=`, `>`, `>=`), `column IN (literals)`, `IS NULL`
 * or `IS NOT NULL` over integers, dates, timestamps, decimals of up to 18 digits and strings
 * is a loop over the column's vector (decimals compared as unscaled longs, with the literal
 * rounded to the column's scale the way that keeps the comparison exact), narrowing the
 * selection the next conjunct reads. What is left (doubles, `OR`, `NOT`, string matching,
 * decimals over 18 digits) is the predicate Spark would build, evaluated row by row on the
 * rows still selected. The rows kept are exactly those the whole predicate is true for:
 * a comparison with a null is not true.
 *
 * Why: evaluated row by row, a comparison of a decimal column makes a `Decimal` per row,
 * and the filter cost more than the scan (TPC-H Q6's three decimal and date ranges).
 *
 * Made per task (`newFilter`): the row predicate's code is not shared between threads.
 */
final class VectorizedFilter private (checks: Array[VectorizedFilter.Check],
                                      rest: Option[BasePredicate]) {

  /** The rows of `batch` the predicate keeps: `(count, selection)`, the selection null when
   * every row is kept. */
  def select(batch: ColumnarBatch): (Int, Array[Int]) = {
    val n = batch.numRows()
    var selection: Array[Int] = null
    var count = n
    var c = 0
    while (c < checks.length && count > 0) {
      val out = if (selection == null) new Array[Int](n) else selection
      count = checks(c).keep(batch, selection, count, out)
      selection = out
      c += 1
    }
    rest.foreach { p =>
      val out = if (selection == null) new Array[Int](n) else selection
      var kept = 0
      var i = 0
      while (i < count) {
        val row = if (selection == null) i else selection(i)
        if (p.eval(batch.getRow(row))) {
          out(kept) = row
          kept += 1
        }
        i += 1
      }
      selection = out
      count = kept
    }
    if (selection != null && count == n) (n, null) else (count, selection)
  }
}

object VectorizedFilter {
  /** A filter for one task: the conjuncts of `predicate` it runs a column at a time, the
   * rest as Spark's generated (or, failing that, interpreted) predicate. */
  def apply(predicate: Expression): VectorizedFilter = {
    val (checks, rest) = conjuncts(predicate).foldLeft((Vector.empty[Check], Vector.empty[Expression])) {
      case ((cs, rs), e) => compile(e) match {
        case Some(check) => (cs :+ check, rs)
        case None => (cs, rs :+ e)
      }
    }
    val remaining = if (rest.isEmpty) None else Some {
      val evaluator = Predicate.create(rest.reduce(And(_, _)))
      evaluator.initialize(0)
      evaluator
    }
    new VectorizedFilter(checks.toArray, remaining)
  }

  /** How many batches of a column this JVM tested by its dictionary's entries (tests). */
  def dictionaryBatches: Long = DictionaryBatches.get()
  private val DictionaryBatches = new java.util.concurrent.atomic.AtomicLong()

  /** How many of `predicate`'s conjuncts run a column at a time (tests). */
  def vectorized(predicate: Expression): Int = conjuncts(predicate).count(compile(_).isDefined)

  private def conjuncts(e: Expression): Seq[Expression] = e match {
    case And(l, r) => conjuncts(l) ++ conjuncts(r)
    case other => Seq(other)
  }

  /** One conjunct, run over a batch's selected rows (`selection` null: rows `0 until
   * count`), writing the rows it keeps to `out` (which may be `selection`: a row is written
   * no later than it is read); returns how many. */
  private[raptorx] abstract class Check(val column: Int) {
    def keep(batch: ColumnarBatch, selection: Array[Int], count: Int, out: Array[Int]): Int = {
      val v = batch.column(column)
      val nulls = v.hasNull
      var kept = 0
      var i = 0
      while (i < count) {
        val row = if (selection == null) i else selection(i)
        if (test(v, row, nulls)) {
          out(kept) = row
          kept += 1
        }
        i += 1
      }
      kept
    }
    def test(v: ColumnVector, row: Int, nulls: Boolean): Boolean
  }

  private final class NullCheck(at: Int, wanted: Boolean) extends Check(at) {
    def test(v: ColumnVector, row: Int, nulls: Boolean): Boolean =
      (nulls && v.isNullAt(row)) == wanted
  }

  /** A test of a column's values as longs. Over a dictionary-encoded vector each entry is
   * decoded and tested once (per dictionary, which changes with the row group), and a row
   * is its entry's answer. */
  private abstract class LongCheck(at: Int, values: ColumnLongs.Reader) extends Check(at) {
    def accepts(x: Long): Boolean
    private var dictionary: Dictionary = _
    private var answers = new Array[Byte](0) // per entry: 0 not yet, 1 kept, 2 not

    final def test(v: ColumnVector, row: Int, nulls: Boolean): Boolean =
      !(nulls && v.isNullAt(row)) && accepts(values.readerOf(v)(v, row))

    override def keep(batch: ColumnarBatch, selection: Array[Int], count: Int, out: Array[Int]): Int = {
      val w = batch.column(column) match {
        case w: WritableColumnVector if values.decode.isDefined && w.hasDictionary => w
        case _ => null
      }
      val dict = if (w == null) null else dictionaryOf(w).orNull
      if (dict == null) {
        // Rows read one by one, with the vector's read chosen once for the batch.
        val v = batch.column(column)
        val read = values.readerOf(v)
        val nulls = v.hasNull
        var kept = 0
        var i = 0
        while (i < count) {
          val row = if (selection == null) i else selection(i)
          if (!(nulls && v.isNullAt(row)) && accepts(read(v, row))) {
            out(kept) = row
            kept += 1
          }
          i += 1
        }
        kept
      } else {
        if (dict ne dictionary) {
          dictionary = dict
          answers = new Array[Byte](64)
        }
        val decode = values.decode.get
        DictionaryBatches.incrementAndGet()
        val ids = w.getDictionaryIds
        val nulls = w.hasNull
        var kept = 0
        var i = 0
        while (i < count) {
          val row = if (selection == null) i else selection(i)
          if (!(nulls && w.isNullAt(row))) {
            val id = ids.getInt(row)
            if (id >= answers.length) {
              answers = java.util.Arrays.copyOf(answers, math.max(id + 1, answers.length * 2))
            }
            var answer = answers(id)
            if (answer == 0) {
              answer = if (accepts(decode(dict, id))) 1 else 2
              answers(id) = answer
            }
            if (answer == 1) {
              out(kept) = row
              kept += 1
            }
          }
          i += 1
        }
        kept
      }
    }
  }

  /** `low <= value <= high` of a column read as longs (`Long.MinValue`/`MaxValue`: open). */
  private final class LongRange(at: Int, values: ColumnLongs.Reader, low: Long, high: Long)
      extends LongCheck(at, values) {
    def accepts(x: Long): Boolean = x >= low && x <= high
  }

  private final class LongSet(at: Int, values: ColumnLongs.Reader,
                              set: java.util.HashSet[java.lang.Long]) extends LongCheck(at, values) {
    def accepts(x: Long): Boolean = set.contains(x)
  }

  /** The dictionary Spark's reader left on `v` (a protected field: read by reflection, so
   * that a Spark without it only loses the shortcut). */
  private def dictionaryOf(v: WritableColumnVector): Option[Dictionary] =
    DictionaryField.flatMap(f => Option(f.get(v).asInstanceOf[Dictionary]))

  private val DictionaryField: Option[java.lang.reflect.Field] = scala.util.Try {
    val f = classOf[WritableColumnVector].getDeclaredField("dictionary")
    f.setAccessible(true)
    f
  }.toOption

  private final class Never(at: Int) extends Check(at) {
    def test(v: ColumnVector, row: Int, nulls: Boolean): Boolean = false
  }

  private final class StringCompare(at: Int, literal: UTF8String, op: Op)
      extends Check(at) {
    def test(v: ColumnVector, row: Int, nulls: Boolean): Boolean =
      !(nulls && v.isNullAt(row)) && op.holds(v.getUTF8String(row).binaryCompare(literal))
  }

  /** A comparison, by what it says of `compare(column, literal)`. */
  private sealed abstract class Op(val holds: Int => Boolean)
  private case object Eq extends Op(_ == 0)
  private case object Lt extends Op(_ < 0)
  private case object Le extends Op(_ <= 0)
  private case object Gt extends Op(_ > 0)
  private case object Ge extends Op(_ >= 0)

  private def opOf(e: Expression): Option[Op] = e match {
    case _: EqualTo => Some(Eq)
    case _: LessThan => Some(Lt)
    case _: LessThanOrEqual => Some(Le)
    case _: GreaterThan => Some(Gt)
    case _: GreaterThanOrEqual => Some(Ge)
    case _ => None
  }

  private final class StringSet(at: Int, values: java.util.HashSet[UTF8String])
      extends Check(at) {
    def test(v: ColumnVector, row: Int, nulls: Boolean): Boolean =
      !(nulls && v.isNullAt(row)) && values.contains(v.getUTF8String(row))
  }

  /** A column of `t` read as longs ([[raptorx.ColumnLongs]]; booleans are left to the
   * row predicate), or None. */
  private def longReader(t: DataType): Option[ColumnLongs.Reader] =
    if (t == BooleanType) None else ColumnLongs.of(t)

  /** A literal of a long-read column's comparison as an exact value at the column's scale
   * (its unscaled value as a `BigDecimal` that may have a fraction), or None. */
  private def exact(value: Any, t: DataType): Option[java.math.BigDecimal] = (value, t) match {
    case (d: Decimal, c: DecimalType) => Some(d.toJavaBigDecimal.movePointRight(c.scale))
    case (_: Decimal, _) => None
    case (_, _: DecimalType) => None
    case (x: Byte, _) => Some(java.math.BigDecimal.valueOf(x.toLong))
    case (x: Short, _) => Some(java.math.BigDecimal.valueOf(x.toLong))
    case (x: Int, _) => Some(java.math.BigDecimal.valueOf(x.toLong))
    case (x: Long, _) => Some(java.math.BigDecimal.valueOf(x))
    case _ => None
  }

  private val LongLow = java.math.BigDecimal.valueOf(Long.MinValue)
  private val LongHigh = java.math.BigDecimal.valueOf(Long.MaxValue)

  /** `x` rounded by `mode` to a long, clamped to the longs' range. */
  private def toLong(x: java.math.BigDecimal, mode: java.math.RoundingMode): Long = {
    val r = x.setScale(0, mode)
    if (r.compareTo(LongLow) < 0) Long.MinValue
    else if (r.compareTo(LongHigh) > 0) Long.MaxValue
    else r.longValueExact()
  }

  private def compile(e: Expression): Option[Check] = e match {
    case IsNull(BoundReference(i, _, _)) => Some(new NullCheck(i, true))
    case IsNotNull(BoundReference(i, _, _)) => Some(new NullCheck(i, false))
    case c: BinaryComparison if opOf(c).isDefined =>
      val op = opOf(c).get
      (c.left, c.right) match {
        case (BoundReference(i, StringType, _), Literal(s: UTF8String, StringType)) =>
          Some(new StringCompare(i, s, op))
        case (BoundReference(i, t, _), Literal(value, _)) if value != null =>
          for { read <- longReader(t); x <- exact(value, t) } yield {
            import java.math.RoundingMode.{CEILING, FLOOR}
            val whole = x.stripTrailingZeros().scale() <= 0
            op match {
              case Eq =>
                if (!whole || x.compareTo(LongLow) < 0 || x.compareTo(LongHigh) > 0) new Never(i)
                else new LongRange(i, read, x.longValueExact(), x.longValueExact())
              // v < x: v <= the largest long below x
              case Lt =>
                val ceil = x.setScale(0, CEILING)
                if (ceil.compareTo(LongLow) <= 0) new Never(i)
                else new LongRange(i, read, Long.MinValue, toLong(ceil, CEILING) - (if (ceil.compareTo(LongHigh) > 0) 0 else 1))
              case Le =>
                if (x.compareTo(LongLow) < 0) new Never(i)
                else new LongRange(i, read, Long.MinValue, toLong(x, FLOOR))
              case Gt =>
                val floor = x.setScale(0, FLOOR)
                if (floor.compareTo(LongHigh) >= 0) new Never(i)
                else new LongRange(i, read, toLong(floor, FLOOR) + (if (floor.compareTo(LongLow) < 0) 0 else 1), Long.MaxValue)
              case Ge =>
                if (x.compareTo(LongHigh) > 0) new Never(i)
                else new LongRange(i, read, toLong(x, CEILING), Long.MaxValue)
            }
          }
        case _ => None
      }
    case In(BoundReference(i, StringType, _), list)
        if list.forall { case Literal(s: UTF8String, StringType) => true; case _ => false } =>
      val set = new java.util.HashSet[UTF8String]()
      list.foreach { case Literal(s: UTF8String, _) => set.add(s); case _ => () }
      Some(new StringSet(i, set))
    case In(BoundReference(i, t, _), list) if list.forall(_.isInstanceOf[Literal]) =>
      longReader(t).flatMap { read =>
        val values = list.collect { case Literal(v, _) => if (v == null) None else exact(v, t) }
        if (values.exists(_.isEmpty)) None
        else {
          val set = new java.util.HashSet[java.lang.Long]()
          values.flatten.foreach { x =>
            // A value with a fraction at the column's scale, or out of the longs, is never
            // equal to the column's.
            if (x.stripTrailingZeros().scale() <= 0 && x.compareTo(LongLow) >= 0 &&
                x.compareTo(LongHigh) <= 0) set.add(x.longValueExact())
          }
          Some(new LongSet(i, read, set))
        }
      }
    case _ => None
  }
}
