package raptorx.cache

import java.nio.ByteBuffer

import scala.util.control.NonFatal

import org.apache.orc.{DataReader, OrcProto, StripeInformation}
import org.apache.orc.impl.{BufferChunk, BufferChunkList, InStream}

/**
 * RaptorX's ORC stripe metadata cache (`hive.orc.stripe-metadata-cache-enabled`,
 * `hive.orc.stripe-footer-cache-*`, `hive.orc.stripe-stream-cache-*`; Presto's
 * `CachingStripeMetadataSource`): per stripe of a file version, its footer (the streams'
 * places and the columns' encodings) and its index streams (row indexes and bloom filters,
 * what a search argument reads to skip row groups), kept in this JVM's memory so that the
 * next read of the stripe, in this query or the next, neither reads nor decompresses them.
 *
 * Contract:
 * - Keyed by the file version's key (URL, size and version as planning listed them, as
 *   [[OrcTailCache]]) and the stripe's offset, or the stream's offset and length: bytes of
 *   another version are never served.
 * - Footers are kept as their protobuf bytes ([[KeptBytes]]), parsed per use; index streams
 *   as the file's bytes (compressed as stored). Each kind has its own bound in bytes and
 *   time since last read.
 * - A fault is a miss: bytes changed since they were kept, or a footer that no longer
 *   parses, are dropped and read again from the file (`.errors`).
 * - Only index streams are kept: what a read asks for inside the stripe's index area. Data
 *   streams are the block cache's.
 *
 * Counts: `orc_stripe_footer_cache.hits`, `.misses` (footers read from the file), `.stores`,
 * `.evictions`, `.errors`; the same under `orc_stripe_stream_cache.`.
 */
final class OrcStripeCache(val footers: KeptBytes, val streams: KeptBytes) {
  import OrcStripeCache._

  /** The footer of `stripe` of the file version `fileKey`: kept, or `read` and kept. */
  def footer(fileKey: String, stripe: StripeInformation, counts: TaskCounts)
            (read: => OrcProto.StripeFooter): OrcProto.StripeFooter = {
    val key = s"$fileKey|${stripe.getOffset}"
    val kept = footers.get(key, counts).flatMap { case (bytes, _) =>
      try Some(OrcProto.StripeFooter.parseFrom(bytes)) catch {
        case NonFatal(_) =>
          footers.drop(key, bytes)
          counts.add(s"$FooterCounter.errors")
          None
      }
    }
    kept match {
      case Some(f) =>
        counts.add(s"$FooterCounter.hits")
        f
      case None =>
        counts.add(s"$FooterCounter.misses")
        val f = read
        footers.put(key, f.toByteArray, 0L, counts)
        f
    }
  }

  /** Fill the chunks of `range` that hold kept index streams of the file version `fileKey`
   * (those within `[indexStart, indexEnd)`); the index chunks left unfilled. */
  def fillIndex(fileKey: String, range: BufferChunkList, indexStart: Long, indexEnd: Long,
                counts: TaskCounts): Seq[BufferChunk] = {
    val missed = Seq.newBuilder[BufferChunk]
    var c = range.get()
    while (c != null) {
      if (!c.hasData && c.getOffset >= indexStart && c.getEnd <= indexEnd) {
        streams.get(streamKey(fileKey, c), counts) match {
          case Some((bytes, _)) =>
            c.setChunk(ByteBuffer.wrap(bytes))
            counts.add(s"$StreamCounter.hits")
          case None =>
            counts.add(s"$StreamCounter.misses")
            missed += c
        }
      }
      c = c.next.asInstanceOf[BufferChunk]
    }
    missed.result()
  }

  /** Keep the bytes the file gave `chunks` (index chunks [[fillIndex]] left unfilled). */
  def keepIndex(fileKey: String, chunks: Seq[BufferChunk], counts: TaskCounts): Unit =
    chunks.foreach { c =>
      if (c.hasData) {
        val data = c.getData.duplicate()
        val bytes = new Array[Byte](data.remaining())
        data.get(bytes)
        streams.put(streamKey(fileKey, c), bytes, 0L, counts)
      }
    }

