package org.apache.spark.sql.execution.python.raptorx

import java.time.LocalDate

import scala.util.Try
import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import org.apache.spark.SparkContext
import org.apache.spark.paths.SparkPath
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{And, BoundReference, Contains, EndsWith, EqualNullSafe, EqualTo, Expression, GreaterThan, GreaterThanOrEqual, In, IsNotNull, IsNull, LessThan, LessThanOrEqual, Literal, Not, Or, StartsWith}
import org.apache.spark.sql.execution.datasources.{FileFormat, PartitionedFile}
import org.apache.spark.sql.execution.datasources.orc.OrcFileFormat
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.sources
import org.apache.spark.sql.types._
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.types.UTF8String

import raptorx.contract.PickledMarks
import raptorx.cache.{CachedFile, CachedFiles}
import raptorx.contract.JvmReadHandoff

/**
 * Splits read by Spark's own vectorized Parquet or ORC reader (`ParquetFileFormat`,
 * `OrcFileFormat`: the readers `spark.read.parquet` and `spark.read.orc` use) in the
 * executor's JVM, through the node's block cache ([[raptorx.cache.BlockCachingFileSystem]]);
 * the planning, the choice of splits and of the file versions stay raptorx_py's
 * ([[JvmReadHandoff]]). Both readers read a byte range as Spark cuts a file: Parquet's
 * row groups, ORC's stripes whose start lies in it.
 *
 * Made on the driver, once per scan ([[JvmFileRead.prepare]]): Spark's reader function
 * for the scan's columns (data columns, then the partition keys it reads, whose values the
 * reader appends as constants), with the filters the provider reported to Spark as
 * evaluated by the source handed to it for row-group pruning, and the same filters as one
 * Catalyst predicate, evaluated on the reader's batches a column at a time where it can
 * ([[VectorizedFilter]]): the source promised Spark
 * those rows are filtered, and Spark's reader filters only row groups. Rows that pass are
 * kept by a selection ([[SelectedColumnVector]]), not copied. Batches leave in the scan's
 * column order.
 *
 * A scan is not read here (`prepare` says why) when the reader cannot return batches for its
 * columns (nested types, more than `spark.sql.codegen.maxFields` columns, the vectorized
 * reader off), a filter or a partition key's type has no translation, or no file system
 * serves the table's scheme in this JVM (s3a's jars missing).
 */
