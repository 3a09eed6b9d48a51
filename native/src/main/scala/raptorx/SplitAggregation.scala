package raptorx

import java.math.BigInteger

import scala.collection.mutable

import org.apache.spark.sql.execution.vectorized.{OnHeapColumnVector, WritableColumnVector}
import org.apache.spark.sql.types._
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.types.UTF8String

/**
 * A pushed partial aggregation ([[PartialAggregation]]) computed in the executor's JVM over
 * the batches Spark's Parquet reader returns for one split: the same contract as the Python
 * reader's (`raptorx_py/datasource/reading/aggregation.py`), so a split's partial rows are the same
 * whichever language computed them, and a fragment either stored serves both.
 *
 * Per split, after the pushed filters:
 *  - one row per group (null is a group), in no particular order; none for an empty split,
 *    except a global aggregation's one row (counts 0, the rest null: Spark merges partial
 *    counts with a `SUM`, which is null over no rows);
 *  - a `COUNT` is a bigint; a `SUM`, `MIN` or `MAX` has its input's type. A group whose exact
 *    sum does not fit that type is returned as several rows whose sums do and add up to it
 *    (the other aggregates of the extra rows null, their counts 0), so Spark's final `SUM`
 *    sees the same total and overflows as its own would;
 *  - arithmetic is Spark's ANSI arithmetic: exact, then rounded half away from zero to the
 *    node's decimal scale; a value that does not fit the node's type fails the split with
 *    [[AggregateOverflowException]], naming Spark's error condition, as Spark fails.
 *
 * Vectorized: each batch's input expressions are evaluated column at a time into arrays of
 * unscaled longs (a value past a long moves to a `BigInteger` of its own), and the groups
 * are found by a code per key column. Only a split's groups are kept, not its rows.
 *
 * Serializable: made on the driver, with the scan's reader, and shipped to the executors.
 */
final class SplitAggregation(
    val keys: IndexedSeq[(String, DataType)],
    val aggregates: IndexedSeq[SplitAggregation.Aggregate],
    val outputSchema: StructType) extends Serializable {
  import SplitAggregation._

  /** The partial rows of a split whose rows (after the filters) come as `batches` over
   * `schema`'s columns; None for no row (a grouped aggregation of an empty split). `count`
   * is told what the Python reader counts: `aggregation.splits`, `.rows_in`, `.groups_out`
   * and `.sums_split` (the extra rows of sums past their type). */
  def aggregate(batches: Iterator[ColumnarBatch], schema: StructType,
      count: (String, Long) => Unit): Option[ColumnarBatch] = {
    val state = new State(this, schema)
    batches.foreach(state.add)
    val out = state.result()
    count("aggregation.splits", 1L)
    count("aggregation.rows_in", state.rowsIn)
    count("aggregation.groups_out", out.map(_.numRows().toLong).getOrElse(0L))
    count("aggregation.sums_split", state.sumsSplit)
    out
  }

  /** What an empty split returns. */
  def emptyResult(): Option[ColumnarBatch] =
    if (keys.nonEmpty) None else new State(this, new StructType()).result()
}

object SplitAggregation {
  /** An input expression's node; `dataType` is Spark's type of the node. */
  sealed trait Input extends Serializable {
    def dataType: DataType
    def columns: Set[String]
  }
  final case class Column(name: String, dataType: DataType) extends Input {
    def columns: Set[String] = Set(name)
    override def toString: String = name
  }
  /** An integer or decimal literal: its unscaled value at the type's scale. */
  final case class Literal(unscaled: BigInteger, dataType: DataType) extends Input {
    def columns: Set[String] = Set.empty
    override def toString: String = new java.math.BigDecimal(unscaled, scaleOf(dataType)).toPlainString
  }
  /** A widening cast (between integers, integer to decimal, decimal to a wider decimal). */
  final case class Cast(child: Input, dataType: DataType) extends Input {
    def columns: Set[String] = child.columns
    override def toString: String = s"CAST($child AS ${dataType.simpleString})"
  }
  final case class Arithmetic(op: String, left: Input, right: Input, dataType: DataType)
      extends Input {
    def columns: Set[String] = left.columns ++ right.columns
    override def toString: String = s"($left $op $right)"
  }

