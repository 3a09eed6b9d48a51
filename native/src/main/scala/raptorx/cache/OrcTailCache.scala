package raptorx.cache

import java.nio.ByteBuffer

import scala.annotation.nowarn
import scala.util.control.NonFatal

import org.apache.orc.impl.{OrcTail, ReaderImpl}

/**
 * RaptorX's ORC file tail cache (`hive.orc.file-tail-cache-*`; Presto's
 * `CachingOrcFileTailSource`): the tail of an ORC file (the postscript, the footer with its
 * stripe list and file statistics, and the metadata with the stripe statistics) kept in
 * this JVM's memory per file version, so that each split of a file, in this query and the
 * next, opens it without reading and parsing its tail again.
 *
 * Contract:
 * - Keyed by the file's URL, its size and its version as planning listed them (an ETag, a
 *   local file's inode and times): another version of the file is another key, so a tail
 *   is never served for bytes it does not describe. Files without a comparable version are
 *   not cached: the reader hands no cache for them (`SplitServingReader`).
 * - The tail is kept as its serialized bytes ([[KeptBytes]]) and parsed again for each use:
 *   an `OrcTail` holds the reader that made it, which its split closes.
 * - Bounded by the bytes kept (`maxBytes`, least recently read dropped first) and by the
 *   time since an entry was last read (`ttlMillis`; 0: until evicted). A tail larger than
 *   the bound is not kept.
 * - A fault is a miss: bytes that changed since they were kept (their CRC-32) or no longer
 *   parse are dropped and the tail read again from the file (`orc_tail_cache.errors`).
 *
 * Counts (per task, in its [[TaskCounts]]): `orc_tail_cache.hits`, `.misses`, `.stores`,
 * `.evictions`, `.errors`.
 */
final class OrcTailCache(val maxBytes: Long, val ttlMillis: Long, clock: () => Long) {
  private val kept = new KeptBytes(maxBytes, ttlMillis, OrcTailCache.Counter, clock)

  /** The cached tail of the file version `key` of `fileLength` bytes, parsed, or None
   * (counted as a miss). */
  def get(key: String, fileLength: Long, counts: TaskCounts): Option[OrcTail] = {
    val tail = kept.get(key, counts).flatMap { case (bytes, modified) =>
      try Some(parse(bytes, fileLength, modified)) catch {
        case NonFatal(_) =>
          kept.drop(key, bytes)
          counts.add("orc_tail_cache.errors")
          None
      }
    }
    counts.add(if (tail.isDefined) "orc_tail_cache.hits" else "orc_tail_cache.misses")
    tail
  }

  /** The tail in `bytes`. ORC deprecates this parse for its readers, which read a tail from
   * the file; it is the one that takes a tail's serialized bytes (what LLAP's and Presto's
   * tail caches keep), the form a tail outlives the reader that read it in. */
  @nowarn("cat=deprecation")
  private def parse(bytes: Array[Byte], fileLength: Long, modified: Long): OrcTail =
    ReaderImpl.extractFileTail(ByteBuffer.wrap(bytes), fileLength, modified)

  /** Keep `tail`, read from the file version `key`. */
  def put(key: String, tail: OrcTail, counts: TaskCounts): Unit = {
    val bytes = try {
      val b = tail.getSerializedTail.duplicate()
      val out = new Array[Byte](b.remaining())
      b.get(out)
      out
    } catch {
      case NonFatal(_) =>
        counts.add("orc_tail_cache.errors")
        return
    }
    kept.put(key, bytes, tail.getFileModificationTime, counts)
  }

  /** Flip a byte of every kept tail (tests: a damaged entry is a counted miss); how many. */
  def damageAll(): Int = kept.damageAll()
}

object OrcTailCache {
  val Counter = "orc_tail_cache"
  private val instances = new PerJvm[(Long, Long), OrcTailCache]({ case (bytes, ttl) =>
    new OrcTailCache(bytes, ttl, () => System.currentTimeMillis())
  })

  /** This JVM's cache, with the latest plan's bounds ([[PerJvm]]). */
  def shared(maxBytes: Long, ttlMillis: Long): OrcTailCache = instances((maxBytes, ttlMillis))

  /** This JVM's cache as it is (tests), or null before any plan made one. */
  def current: OrcTailCache = instances.current

  /** The key of a file version. */
  def key(url: String, size: Long, version: String): String = s"$url|$size|$version"
}
