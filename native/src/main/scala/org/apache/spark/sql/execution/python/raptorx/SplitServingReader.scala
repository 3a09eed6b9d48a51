package org.apache.spark.sql.execution.python.raptorx

import java.io.ByteArrayInputStream
import java.nio.file.{Files, Path}
import java.nio.file.attribute.FileTime

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.arrow.compression.CommonsCompressionFactory
import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.ipc.ArrowStreamReader

import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.{PartitionReader, PartitionReaderFactory}
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.ArrowUtils
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnVector, ColumnarBatch}

import raptorx.cache.{CachedFile, TaskCounts}
import raptorx.contract.{FragmentEntry, FragmentHandoff, JvmReadHandoff}

/**
 * The columnar reader of a task whose partition carries a fragment hand-off
 * ([[FragmentHits]]), a JVM read hand-off ([[JvmReadHandoff]]) or both. Split by split, in
 * the task's order:
 *  1. the split's fragment result cache entry on this node, verified, as Arrow batches;
 *  2. else, when the planner chose the JVM for it, Spark's own Parquet or ORC reader through
 *     the node's block cache ([[JvmFileRead]]); when the planner marked the split `store`
 *     (its fragment key was planned before), the batches handed on are also copied into
 *     the split's fragment entry ([[FragmentEntryWriter]]), published once the split was
 *     read whole ([[FragmentStores]]): a split Spark stops reading early stores nothing;
 *  3. else the split is left to the Python reader, which runs once, after the others, with
 *     the splits served here stamped (`J` in both marks' flags), and computes only the rest.
 * A task whose splits are all served here starts no Python worker.
 *
 * A split Spark's reader fails on before its first batch (a file whose types it does not
 * convert, which the Python reader may) is left to Python too (`reader.spark_fallbacks`);
 * a failure after batches were handed on fails the task, as Spark's own scan would. A file
 * that changed after planning (the block cache's identity check, or the store's "not
 * found"), before the split's first batch or after, fails the task here with
 * [[raptorx.cache.FileChangedException]] worded as the Python reader's `FileChangedError`:
 * the file, what changed and the plan's advice for its partition (`changedAdvice`),
 * counted in `reader.files_changed` (and `reader.spark_files_changed`); no Python worker is
 * needed to say so. An ORC split is never left to Python, which reads Parquet only: its
 * failures fail the task, a file that does not read as ORC naming the file ("Corrupt or
 * truncated ORC file").
 *
 * Counts: the tiers' counters (`block_cache.*`, `storage.*`, `fragment_cache.*`) as the
 * Python reader names them (a store the JVM made counts `fragment_cache.stores` and
 * `.jvm_stores`; one it could not make `.too_large`, `.jvm_store_deferred` or `.errors`),
 * plus `reader.spark_splits` / `reader.python_splits` (which
 * reader read each split) and `reader.spark_fallbacks`; appended to the metrics directory
 * and shown as the scan's task metrics ([[ScanReport]]).
 */