  /** `fn`: sum, count, count_star, min or max; `dataType`: the partial value's type. */
  final case class Aggregate(fn: String, input: Option[Input], dataType: DataType)

  def scaleOf(t: DataType): Int = t match {
    case d: DecimalType => d.scale
    case _ => 0
  }

  private val Pow10: Array[Long] = Array.iterate(1L, 19)(_ * 10)

  /** The inclusive bound of a value of `t` (its unscaled magnitude), for range checks. */
  private def bound(t: DataType): Option[BigInteger] = t match {
    case ByteType => Some(BigInteger.valueOf(Byte.MaxValue))
    case ShortType => Some(BigInteger.valueOf(Short.MaxValue))
    case IntegerType => Some(BigInteger.valueOf(Int.MaxValue))
    case LongType => Some(BigInteger.valueOf(Long.MaxValue))
    case d: DecimalType => Some(BigInteger.TEN.pow(d.precision).subtract(BigInteger.ONE))
    case _ => None
  }
  private def lowest(t: DataType): BigInteger = t match {
    case ByteType => BigInteger.valueOf(Byte.MinValue)
    case ShortType => BigInteger.valueOf(Short.MinValue)
    case IntegerType => BigInteger.valueOf(Int.MinValue)
    case LongType => BigInteger.valueOf(Long.MinValue)
    case _ => bound(t).get.negate()
  }

  /** Values of one expression over one batch: unscaled longs at `scale`, a `BigInteger` in
   * `bigs` where one does not fit, and nulls. */
  private[raptorx] final class Num(val n: Int, val scale: Int) {
    val longs = new Array[Long](n)
    var bigs: Array[BigInteger] = _
    var nulls: Array[Boolean] = _
    def isNull(i: Int): Boolean = nulls != null && nulls(i)
    def setNull(i: Int): Unit = {
      if (nulls == null) nulls = new Array[Boolean](n)
      nulls(i) = true
    }
    def isBig(i: Int): Boolean = bigs != null && bigs(i) != null
    def big(i: Int): BigInteger = if (isBig(i)) bigs(i) else BigInteger.valueOf(longs(i))
    def set(i: Int, v: BigInteger): Unit =
      if (v.bitLength() < 64) {
        longs(i) = v.longValue()
        if (bigs != null) bigs(i) = null
      } else {
        if (bigs == null) bigs = new Array[BigInteger](n)
        bigs(i) = v
      }
  }

  /** The value's unscaled `x` at scale `from`, as `t` wants it at `t`'s scale: rounded half
   * away from zero, then checked against `t`'s range. */
  private def fit(x: BigInteger, from: Int, t: DataType, what: Input): BigInteger = {
    val to = scaleOf(t)
    val scaled =
      if (to == from) x
      else if (to > from) x.multiply(BigInteger.TEN.pow(to - from))
      else new java.math.BigDecimal(x, from).setScale(to, java.math.RoundingMode.HALF_UP)
        .unscaledValue()
    bound(t).foreach { top =>
      if (scaled.compareTo(top) > 0 || scaled.compareTo(lowest(t)) < 0) throw overflow(what, t)
    }
    scaled
  }

  private def overflow(what: Input, t: DataType): AggregateOverflowException = {
    val condition = if (t.isInstanceOf[DecimalType]) "NUMERIC_VALUE_OUT_OF_RANGE"
      else "ARITHMETIC_OVERFLOW"
    new AggregateOverflowException(s"[$condition] pushed aggregation: $what overflows " +
      s"${t.simpleString} (Spark's ANSI arithmetic fails the query so)")
  }