final class JvmFileRead private (
    val formats: Seq[String],
    readerFunctions: Map[String, PartitionedFile => Iterator[InternalRow]],
    partitionTypes: IndexedSeq[(Int, DataType)],
    outputOrder: Array[Int],
    predicate: Option[Expression],
    readSchema: StructType,
    aggregation: Option[raptorx.SplitAggregation]) extends Serializable {

  /** The partition values of `split` as the reader wants them, or None when one does not
   * parse (the split is then Python's). */
  def partitionValues(split: JvmReadHandoff.SplitPlan): Option[InternalRow] = {
    val values = partitionTypes.map { case (keyIndex, dataType) =>
      if (keyIndex >= split.partitionValues.length) None
      else JvmFileRead.parseValue(split.partitionValues(keyIndex), dataType)
    }
    if (values.forall(_.isDefined)) Some(InternalRow.fromSeq(values.map(_.get))) else None
  }

  /** A per-task evaluator of the filters ([[VectorizedFilter]]). */
  def newFilter(): Option[VectorizedFilter] = predicate.map(VectorizedFilter(_))

  /** Whether the scan's splits are aggregated here ([[raptorx.SplitAggregation]]). */
  def aggregates: Boolean = aggregation.isDefined

  /** A partial aggregation's result for a task with no split: what an empty split gives. */
  def emptyResult(): Iterator[ColumnarBatch] =
    aggregation.flatMap(_.emptyResult()).iterator

  /** The batches of `split` (its rows that pass the filters, or, for an aggregated scan,
   * their partial aggregation, computed when the first batch is asked for), read through the
   * block cache described by `file` (registered for the read and forgotten when it ends). */
  def read(split: JvmReadHandoff.SplitPlan, values: InternalRow, file: CachedFile,
           rowFilter: Option[VectorizedFilter]): Iterator[ColumnarBatch] = {
    val rows = readRows(split, values, file, rowFilter)
    aggregation match {
      case None => rows
      case Some(agg) =>
        new Iterator[ColumnarBatch] {
          private lazy val result = {
            val out = agg.aggregate(rows, readSchema, file.counts.add)
            file.counts.add("aggregation.jvm_splits")
            out.iterator
          }
          override def hasNext: Boolean = result.hasNext
          override def next(): ColumnarBatch = result.next()
        }
    }
  }

  private def readRows(split: JvmReadHandoff.SplitPlan, values: InternalRow, file: CachedFile,
           rowFilter: Option[VectorizedFilter]): Iterator[ColumnarBatch] = {
    val path: Path = CachedFiles.register(file)
    val partitioned = PartitionedFile(values, SparkPath.fromPath(path), split.start, split.length,
      Array.empty[String], 0L, split.size, Map.empty)
    val batches = try {
      // Spark's readers return their batches typed as rows (the file formats' own cast).
      readerFunctions(split.format)(partitioned).asInstanceOf[Iterator[Any]].map(_.asInstanceOf[ColumnarBatch])
    } catch {
      case NonFatal(e) =>
        CachedFiles.forget(path)
        throw e
    }
    new Iterator[ColumnarBatch] {
      private var open = true
      override def hasNext: Boolean = open && {
        val more = batches.hasNext
        if (!more) {
          open = false
          CachedFiles.forget(path)
        }
        more
      }
      override def next(): ColumnarBatch = {
        val batch = batches.next()
        file.counts.add("reader.rows_read", batch.numRows().toLong)
        selected(batch, rowFilter)
      }
    }
  }

  private def selected(batch: ColumnarBatch, filter: Option[VectorizedFilter]): ColumnarBatch = {
    val n = batch.numRows()
    filter match {
      case None => reordered(batch, n, null)
      case Some(f) =>
        val (kept, selection) = f.select(batch)
        reordered(batch, kept, selection)
    }
  }

  private def reordered(batch: ColumnarBatch, rows: Int, selection: Array[Int]): ColumnarBatch = {
    val columns: Array[ColumnVector] = outputOrder.map { i =>
      if (selection == null) batch.column(i)
      else new SelectedColumnVector(batch.column(i), selection, rows)
    }
    new ColumnarBatch(columns, rows)
  }
}

object JvmFileRead {
  /** Spark's reader of files of `format` ([[JvmReadHandoff.Parquet]] or
   * [[JvmReadHandoff.Orc]]). */
  def fileFormat(format: String): FileFormat = format match {
    case JvmReadHandoff.Orc => new OrcFileFormat()
    case _ => new ParquetFileFormat()
  }