class SplitServingReader(
    factory: PartitionReaderFactory,
    partition: PythonInputPartition,
    fragments: Option[FragmentHandoff.Handoff],
    jvm: Option[(JvmReadHandoff.Plan, JvmFileRead)],
    fillCaches: Boolean) extends PartitionReader[ColumnarBatch] {
  import raptorx.NativeCompatibility.ReaderFactory

  private val schema = ReaderFactory.outputSchema.get[StructType](factory)
  private val types = schema.fields.map(_.dataType)
  private val counts = mutable.LinkedHashMap.empty[String, Long].withDefaultValue(0L)
  private val splitCounts = new TaskCounts()
  private val splits: Int =
    fragments.map(_.keys.length).orElse(jvm.map(_._1.splits.length)).getOrElse(0)
  private val served = mutable.BitSet.empty
  private var allocated = false
  private lazy val allocator: BufferAllocator = {
    allocated = true
    ArrowUtils.rootAllocator.newChildAllocator("raptorx fragment hits", 0, Long.MaxValue)
  }
  private val fragmentDir: Option[Path] = fragments.flatMap { h =>
    try Some(FragmentHits.resolve(h.cacheDir)) catch { case NonFatal(_) => None }
  }
  private val fragmentSecret: Option[Array[Byte]] = fragmentDir.flatMap(FragmentHits.secret)
  if (fragments.isDefined && fragmentSecret.isEmpty) counts("fragment_cache.jvm_unavailable") += 1
  private lazy val filter: Option[VectorizedFilter] = jvm.flatMap(_._2.newFilter())
  private val metricsDir: String =
    fragments.map(_.metricsDir).orElse(jvm.map(_._1.metricsDir)).getOrElse("")
  private val storePlan: Option[JvmReadHandoff.FragmentCache] = jvm.flatMap(_._1.fragments)
  /** The secret entries are stored with (created when no process made it yet). */
  private lazy val storeSecret: Option[Array[Byte]] = for {
    d <- fragmentDir
    p <- storePlan
    s <- try Some(raptorx.cache.BlockFiles.secret(d, p.groupShared)) catch {
      case NonFatal(_) =>
        counts("fragment_cache.errors") += 1
        None
    }
  } yield s
  /** What the names files not yet folded into the Python index list, when this task
   * first stores; the task's own stores are added to it. */
  private lazy val pendingAtStart: Long =
    fragmentDir.map(FragmentStores.pendingBytes).getOrElse(0L)
  private val stored = mutable.ArrayBuffer.empty[(String, Long)]
  private var storing: StoringBatches = _

  private var nextSplit = 0
  private var emptyServed = false
  private var entry: ArrowStreamReader = _
  private var sparkBatches: Iterator[ColumnarBatch] = _
  private var python: ArrowColumnarReader = _
  private var current: ColumnarBatch = _

  override def next(): Boolean = {
    while (true) {
      if (entry != null) {
        if (entry.loadNextBatch()) {
          current = batchOf(entry)
          counts("reader.rows_to_spark") += current.numRows()
          return true
        }
        entry.close()
        entry = null
      } else if (sparkBatches != null) {
        if (changedMidSplit(sparkBatches.hasNext)) {
          current = sparkBatches.next()
          counts("reader.rows_to_spark") += current.numRows()
          return true
        }
        sparkBatches = null
      } else if (nextSplit < splits) {
        val i = nextSplit
        nextSplit += 1
        entry = openFragment(i)
        if (entry == null) sparkBatches = openSpark(i)
      } else if (splits == 0 && !emptyServed && jvm.exists(_._2.aggregates)) {
        // A task with no split (planning found none): an aggregation's result of no rows.
        emptyServed = true
        sparkBatches = jvm.get._2.emptyResult()
      } else if (served.size == splits) {
        return false
      } else {
        if (python == null) python = pythonReader()
        if (!python.next()) return false
        current = python.get()
        return true
      }
    }
    false
  }

  /** `more`; a file that changed after batches of it were handed on fails the task with
   * the documented error ([[changedError]]). */
  private def changedMidSplit(more: => Boolean): Boolean =
    try more catch {
      case e: Throwable if reading != null && SplitServingReader.changedFile(e) =>
        throw changedError(reading._1, reading._2, e)
    }

  /** The plan and split Spark's reader is reading (null before the first). */
  private var reading: (JvmReadHandoff.Plan, JvmReadHandoff.SplitPlan) = _

  /** The error of `split`, whose file changed after `plan` listed it (`cause`): what
   * changed, then the plan's advice for its partition, as the Python reader words its
   * `FileChangedError` (`error_report` shows it by that name); counted. */
  private def changedError(plan: JvmReadHandoff.Plan, split: JvmReadHandoff.SplitPlan,
                           cause: Throwable): raptorx.cache.FileChangedException = {
    counts("reader.files_changed") += 1
    counts("reader.spark_files_changed") += 1
    val url = JvmReadHandoff.userUrl(split.path)
    // The block cache's own exception is replaced, not chained: a task failure's text ends
    // with its causes, and the error hook shows the last of ours it finds.
    val (what, under) = SplitServingReader.changeOf(cause) match {
      case Some(c: raptorx.cache.FileChangedException) =>
        (c.getMessage.replace(split.path, url), c.getCause)
      case Some(c) if c.getClass.getName == SplitServingReader.RemoteFileChanged =>
        (s"$url is another version than the one listed (the store refused a read of the " +
          s"listed ETag); the file changed after it was listed (${c.getMessage})", cause)
      case other => (s"$url was listed but the store no longer has it; the file changed " +
        s"after it was listed (${other.getOrElse(cause).getMessage})", cause)
    }
    new raptorx.cache.FileChangedException(s"$what. ${plan.adviceFor(split)}", under)
  }

  private def pythonReader(): ArrowColumnarReader = {
    var bytes = partition.pickedPartition
    fragments.foreach(h => bytes = FragmentHandoff.stamp(bytes, h, served))
    // Stamping keeps each mark's length, so the other mark's flags stay where they were.
    jvm.foreach { case (plan, _) => bytes = JvmReadHandoff.stamp(bytes, plan, served) }
    new ArrowColumnarReader(factory, PythonInputPartition(partition.index, bytes))
  }

  /** Split `i`'s verified fragment entry, or null. */
  private def openFragment(i: Int): ArrowStreamReader = {
    val (h, d, s) = (fragments, fragmentDir, fragmentSecret) match {
      case (Some(h), Some(d), Some(s)) => (h, d, s)
      case _ => return null
    }
    val key = h.keys(i)
    if (key == FragmentHandoff.NoKey) return null // nothing to look up: not counted as a miss
    try {
      FragmentHits.verified(d, s, key, System.currentTimeMillis()) match {
        case None =>
          counts("fragment_cache.jvm_misses") += 1
          null
        case Some(data) =>
          val reader = new ArrowStreamReader(new ByteArrayInputStream(
            data, FragmentEntry.HeaderBytes, data.length - FragmentEntry.HeaderBytes), allocator,
            CommonsCompressionFactory.INSTANCE)
          if (!FragmentHits.sameTypes(reader.getVectorSchemaRoot.getSchema, schema)) {
            reader.close()
            counts("fragment_cache.jvm_schema_mismatch") += 1
            return null
          }
          served += i
          counts("fragment_cache.hits") += 1
          counts("fragment_cache.jvm_hits") += 1
          counts("fragment_cache.bytes_read") += data.length
          InputBytes.add(data.length.toLong)
          counts("reader.splits_read") += 1
          try Files.setLastModifiedTime(FragmentEntry.path(d, key),
            FileTime.fromMillis(System.currentTimeMillis()))
          catch { case NonFatal(_) => counts("fragment_cache.touch_failed") += 1 }
          reader
      }
    } catch {
      case NonFatal(_) =>
        counts("fragment_cache.jvm_errors") += 1
        null
    }
  }

  /** Split `i`'s batches from Spark's reader, or null (Python reads it). */
  private def openSpark(i: Int): Iterator[ColumnarBatch] = {
    val chosen = jvm.flatMap { case (plan, read) => plan.splits(i).map(s => (plan, read, s)) }
    if (chosen.isEmpty) return null
    val (plan, read, split) = chosen.get
    // The Python reader reads Parquet only: an ORC split's failures are the task's.
    val orc = split.format == JvmReadHandoff.Orc
    val parsed = read.partitionValues(split)
    if (parsed.isEmpty) {
      if (orc) throw new IllegalStateException(s"tiered_hive: the partition values of " +
        s"${split.path} (${split.partitionValues.mkString(", ")}) do not parse as its keys' types")
      counts("reader.spark_refused") += 1
      return null
    }
    val values = parsed.get
    // Versions the JVM compares (an ETag, a local file's stat); an mtime alone is not cached,
    // in the block cache, the ORC tail and stripe caches or the file handle cache.
    val comparable = split.version != null &&
      (split.version.startsWith("etag:") || split.version.startsWith("posix:"))
    val cache = plan.cache.filter(_ => fillCaches && split.key != null && comparable)
    val file = CachedFile(split.path, split.size, split.version, split.etag,
      cache.map(_ => split.key).orNull,
      cache.map(c => FragmentHits.resolve(c.baseDir).resolve("blocks")).orNull,
      plan.cache.map(_.blockSize).getOrElse(1 << 20), plan.cache.exists(_.groupShared),
      fill = fillCaches, splitCounts, plan.cache.map(_.maxBytes).getOrElse(0L),
      plan.orcTails.filter(_ => orc && fillCaches && comparable)
        .map(t => raptorx.cache.OrcTailCache.shared(t.maxBytes, t.ttlMillis)).orNull,
      plan.fileHandles.filter(_ => comparable)
        .map(h => raptorx.cache.FileHandles.shared(h.maxIdle, h.ttlMillis)).orNull,
      plan.orcStripes.filter(_ => orc && fillCaches && comparable)
        .map(c => raptorx.cache.OrcStripeCache.shared(c.footerBytes, c.footerTtlMillis,
          c.streamBytes, c.streamTtlMillis)).orNull)
    reading = (plan, split)
    val batches = try {
      val it = read.read(split, values, file, if (split.filtered) filter else None)
      it.hasNext // the first batch: a file Spark's reader cannot convert fails here
      it.buffered
    } catch {
      case e: raptorx.AggregateOverflowException => throw e // Spark's own answer: the query fails
      case e: Throwable if SplitServingReader.changedFile(e) =>
        // Changed after planning: the Python reader would fail the same way (what the caches
        // lack must come from the store, which holds another version now).
        throw changedError(plan, split, e)
      case NonFatal(e) if orc =>
        // ORC's schema evolution, or Spark's conversion, refusing the table's types.
        val wrongTypes = SplitServingReader.causes(e).exists { c =>
          c.getClass.getName.endsWith("IllegalEvolutionException") ||
            Option(c.getMessage).exists(_.contains("ORC_TYPE_CAST"))
        }
        val what = if (wrongTypes) "ORC file holding other types than its table's" else
          "Corrupt or truncated ORC file"
        throw new java.io.IOException(
          s"$what ${split.path}: Spark's ORC reader failed: $e", e)
      case NonFatal(e) =>
        counts("reader.spark_fallbacks") += 1
        SplitServingReader.log(s"Spark's reader failed on ${split.path}; the Python reader " +
          s"reads it: $e")
        return null
    }
    served += i
    // The fragment looked up above missed, and Python, which counts a miss it computes, will
    // not see this split.
    if (fragments.exists(h => h.keys(i) != FragmentHandoff.NoKey)) {
      counts("fragment_cache.misses") += 1
      counts("reader.fragments_computed") += 1 // as the Python reader counts a missed split
    }
    counts("reader.splits_read") += 1
    counts("reader.spark_splits") += 1
    counts("reader.files_opened") += 1
    if (split.store && fillCaches) entryWriter(i) match {
      case Some((key, writer)) =>
        storing = new StoringBatches(key, batches, writer)
        storing
      case None => batches
    } else batches
  }

  /** A writer for split `i`'s fragment entry and its key, or None (no key, no cache
   * directory or secret, or the unfolded stores already past the cache's bound). */
  private def entryWriter(i: Int): Option[(String, FragmentEntryWriter)] = for {
    h <- fragments
    key = h.keys(i) if key != FragmentHandoff.NoKey
    plan <- storePlan
    _ <- storeSecret
    d <- fragmentDir
    if {
      // Within the bound by the Python index's accounting, else by the entries on disk
      // (the JVM making room itself where no Python store folds what it stored).
      val room = raptorx.cache.DirectoryRoom.fits(d, d.resolve(FragmentEntry.EntriesDir),
        plan.maxBytes, 1L, pendingAtStart + stored.map(_._2).sum < plan.maxBytes) { made =>
        counts("fragment_cache.jvm_room_made") += 1
        counts("fragment_cache.jvm_evicted") += made.evicted
      }
      if (!room) counts("fragment_cache.jvm_store_deferred") += 1
      room
    }
    writer <- try Some(new FragmentEntryWriter(schema, plan.maxEntryBytes)) catch {
      case NonFatal(e) =>
        counts("fragment_cache.errors") += 1
        SplitServingReader.log(s"cannot store the fragment of a split read by Spark's reader: $e")
        None
    }
  } yield (key, writer)

  /** `batches`, handed on as they come, each also added to `writer`; when they end, the
   * entry is published under `key`. A fault of the cache stores nothing, never fails the
   * read. */
  private final class StoringBatches(key: String, batches: Iterator[ColumnarBatch],
                                     writer: FragmentEntryWriter) extends Iterator[ColumnarBatch] {
    private var live = true

    override def hasNext: Boolean = {
      val more = batches.hasNext
      if (!more && live) publish()
      more
    }

    override def next(): ColumnarBatch = {
      val batch = batches.next()
      if (live) {
        val kept = try writer.add(batch) catch { case NonFatal(e) => failed(e); true }
        if (!kept) {
          counts("fragment_cache.too_large") += 1
          drop()
        }
      }
      batch
    }

    def drop(): Unit = if (live) {
      live = false
      writer.close()
    }

    private def failed(e: Throwable): Unit = {
      counts("fragment_cache.errors") += 1
      SplitServingReader.log(s"storing the fragment $key failed; nothing stored: $e")
      drop()
    }

    private def publish(): Unit = {
      try writer.finish() match {
        case None => counts("fragment_cache.too_large") += 1
        case Some((bytes, length)) =>
          val (dir, plan, secret) = (fragmentDir.get, storePlan.get, storeSecret.get)
          val expires = if (plan.ttlMillis > 0) System.currentTimeMillis() + plan.ttlMillis else 0L
          val size = FragmentStores.publish(dir, secret, key, bytes, length, expires,
            plan.groupShared)
          stored += ((key, size))
          raptorx.cache.DirectoryRoom.published(dir, size)
          counts("fragment_cache.stores") += 1
          counts("fragment_cache.jvm_stores") += 1
          counts("fragment_cache.bytes_stored") += length
      } catch { case NonFatal(e) => failed(e) }
      drop()
    }
  }

  private def batchOf(reader: ArrowStreamReader): ColumnarBatch = {
    val root = reader.getVectorSchemaRoot
    val vectors = root.getFieldVectors.asScala
    val columns: Array[ColumnVector] = types.indices.map { i =>
      ArrowColumnarReader.column(new ArrowColumnVector(vectors(i)), types(i))
    }.toArray
    new ColumnarBatch(columns, root.getRowCount)
  }

  override def get(): ColumnarBatch = current

  /** Every count of the task so far: this reader's and its block reads'. */
  private def allCounts: collection.Map[String, Long] = {
    val merged = mutable.LinkedHashMap.empty[String, Long] ++ counts
    splitCounts.snapshot().foreach { case (k, v) => merged(k) = merged.getOrElse(k, 0L) + v }
    merged
  }

  override def close(): Unit = {
    try {
      if (storing != null) storing.drop()
      publishNames()
      if (entry != null) entry.close()
      if (python != null) python.close()
      if (allocated) allocator.close()
    } finally {
      entry = null
      val blocks = splitCounts.snapshot()
      val bytes = blocks.getOrElse("block_cache.bytes_from_cache", 0L) +
        blocks.getOrElse("storage.remote_bytes", 0L)
      InputBytes.add(bytes)
      counts("reader.bytes_read") += bytes
      // Served whole here: the Python reader, which counts where a task ran, never started.
      if (python == null) {
        Affinity.placementCounts(partition.pickedPartition).foreach(counts(_) += 1)
      }
      // The block files' own counts (`jvm_blocks.*`: verified, corrupt, published ...) are
      // the JVM's, not the task's: what accrued since the last drain goes with this task's.
      val blockFiles = raptorx.cache.BlockCounts.drain().asScala.map { case (k, v) => k -> v.longValue }
      FragmentHits.appendCounts(metricsDir, allCounts ++ blockFiles)
    }
  }

  /** The names file of the entries this task stored, for the Python index to fold in. */
  private def publishNames(): Unit = if (stored.nonEmpty) {
    try FragmentStores.adopt(fragmentDir.get, stored.toSeq, storePlan.exists(_.groupShared))
    catch {
      case NonFatal(e) =>
        counts("fragment_cache.errors") += 1
        SplitServingReader.log(s"the fragment entries this task stored are not indexed: $e")
    }
    stored.clear()
  }

  /** The tiers' task metrics (the JVM's counts and, when it ran, the Python reader's) and
   * pyspark's Python runner metrics when the Python reader ran. */
  override def currentMetricsValues(): Array[CustomTaskMetric] =
    if (python == null) ScanReport.taskValues(allCounts)
    else python.pythonMetricValues ++
      ScanReport.taskValues(ScanReport.merged(allCounts, python.taskCounts))
}

object SplitServingReader extends org.apache.spark.internal.Logging {
  def log(message: String): Unit = logWarning(message)

  /** Whether `e` says a planned file changed: the block cache's check of its identity, the
   * store's "not found" for the file the plan listed (a local file's fetch finds it before
   * any check), or s3a's refusal of a ranged GET whose `If-Match` ETag is no longer the
   * object's (HTTP 412), among its causes. */
  def changedFile(e: Throwable): Boolean = changeOf(e).isDefined

  /** The cause of `e` that says a planned file changed ([[changedFile]]), if any. */
  def changeOf(e: Throwable): Option[Throwable] =
    causes(e).find {
      case _: raptorx.cache.FileChangedException | _: java.io.FileNotFoundException => true
      case e => e.getClass.getName == RemoteFileChanged
    }

  /** `e` and its causes, outermost first (at most 16: a cycle ends there). */
  def causes(e: Throwable): Iterator[Throwable] =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(16)

  /** hadoop-aws's exception for a 412 (not on the compile-time class path). */
  val RemoteFileChanged = "org.apache.hadoop.fs.s3a.RemoteFileChangedException"
}