  /** `e`'s values over `batch` (`index`: its columns' positions in the batch). */
  private[raptorx] def evaluate(e: Input, batch: ColumnarBatch, index: Map[String, Int],
      memo: mutable.HashMap[Input, Num]): Num = memo.getOrElseUpdate(e, e match {
    case Column(name, t) => read(batch.column(index(name)), t, batch.numRows())
    case Literal(v, t) =>
      val out = new Num(batch.numRows(), scaleOf(t))
      var i = 0
      while (i < out.n) { out.set(i, v); i += 1 }
      out
    case c @ Cast(child, t) =>
      val in = evaluate(child, batch, index, memo)
      rescaled(in, scaleOf(t), t, c)
    case a @ Arithmetic(op, l, r, t) =>
      arithmetic(a, op, evaluate(l, batch, index, memo), evaluate(r, batch, index, memo), t)
  })

  /** A column's values: integers, decimals, dates (days), timestamps (microseconds) and
   * booleans (0, 1) as longs ([[ColumnLongs]]), decimals past 18 digits as `BigInteger`s. */
  private def read(v: ColumnVector, t: DataType, n: Int): Num = {
    val out = new Num(n, scaleOf(t))
    val nulls = v.hasNull
    val wide = t match {
      case d: DecimalType if d.precision > 18 => d
      case _ => null
    }
    val longs = if (wide == null) longReader(t).readerOf(v) else null
    var i = 0
    while (i < n) {
      if (nulls && v.isNullAt(i)) out.setNull(i)
      else if (wide != null) {
        out.set(i, v.getDecimal(i, wide.precision, wide.scale).toJavaBigDecimal.unscaledValue())
      } else out.longs(i) = longs(v, i)
      i += 1
    }
    out
  }

  private def longReader(t: DataType): ColumnLongs.Reader =
    ColumnLongs.of(t).getOrElse(
      throw new IllegalArgumentException(s"not a column of numbers: $t"))

  /** `in` at `scale` (not lower than its own: casts the provider pushes widen). */
  private def rescaled(in: Num, scale: Int, t: DataType, what: Input): Num = {
    val out = new Num(in.n, scale)
    out.nulls = in.nulls
    val k = scale - in.scale
    var i = 0
    while (i < in.n) {
      if (!in.isNull(i)) {
        if (k == 0 && !in.isBig(i)) out.longs(i) = in.longs(i)
        else if (k > 0 && k < 19 && !in.isBig(i) && in.longs(i) < Long.MaxValue / Pow10(k) &&
            in.longs(i) > -(Long.MaxValue / Pow10(k))) out.longs(i) = in.longs(i) * Pow10(k)
        else out.set(i, fit(in.big(i), in.scale, t, what))
      }
      i += 1
    }
    out
  }

  private def arithmetic(what: Input, op: String, l: Num, r: Num, t: DataType): Num = {
    val decimal = t.isInstanceOf[DecimalType]
    // The exact result's scale: the operands brought to one scale for + and -.
    val common = math.max(l.scale, r.scale)
    val exactScale = if (op == "*") l.scale + r.scale else common
    val a = if (op != "*" && l.scale != common) rescaled(l, common, DecimalType(38, common), what) else l
    val b = if (op != "*" && r.scale != common) rescaled(r, common, DecimalType(38, common), what) else r
    val scale = scaleOf(t)
    val out = new Num(l.n, scale)
    val drop = exactScale - scale // digits rounded away (decimals with precision loss)
    val top = t match {
      case ByteType => Byte.MaxValue.toLong
      case ShortType => Short.MaxValue.toLong
      case IntegerType => Int.MaxValue.toLong
      case d: DecimalType if d.precision <= 18 => Pow10(d.precision) - 1
      case _ => Long.MaxValue
    }
    var i = 0
    while (i < l.n) {
      if (a.isNull(i) || b.isNull(i)) out.setNull(i)
      else {
        var done = false
        if (!a.isBig(i) && !b.isBig(i) && drop >= 0 && drop < 19) {
          val x = a.longs(i)
          val y = b.longs(i)
          var exact = true
          var v = op match {
            case "+" => val r = x + y; exact = ((x ^ r) & (y ^ r)) >= 0; r
            case "-" => val r = x - y; exact = ((x ^ y) & (x ^ r)) >= 0; r
            case _ =>
              val hi = Math.multiplyHigh(x, y)
              val r = x * y
              exact = (hi == 0 && r >= 0) || (hi == -1 && r < 0)
              r
          }
          if (exact) {
            if (drop > 0) {
              val d = Pow10(drop)
              val q = v / d
              val rem = v % d
              v = if (math.abs(rem) * 2 >= d) q + (if (v < 0) -1 else 1) else q
            }
            if (v > top || v < -top - (if (decimal) 0 else 1)) throw overflow(what, t)
            out.longs(i) = v
            done = true
          } else if (!decimal) throw overflow(what, t) // past a bigint
        }
        if (!done) {
          val (x, y) = (a.big(i), b.big(i))
          val exact = op match {
            case "+" => x.add(y)
            case "-" => x.subtract(y)
            case _ => x.multiply(y)
          }
          out.set(i, fit(exact, exactScale, t, what))
        }
      }
      i += 1
    }
    out
  }