  /** The reader of a scan of files of `formats` (one reader function per format: a table's
   * partitions may mix them) whose output is `readSchema`, filtered by `filters`, over a
   * table partitioned by `partitionKeys` whose store takes `hadoop` settings; or why not. */
  def prepare(readSchema: StructType, filters: Seq[sources.Filter],
              partitionKeys: IndexedSeq[String], hadoop: Map[String, String],
              samplePath: String, aggregation: Option[raptorx.SplitAggregation] = None,
              formats: Seq[String] = Seq(JvmReadHandoff.Parquet),
              tableDataSchema: Option[StructType] = None)
      : Either[String, JvmFileRead] = {
    val session = SparkSession.getActiveSession.orElse(SparkSession.getDefaultSession)
    if (session.isEmpty) return Left("no active Spark session")
    val spark = session.get
    def keyIndex(name: String): Int = partitionKeys.indexWhere(_.equalsIgnoreCase(name))
    val (partitionFields, dataFields) = readSchema.fields.partition(f => keyIndex(f.name) >= 0)
    val unparsable = partitionFields.filterNot(f => parsable(f.dataType))
    if (unparsable.nonEmpty) {
      return Left(s"partition keys of types Spark's reader is not handed here: " +
        unparsable.map(f => s"${f.name} ${f.dataType.simpleString}").mkString(", "))
    }
    val dataSchema = StructType(dataFields)
    val partitionSchema = StructType(partitionFields)
    val readerSchema = StructType(dataFields ++ partitionFields)
    val unbatched = formats.find(f => !fileFormat(f).supportBatch(spark, readerSchema))
    if (unbatched.isDefined) {
      val format = unbatched.get
      val prefix = if (format == JvmReadHandoff.Orc) "spark.sql.orc" else "spark.sql.parquet"
      return Left(s"Spark's vectorized ${format.toLowerCase} reader does not return batches " +
        s"of these columns ($prefix.enableVectorizedReader false, nested types with " +
        s"$prefix.enableNestedColumnVectorizedReader false, or more than " +
        "spark.sql.codegen.maxFields columns)")
    }
    val predicate = filters.map(toExpression(_, readerSchema)) match {
      case Seq() => None
      case translated if translated.forall(_.isDefined) => Some(translated.flatten.reduce(And(_, _)))
      case translated =>
        return Left("filters without a translation: " +
          filters.zip(translated).collect { case (f, None) => f }.mkString(", "))
    }
    val hadoopConf = spark.sessionState.newHadoopConf()
    hadoop.foreach { case (k, v) => hadoopConf.set(k, v) }
    val scheme = Try(Option(new Path(samplePath).toUri.getScheme)).toOption.flatten.getOrElse("file")
    try org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, hadoopConf) catch {
      case NonFatal(e) =>
        return Left(s"no Hadoop file system for $scheme:// in this JVM ($e); for s3:// " +
          "tables put hadoop-aws and the AWS SDK on Spark's classpath")
    }
    CachedFiles.configure(hadoopConf)
    // ORC files of old Hive (columns `_col0`...) are read by position in the table's data
    // columns, which Spark's ORC reader is then given whole, as its own scans give it.
    val fullData = tableDataSchema.filter(t => dataFields.forall(f => t.fieldNames.contains(f.name)))
      .getOrElse(dataSchema)
    val functions = formats.distinct.map { format =>
      val whole = if (format == JvmReadHandoff.Orc) fullData else dataSchema
      format -> ReaderFunctions.get(
        ReaderFunctions.Key(spark.sparkContext, format, dataSchema, partitionSchema,
          ReaderFunctions.digest(filters), spark.sessionState.conf.getAllConfs,
          ReaderFunctions.digest(hadoopConf), whole)) {
        if (format == JvmReadHandoff.Orc) {
          // Spark's ORC reader with the JVM's tail and stripe caches in front of its reads.
          OrcSplitReader.build(spark, whole, dataSchema, partitionSchema, filters, hadoopConf)
        } else fileFormat(format).buildReaderWithPartitionValues(spark, dataSchema,
          partitionSchema, dataSchema, filters, Map(FileFormat.OPTION_RETURNING_BATCH -> "true"),
          hadoopConf)
      }
    }.toMap
    val order = readSchema.fields.map(f => readerSchema.fieldNames.indexOf(f.name))
    Right(new JvmFileRead(formats.distinct, functions,
      partitionFields.map(f => (keyIndex(f.name), f.dataType)).toIndexedSeq, order, predicate,
      readSchema, aggregation))
  }

  /**
   * Spark's reader functions already built, by everything one depends on (an LRU of
   * [[MaxKept]]). `buildReaderWithPartitionValues` broadcasts the scan's Hadoop
   * configuration (about 1,000 settings, serialized and compressed) on every call: the most
   * of a scan's preparation on the driver (JFR, 2026-11-27). The function is a closure over
   * its arguments only: the schemas and filters, the session's SQL settings when it is built
   * (`getAllConfs`: every setting given; the others are this JVM's defaults), and the Hadoop
   * configuration it broadcasts (its raw entries, as the broadcast writes them, by a
   * digest). The filters are keyed by their serialized form, so values equal by `==` but
   * not alike (`1` and `1L`, `0.0` and `-0.0`, arrays) are told apart. So an equal key
   * builds an equal function, and a repeated query's scans reuse
   * the broadcast instead of making another. The SparkContext is in the key (the broadcast
   * is its); a new context never meets an old entry.
   */
  private[raptorx] object ReaderFunctions {
    val MaxKept = 64
    final case class Key(context: SparkContext, format: String, dataSchema: StructType,
                         partitionSchema: StructType, filtersDigest: String,
                         sqlConf: Map[String, String], hadoopDigest: String,
                         tableDataSchema: StructType)

    private val kept = new java.util.LinkedHashMap[Key, PartitionedFile => Iterator[InternalRow]](
      16, 0.75f, true) {
      override def removeEldestEntry(
          eldest: java.util.Map.Entry[Key, PartitionedFile => Iterator[InternalRow]]): Boolean =
        size() > MaxKept
    }
    private val builtCount = new java.util.concurrent.atomic.AtomicLong()

    /** How many functions were built (not reused) since this JVM started (tests). */
    def built: Long = builtCount.get()

    def get(key: Key)(build: => PartitionedFile => Iterator[InternalRow])
        : PartitionedFile => Iterator[InternalRow] = {
      val hit = kept.synchronized(kept.get(key))
      if (hit != null && !key.context.isStopped) hit
      else {
        val function = build
        builtCount.incrementAndGet()
        kept.synchronized(kept.put(key, function))
        function
      }
    }

    /** A digest of `filters`' Java serialization (their classes and values, exactly). */
    def digest(filters: Seq[sources.Filter]): String = {
      val bytes = new java.io.ByteArrayOutputStream()
      val out = new java.io.ObjectOutputStream(bytes)
      out.writeObject(filters.toArray[AnyRef])
      out.close()
      java.util.HexFormat.of().formatHex(
        java.security.MessageDigest.getInstance("SHA-256").digest(bytes.toByteArray))
    }

    /** A digest of `conf`'s raw entries (what `Configuration.write` serializes), sorted. */
    def digest(conf: Configuration): String = {
      val entries = new java.util.TreeMap[String, String]()
      val it = conf.iterator()
      while (it.hasNext) {
        val e = it.next()
        entries.put(e.getKey, e.getValue)
      }
      val md = java.security.MessageDigest.getInstance("SHA-256")
      entries.forEach { (k, v) =>
        md.update(k.getBytes(java.nio.charset.StandardCharsets.UTF_8))
        md.update(0.toByte)
        md.update(String.valueOf(v).getBytes(java.nio.charset.StandardCharsets.UTF_8))
        md.update(0.toByte)
      }
      java.util.HexFormat.of().formatHex(md.digest())
    }
  }

  private def parsable(t: DataType): Boolean = t match {
    case ByteType | ShortType | IntegerType | LongType | StringType | DateType | BooleanType => true
    case _: DecimalType => true
    case _ => false
  }

  /** A partition value's canonical text (raptorx_py's `jvm_read_handoff.canonical_value`)
   * as Spark keeps a value of `t`: Some(null) for null, None when it does not parse. */
  def parseValue(text: String, t: DataType): Option[Any] = {
    if (text == null) return Some(null)
    Try[Any](t match {
      case ByteType => text.toByte
      case ShortType => text.toShort
      case IntegerType => text.toInt
      case LongType => text.toLong
      case BooleanType => text.toBoolean
      case DateType => LocalDate.parse(text).toEpochDay.toInt
      case StringType => UTF8String.fromBytes(PickledMarks.unhexBytes(text).get)
      case d: DecimalType =>
        val value = Decimal(new java.math.BigDecimal(text))
        val exact = value.toBigDecimal
        if (!value.changePrecision(d.precision, d.scale) || value.toBigDecimal != exact) {
          throw new ArithmeticException(s"$text is not a $d")
        }
        value
      case other => throw new IllegalArgumentException(s"no parse for $other")
    }).toOption
  }

  /** `f` as a Catalyst predicate over `schema`'s columns (bound by position), or None. */
  def toExpression(f: sources.Filter, schema: StructType): Option[Expression] = {
    def column(name: String): Option[BoundReference] = {
      val exact = schema.fieldNames.indexOf(name)
      val i = if (exact >= 0) exact else {
        val folded = schema.fieldNames.zipWithIndex.filter(_._1.equalsIgnoreCase(name))
        if (folded.length == 1) folded.head._2 else -1
      }
      if (i < 0) None else Some(BoundReference(i, schema(i).dataType, schema(i).nullable))
    }
    def both(name: String, v: Any)(make: (Expression, Expression) => Expression): Option[Expression] =
      for { c <- column(name); l <- literal(c.dataType, v) } yield make(c, l)
    f match {
      case sources.EqualTo(a, v) => both(a, v)(EqualTo(_, _))
      case sources.EqualNullSafe(a, null) => column(a).map(IsNull(_))
      case sources.EqualNullSafe(a, v) => both(a, v)(EqualNullSafe(_, _))
      case sources.GreaterThan(a, v) => both(a, v)(GreaterThan(_, _))
      case sources.GreaterThanOrEqual(a, v) => both(a, v)(GreaterThanOrEqual(_, _))
      case sources.LessThan(a, v) => both(a, v)(LessThan(_, _))
      case sources.LessThanOrEqual(a, v) => both(a, v)(LessThanOrEqual(_, _))
      case sources.In(a, vs) =>
        column(a).flatMap { c =>
          val ls = vs.toSeq.map(literal(c.dataType, _))
          if (ls.forall(_.isDefined)) Some(In(c, ls.flatten)) else None
        }
      case sources.IsNull(a) => column(a).map(IsNull(_))
      case sources.IsNotNull(a) => column(a).map(IsNotNull(_))
      case sources.StringStartsWith(a, v) => both(a, v)(StartsWith(_, _))
      case sources.StringEndsWith(a, v) => both(a, v)(EndsWith(_, _))
      case sources.StringContains(a, v) => both(a, v)(Contains(_, _))
      case sources.Not(child) => toExpression(child, schema).map(Not(_))
      case sources.And(l, r) =>
        for { a <- toExpression(l, schema); b <- toExpression(r, schema) } yield And(a, b)
      case sources.Or(l, r) =>
        for { a <- toExpression(l, schema); b <- toExpression(r, schema) } yield Or(a, b)
      case _ => None
    }
  }

  /** A filter's value as a literal comparable with a column of `t`, exactly: an integer of
   * another width is widened or refused, a decimal keeps its own precision and scale
   * (Spark compares decimals by value). */
  def literal(t: DataType, v: Any): Option[Literal] = {
    if (v == null) return None
    (t, v) match {
      case (_: DecimalType, b: java.math.BigDecimal) =>
        val d = Decimal(b)
        Some(Literal(d, DecimalType(math.max(d.precision, d.scale), d.scale)))
      case (_: DecimalType, b: scala.math.BigDecimal) => literal(t, b.bigDecimal)
      case (ByteType | ShortType | IntegerType | LongType, n: java.lang.Number)
          if n.isInstanceOf[java.lang.Byte] || n.isInstanceOf[java.lang.Short] ||
            n.isInstanceOf[java.lang.Integer] || n.isInstanceOf[java.lang.Long] =>
        val x = n.longValue()
        t match {
          case ByteType if x.isValidByte => Some(Literal(x.toByte, ByteType))
          case ShortType if x.isValidShort => Some(Literal(x.toShort, ShortType))
          case IntegerType if x.isValidInt => Some(Literal(x.toInt, IntegerType))
          case LongType => Some(Literal(x, LongType))
          case _ => None
        }
      case (StringType, s: String) => Some(Literal(UTF8String.fromString(s), StringType))
      case _ => Try(Literal.create(v, t)).toOption
    }
  }
}