  private def streamKey(fileKey: String, c: BufferChunk): String =
    s"$fileKey|${c.getOffset}|${c.getLength}"

  /** Flip a byte of every kept footer and stream (tests); how many. */
  def damageAll(): Int = footers.damageAll() + streams.damageAll()
}

object OrcStripeCache {
  val FooterCounter = "orc_stripe_footer_cache"
  val StreamCounter = "orc_stripe_stream_cache"

  private val instances = new PerJvm[(Long, Long, Long, Long), OrcStripeCache]({
    case (footerBytes, footerTtl, streamBytes, streamTtl) =>
      val clock = () => System.currentTimeMillis()
      new OrcStripeCache(new KeptBytes(footerBytes, footerTtl, FooterCounter, clock),
        new KeptBytes(streamBytes, streamTtl, StreamCounter, clock))
  })

  /** This JVM's cache, with the latest plan's bounds ([[PerJvm]]). */
  def shared(footerBytes: Long, footerTtl: Long, streamBytes: Long, streamTtl: Long)
      : OrcStripeCache = instances((footerBytes, footerTtl, streamBytes, streamTtl))

  /** This JVM's cache as it is (tests), or null before any plan made one. */
  def current: OrcStripeCache = instances.current
}

/**
 * ORC's `DataReader` for one split's record reader, with [[OrcStripeCache]] in front of
 * `inner` (ORC's own reader of the file): stripe footers and index streams come from the
 * cache when kept there; what is read is kept. The index area of a stripe is known from its
 * footer's read, which ORC's reader makes before it reads the stripe's indexes.
 */
final class StripeCachingDataReader(inner: DataReader, cache: OrcStripeCache, fileKey: String,
                                    counts: TaskCounts) extends DataReader {
  private var opened = false
  private var indexStart = -1L
  private var indexEnd = -1L

  private def ensureOpen(): Unit = if (!opened) {
    inner.open()
    opened = true
  }

  override def open(): Unit = ensureOpen()

  override def readStripeFooter(stripe: StripeInformation): OrcProto.StripeFooter = {
    indexStart = stripe.getOffset
    indexEnd = stripe.getOffset + stripe.getIndexLength
    cache.footer(fileKey, stripe, counts) {
      ensureOpen()
      inner.readStripeFooter(stripe)
    }
  }

  override def readFileData(range: BufferChunkList, doForceDirect: Boolean): BufferChunkList = {
    val missed = if (indexEnd > indexStart) {
      cache.fillIndex(fileKey, range, indexStart, indexEnd, counts)
    } else Seq.empty
    var c = range.get()
    var unfilled = false
    while (c != null && !unfilled) {
      unfilled = !c.hasData
      c = c.next.asInstanceOf[BufferChunk]
    }
    if (unfilled) {
      ensureOpen()
      inner.readFileData(range, doForceDirect)
    }
    cache.keepIndex(fileKey, missed, counts)
    range
  }

  override def isTrackingDiskRanges: Boolean = inner.isTrackingDiskRanges
  @deprecated("as DataReader's", "ORC 1.7")
  override def releaseBuffer(buffer: ByteBuffer): Unit = inner.releaseBuffer(buffer)
  override def releaseAllBuffers(): Unit = inner.releaseAllBuffers()
  // Scala sees Object's protected clone, not DataReader's public one: called by reflection.
  override def clone(): DataReader = new StripeCachingDataReader(
    classOf[DataReader].getMethod("clone").invoke(inner).asInstanceOf[DataReader], cache,
    fileKey, counts)
  override def close(): Unit = inner.close()
  override def getCompressionOptions: InStream.StreamOptions = inner.getCompressionOptions
}