  private object NullKey

  /** The aggregation state of one split. */
  private final class State(agg: SplitAggregation, schema: StructType) {
    private val index: Map[String, Int] = schema.fieldNames.zipWithIndex.toMap
    private val k = agg.keys.length
    // Per key column: its distinct values (codes are positions) and their codes.
    private val keyValues = Array.fill(k)(mutable.ArrayBuffer.empty[AnyRef])
    private val keyCodes = Array.fill(k)(new java.util.HashMap[AnyRef, Integer]())
    // Per group: its key codes; groups found by their codes.
    private val groupKeys = mutable.ArrayBuffer.empty[Array[Int]]
    private val groupsByCodes = new java.util.HashMap[AnyRef, Integer]()
    private var groups = if (k == 0) 1 else 0
    if (k == 0) groupKeys += Array.emptyIntArray
    private var rows = 0L
    def rowsIn: Long = rows
    var sumsSplit = 0L
    private val accumulators: Array[Accumulator] = agg.aggregates.map(Accumulator.of).toArray
    accumulators.foreach(_.grow(groups))

    def add(batch: ColumnarBatch): Unit = {
      val n = batch.numRows()
      if (n == 0) return
      rows += n
      val gids = groupIds(batch, n)
      val memo = mutable.HashMap.empty[Input, Num]
      agg.aggregates.indices.foreach { j =>
        val a = agg.aggregates(j)
        val acc = accumulators(j)
        (a.fn, a.input) match {
          case (_, None) => acc.addCount(gids, n)
          // A count of a column needs its nulls only, whatever its type.
          case ("count", Some(Column(name, _))) =>
            acc.addNonNull(gids, batch.column(index(name)), n)
          case (_, Some(Column(name, StringType))) =>
            acc.addStrings(gids, batch.column(index(name)), n)
          case (_, Some(e)) => acc.addNums(gids, evaluate(e, batch, index, memo), n)
        }
      }
    }

    private def groupIds(batch: ColumnarBatch, n: Int): Array[Int] = {
      val gids = new Array[Int](n)
      if (k == 0) return gids
      val codes = agg.keys.indices.map { c =>
        keyCodesOf(c, batch.column(index(agg.keys(c)._1)), agg.keys(c)._2, n)
      }.toArray
      var i = 0
      while (i < n) {
        val found: AnyRef =
          if (k == 1) Integer.valueOf(codes(0)(i))
          else if (k == 2) java.lang.Long.valueOf((codes(0)(i).toLong << 32) | codes(1)(i))
          else codes.map(_(i)).toIndexedSeq
        val g = groupsByCodes.get(found)
        if (g != null) gids(i) = g
        else {
          groupsByCodes.put(found, groups)
          groupKeys += codes.map(_(i))
          gids(i) = groups
          groups += 1
          accumulators.foreach(_.grow(groups))
        }
        i += 1
      }
      gids
    }

