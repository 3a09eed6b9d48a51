package org.apache.spark.sql.execution.python.raptorx

import java.io.ByteArrayOutputStream
import java.nio.ByteBuffer
import java.nio.channels.Channels
import java.nio.charset.StandardCharsets.US_ASCII
import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.arrow.compression.CommonsCompressionFactory
import org.apache.arrow.vector.compression.CompressionUtil
import org.apache.arrow.vector.ipc.ArrowStreamWriter
import org.apache.arrow.vector.ipc.message.IpcOption

import org.apache.spark.sql.execution.arrow.ArrowWriter
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.vectorized.ColumnarBatch

import raptorx.contract.{CacheFiles, FragmentEntry, PickledMarks}
import raptorx.cache.BlockFiles

/**
 * One fragment result cache entry being built by the JVM from the batches Spark's reader
 * hands on for a split ([[SplitServingReader]]): their rows, as Spark receives them (after
 * the scan's filters), copied into Arrow vectors by Spark's own `ArrowWriter` and written
 * as an Arrow IPC stream with ZSTD buffers, the entry format raptorx_py's
 * `cache.fragment_cache` writes and reads ([[raptorx.contract.FragmentEntry]]). The Arrow schema
 * is Spark's for the scan's columns (`ArrowUtils.toArrowSchema`, time zone UTC, every field
 * nullable): the schema pyspark's `to_arrow_schema` gives the Python reader, which checks
 * it on every hit.
 *
 * Batches are copied a column at a time, each by Spark's own converter for its type
 * (`ArrowWriter.createFieldWriter`), so one loop per column runs one conversion.
 *
 * Limits: the stream is kept in memory until published, up to `maxStreamBytes` (past it,
 * [[add]] says so and the entry is dropped) plus one batch of [[FragmentStores.RowsPerBatch]]
 * rows in Arrow vectors.
 */
final class FragmentEntryWriter(schema: StructType, maxStreamBytes: Long) extends AutoCloseable {
  // The root and its vectors, as Spark's writer makes them; written column by column by
  // field writers of our own (the writer's own write a row at a time).
  private val writer = ArrowWriter.create(schema.asNullable, "UTC", true, false)
  private val fields = writer.root.getFieldVectors.asScala.map(ArrowWriter.createFieldWriter).toArray
  private val out = new FragmentEntryWriter.Bytes
  private val stream = new ArrowStreamWriter(writer.root, null, Channels.newChannel(out),
    IpcOption.DEFAULT, CommonsCompressionFactory.INSTANCE, CompressionUtil.CodecType.ZSTD)
  private var pending = 0
  private var open = true
  stream.start()

  /** Add `batch`'s rows; false once the stream is longer than `maxStreamBytes`. */
  def add(batch: ColumnarBatch): Boolean = {
    val n = batch.numRows()
    var c = 0
    while (c < fields.length) {
      val field = fields(c)
      var r = 0
      while (r < n) {
        field.write(batch.getRow(r), c) // the batch's one row view, moved to row r
        r += 1
      }
      c += 1
    }
    pending += n
    pending < FragmentStores.RowsPerBatch || flush()
  }

  private def flush(): Boolean = {
    writer.root.setRowCount(pending)
    fields.foreach(_.finish())
    stream.writeBatch()
    fields.foreach(_.reset())
    writer.root.setRowCount(0)
    pending = 0
    out.size() <= maxStreamBytes
  }

  /** The whole stream (its bytes and length), or None when it is too long. */
  def finish(): Option[(Array[Byte], Int)] = {
    if (pending > 0 && !flush()) return None
    stream.end()
    if (out.size() > maxStreamBytes) None else Some((out.bytes, out.size()))
  }

  override def close(): Unit = if (open) {
    open = false
    writer.root.close()
  }
}

object FragmentEntryWriter {
  /** A `ByteArrayOutputStream` whose bytes are read without a copy. */
  private final class Bytes extends ByteArrayOutputStream(1 << 16) {
    def bytes: Array[Byte] = buf
  }
}

/**
 * Publishing the entries the JVM built ([[FragmentEntryWriter]]) into the fragment result
 * cache's directory, as raptorx_py's `cache.fragment_cache` does: the entry file
 * `entries/<2 hex>/<key>.arrow` (header: magic, format, expiry, HMAC-SHA256 with the cache's
 * secret: `FragmentEntry.prefix`, `FragmentEntry.mac`), written to a temporary file under `tmp/` and renamed
 * into place ([[raptorx.cache.BlockFiles.publishFile]]); then, since the JVM has no SQLite
 * driver, `adopt/<pid>.<16 hex>.names` naming them (`<key hex> <file bytes>` a line), which
 * the Python cache folds into its index (`FragmentCache.adopt_published`), so they count
 * against its bounds and are evicted like its own.
 *
 * The JVM stops storing while the entries its names files list, not yet folded, come to
 * more than the cache's size bound ([[pendingBytes]]): a node where no Python process runs
 * fills at most that much past the bound.
 */
object FragmentStores {
  /** Rows per record batch of a stored entry: a hit hands Spark batches this big. */
  val RowsPerBatch = 65536

  /** Publish `stream[0, length)` as the entry of `key` (hex) under `dir`, expiring at
   * `expiresMillis` (0: never); the entry file's size. Throws what writing throws. */
  def publish(dir: Path, secret: Array[Byte], key: String, stream: Array[Byte], length: Int,
              expiresMillis: Long, groupShared: Boolean): Long = {
    val keyBytes = PickledMarks.unhexBytes(key)
      .getOrElse(throw new IllegalArgumentException(s"not a fragment key: $key"))
    val header = FragmentEntry.prefix(expiresMillis)
    val mac = FragmentEntry.mac(secret, header, keyBytes, stream, 0, length)
    BlockFiles.publishFile(dir, groupShared, ByteBuffer.wrap(header), ByteBuffer.wrap(mac),
      ByteBuffer.wrap(stream, 0, length))(_ => FragmentEntry.path(dir, key))
    FragmentEntry.HeaderBytes.toLong + length
  }

  /** Publish the names file of `entries` (key in hex, file bytes) under `dir`. Throws what
   * writing throws; no entries, nothing written. */
  def adopt(dir: Path, entries: Seq[(String, Long)], groupShared: Boolean): Unit =
    if (entries.nonEmpty) {
      BlockFiles.publishFile(dir, groupShared, ByteBuffer.wrap(FragmentEntry.namesText(entries))) {
        tmp => dir.resolve(CacheFiles.AdoptDir).resolve(
          tmp.getFileName.toString.stripSuffix(CacheFiles.TempSuffix) + CacheFiles.NamesSuffix)
      }
    }

  /** The bytes of the entries named by `dir`'s names files (published, not yet folded into
   * the Python index); 0 when there are none or they cannot be read. */
  def pendingBytes(dir: Path): Long =
    try {
      val names = dir.resolve(CacheFiles.AdoptDir)
      if (!Files.isDirectory(names)) 0L
      else {
        val files = Files.list(names)
        try files.iterator().asScala.filter(_.getFileName.toString.endsWith(CacheFiles.NamesSuffix))
          .map(listedBytes).sum
        finally files.close()
      }
    } catch { case NonFatal(_) => 0L }

  private def listedBytes(file: Path): Long =
    try FragmentEntry.listedBytes(new String(Files.readAllBytes(file), US_ASCII))
    catch { case NonFatal(_) => 0L }
}