    private def keyCodesOf(c: Int, v: ColumnVector, t: DataType, n: Int): Array[Int] = {
      val out = new Array[Int](n)
      val codes = keyCodes(c)
      val values = keyValues(c)
      val nulls = v.hasNull
      val longs = t match {
        case StringType | BinaryType | _: DecimalType => null
        case _ => longReader(t).readerOf(v)
      }
      var i = 0
      while (i < n) {
        val key: AnyRef = if (nulls && v.isNullAt(i)) NullKey else t match {
          case StringType => v.getUTF8String(i)
          case BinaryType => java.nio.ByteBuffer.wrap(v.getBinary(i))
          case d: DecimalType => v.getDecimal(i, d.precision, d.scale)
          case _ => java.lang.Long.valueOf(longs(v, i))
        }
        val code = codes.get(key)
        if (code != null) out(i) = code
        else {
          // A string's bytes may be the vector's, reused by its next batch: keep a copy.
          val kept = key match {
            case s: UTF8String => s.clone()
            case other => other
          }
          codes.put(kept, values.length)
          out(i) = values.length
          values += kept
        }
        i += 1
      }
      out
    }

    def result(): Option[ColumnarBatch] = {
      if (rows == 0) {
        if (k > 0) return None
        return Some(emptyGlobal())
      }
      // A sum out of its type's range: extra rows (group, aggregate, part).
      val extra = mutable.ArrayBuffer.empty[(Int, Int, BigInteger)]
      val sums = accumulators.zipWithIndex.map { case (acc, j) =>
        acc match {
          case s: SumAccumulator =>
            val t = agg.aggregates(j).dataType
            val (hi, lo) = (bound(t).get, lowest(t))
            (0 until groups).map { g =>
              var total = s.total(g)
              if (total != null) {
                while (total.compareTo(hi) > 0) { extra += ((g, j, hi)); total = total.subtract(hi) }
                while (total.compareTo(lo) < 0) { extra += ((g, j, lo)); total = total.subtract(lo) }
              }
              total
            }.toArray
          case _ => null
        }
      }
      sumsSplit = extra.length.toLong
      val total = groups + extra.length
      val vectors = agg.outputSchema.fields.map(f => new OnHeapColumnVector(total, f.dataType))
      for (g <- 0 until groups) {
        putKeys(vectors, g, g)
        accumulators.indices.foreach { j =>
          val v = vectors(k + j)
          if (sums(j) != null) putNumber(v, g, sums(j)(g), agg.aggregates(j).dataType)
          else accumulators(j).put(v, g, g)
        }
      }
      extra.zipWithIndex.foreach { case ((g, j, part), e) =>
        val row = groups + e
        putKeys(vectors, row, g)
        accumulators.indices.foreach { i =>
          val v = vectors(k + i)
          if (i == j) putNumber(v, row, part, agg.aggregates(i).dataType)
          else if (agg.aggregates(i).fn.startsWith("count")) v.putLong(row, 0L)
          else v.putNull(row)
        }
      }
      Some(new ColumnarBatch(vectors.toArray[ColumnVector], total))
    }

    private def emptyGlobal(): ColumnarBatch = {
      val vectors = agg.outputSchema.fields.map(f => new OnHeapColumnVector(1, f.dataType))
      agg.aggregates.indices.foreach { j =>
        if (agg.aggregates(j).fn.startsWith("count")) vectors(j).putLong(0, 0L)
        else vectors(j).putNull(0)
      }
      new ColumnarBatch(vectors.toArray[ColumnVector], 1)
    }

    private def putKeys(vectors: Array[OnHeapColumnVector], row: Int, g: Int): Unit = {
      var c = 0
      while (c < k) {
        val v = vectors(c)
        keyValues(c)(groupKeys(g)(c)) match {
          case NullKey => v.putNull(row)
          case s: UTF8String => v.putByteArray(row, s.getBytes)
          case b: java.nio.ByteBuffer =>
            val bytes = new Array[Byte](b.remaining())
            b.duplicate().get(bytes)
            v.putByteArray(row, bytes)
          case d: Decimal => putDecimal(v, row, d.toJavaBigDecimal.unscaledValue(), agg.keys(c)._2)
          case l: java.lang.Long => putLong(v, row, l.longValue(), agg.keys(c)._2)
          case other => throw new IllegalStateException(s"a key of $other")
        }
        c += 1
      }
    }
  }

  private def putNumber(v: WritableColumnVector, row: Int, x: BigInteger, t: DataType): Unit =
    if (x == null) v.putNull(row)
    else t match {
      case _: DecimalType => putDecimal(v, row, x, t)
      case _ => putLong(v, row, x.longValueExact(), t)
    }

  private def putDecimal(v: WritableColumnVector, row: Int, unscaled: BigInteger, t: DataType): Unit = {
    val d = t.asInstanceOf[DecimalType]
    v.putDecimal(row, Decimal(new java.math.BigDecimal(unscaled, d.scale), d.precision, d.scale),
      d.precision)
  }

  private def putLong(v: WritableColumnVector, row: Int, x: Long, t: DataType): Unit = t match {
    case ByteType => v.putByte(row, x.toByte)
    case ShortType => v.putShort(row, x.toShort)
    case IntegerType | DateType => v.putInt(row, x.toInt)
    case BooleanType => v.putBoolean(row, x != 0)
    case d: DecimalType => putDecimal(v, row, BigInteger.valueOf(x), d)
    case _ => v.putLong(row, x)
  }

  /** One aggregate's values per group. */
  private abstract class Accumulator {
    def grow(groups: Int): Unit
    def addCount(gids: Array[Int], n: Int): Unit = throw new IllegalStateException("no input")
    def addNums(gids: Array[Int], values: Num, n: Int): Unit
    def addStrings(gids: Array[Int], v: ColumnVector, n: Int): Unit =
      throw new IllegalStateException("not a string aggregate")
    def addNonNull(gids: Array[Int], v: ColumnVector, n: Int): Unit =
      throw new IllegalStateException("not a count")
    def put(v: WritableColumnVector, row: Int, g: Int): Unit
  }

  private object Accumulator {
    def of(a: Aggregate): Accumulator = a.fn match {
      case "count_star" | "count" => new CountAccumulator
      case "sum" => new SumAccumulator
      case "min" | "max" => a.dataType match {
        case StringType => new StringExtremeAccumulator(a.fn == "max")
        case t => new NumExtremeAccumulator(a.fn == "max", t)
      }
      case other => throw new IllegalArgumentException(s"unknown aggregate $other")
    }
  }

  private final class CountAccumulator extends Accumulator {
    private var counts = new Array[Long](16)
    def grow(groups: Int): Unit =
      if (groups > counts.length) counts = java.util.Arrays.copyOf(counts, groups * 2)
    override def addCount(gids: Array[Int], n: Int): Unit = {
      var i = 0
      while (i < n) { counts(gids(i)) += 1; i += 1 }
    }
    def addNums(gids: Array[Int], values: Num, n: Int): Unit = {
      var i = 0
      while (i < n) { if (!values.isNull(i)) counts(gids(i)) += 1; i += 1 }
    }
    override def addNonNull(gids: Array[Int], v: ColumnVector, n: Int): Unit = {
      if (!v.hasNull) addCount(gids, n)
      else {
        var i = 0
        while (i < n) { if (!v.isNullAt(i)) counts(gids(i)) += 1; i += 1 }
      }
    }
    def put(v: WritableColumnVector, row: Int, g: Int): Unit = v.putLong(row, counts(g))
  }

  /** A number per group: a long, or a `BigInteger` where it does not fit one; none until
   * the group's first value (`seen`). */
  private abstract class NumberPerGroup extends Accumulator {
    protected var longs = new Array[Long](16)
    protected var seen = new Array[Boolean](16)
    protected var bigs = new Array[BigInteger](16)
    def grow(groups: Int): Unit = if (groups > longs.length) {
      longs = java.util.Arrays.copyOf(longs, groups * 2)
      seen = java.util.Arrays.copyOf(seen, groups * 2)
      bigs = java.util.Arrays.copyOf(bigs, groups * 2)
    }
    /** Group `g`'s number, or null before its first value. */
    def total(g: Int): BigInteger =
      if (!seen(g)) null else if (bigs(g) != null) bigs(g) else BigInteger.valueOf(longs(g))
  }

  /** Exact sums: a long per group, a `BigInteger` once a group's sum passes a long. */
  private final class SumAccumulator extends NumberPerGroup {
    def addNums(gids: Array[Int], values: Num, n: Int): Unit = {
      var i = 0
      while (i < n) {
        if (!values.isNull(i)) {
          val g = gids(i)
          seen(g) = true
          if (bigs(g) == null && !values.isBig(i)) {
            val s = longs(g)
            val x = values.longs(i)
            val r = s + x
            // Overflow iff both operands have the sign opposite to the result's.
            if (((s ^ r) & (x ^ r)) < 0) bigs(g) = BigInteger.valueOf(s).add(BigInteger.valueOf(x))
            else longs(g) = r
          } else {
            val base = if (bigs(g) != null) bigs(g) else BigInteger.valueOf(longs(g))
            bigs(g) = base.add(values.big(i))
          }
        }
        i += 1
      }
    }
    def put(v: WritableColumnVector, row: Int, g: Int): Unit =
      throw new IllegalStateException("sums are put by their totals")
  }

  /** A minimum or maximum of numbers: a long per group, a `BigInteger` where the group's
   * value does not fit one. */
  private final class NumExtremeAccumulator(max: Boolean, t: DataType) extends NumberPerGroup {
    private def better(c: Int): Boolean = if (max) c > 0 else c < 0
    def addNums(gids: Array[Int], in: Num, n: Int): Unit = {
      var i = 0
      while (i < n) {
        if (!in.isNull(i)) {
          val g = gids(i)
          if (!seen(g)) {
            seen(g) = true
            if (in.isBig(i)) bigs(g) = in.bigs(i) else longs(g) = in.longs(i)
          } else if (bigs(g) == null && !in.isBig(i)) {
            if (better(java.lang.Long.compare(in.longs(i), longs(g)))) longs(g) = in.longs(i)
          } else {
            val cur = if (bigs(g) != null) bigs(g) else BigInteger.valueOf(longs(g))
            val x = in.big(i)
            if (better(x.compareTo(cur))) {
              if (x.bitLength() < 64) { bigs(g) = null; longs(g) = x.longValue() }
              else bigs(g) = x
            }
          }
        }
        i += 1
      }
    }
    def put(v: WritableColumnVector, row: Int, g: Int): Unit = putNumber(v, row, total(g), t)
  }

  private final class StringExtremeAccumulator(max: Boolean) extends Accumulator {
    private var values = new Array[UTF8String](16)
    def grow(groups: Int): Unit =
      if (groups > values.length) values = java.util.Arrays.copyOf(values, groups * 2)
    def addNums(gids: Array[Int], in: Num, n: Int): Unit =
      throw new IllegalStateException("not a numeric aggregate")
    override def addStrings(gids: Array[Int], v: ColumnVector, n: Int): Unit = {
      val nulls = v.hasNull
      var i = 0
      while (i < n) {
        if (!(nulls && v.isNullAt(i))) {
          val g = gids(i)
          val x = v.getUTF8String(i)
          val cur = values(g)
          if (cur == null || (if (max) x.compareTo(cur) > 0 else x.compareTo(cur) < 0)) {
            values(g) = x.clone() // the vector's bytes are reused by its next batch
          }
        }
        i += 1
      }
    }
    def put(v: WritableColumnVector, row: Int, g: Int): Unit =
      if (values(g) == null) v.putNull(row) else v.putByteArray(row, values(g).getBytes)
  }
}

/** A value of a pushed aggregation's input expression does not fit the type Spark gives it:
 * Spark fails such a query (its arithmetic is ANSI there), so the split fails too; the
 * message names Spark's error condition (the Python reader's `AggregateOverflowError`). */
final class AggregateOverflowException(message: String) extends ArithmeticException(message)
