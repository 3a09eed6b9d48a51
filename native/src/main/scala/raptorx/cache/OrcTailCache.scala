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
 * - The tail is kept as its serialized bytes and parsed again for each use: an `OrcTail`
 *   holds the reader that made it, which its split closes.
 * - Bounded by the bytes kept (`maxBytes`, least recently read dropped first) and by the
 *   time since an entry was last read (`ttlMillis`; 0: until evicted). A tail larger than
 *   the bound is not kept.
 * - A fault is a miss: bytes that no longer parse are dropped and the tail read again from
 *   the file (`orc_tail_cache.errors`).
 *
 * Counts (per task, in its [[TaskCounts]]): `orc_tail_cache.hits`, `.misses`, `.stores`,
 * `.evictions`, `.errors`.
 */
final class OrcTailCache(val maxBytes: Long, val ttlMillis: Long, clock: () => Long) {
  private final class Entry(val bytes: Array[Byte], val fileLength: Long, val modified: Long,
                            var lastRead: Long)

  private val entries = new java.util.LinkedHashMap[String, Entry](16, 0.75f, true)
  private var held = 0L

  /** The cached tail of the file version `key`, parsed, or None (counted as a miss). */
  def get(key: String, counts: TaskCounts): Option[OrcTail] = {
    val now = clock()
    val entry = entries.synchronized {
      val e = entries.get(key)
      if (e != null && ttlMillis > 0 && now - e.lastRead > ttlMillis) {
        remove(key, e)
        counts.add("orc_tail_cache.evictions")
        null
      } else {
        if (e != null) e.lastRead = now
        e
      }
    }
    if (entry == null) {
      counts.add("orc_tail_cache.misses")
      return None
    }
    try {
      val tail = parse(entry)
      counts.add("orc_tail_cache.hits")
      Some(tail)
    } catch {
      case NonFatal(_) =>
        entries.synchronized(if (entries.get(key) eq entry) remove(key, entry))
        counts.add("orc_tail_cache.errors")
        counts.add("orc_tail_cache.misses")
        None
    }
  }

  /** The tail in `entry`'s bytes. ORC deprecates this parse for its readers, which read a
   * tail from the file; it is the one that takes a tail's serialized bytes (what LLAP's and
   * Presto's tail caches keep), the form a tail outlives the reader that read it in. */
  @nowarn("cat=deprecation")
  private def parse(entry: Entry): OrcTail =
    ReaderImpl.extractFileTail(ByteBuffer.wrap(entry.bytes), entry.fileLength, entry.modified)

  /** Keep `tail`, read from the file version `key` of `fileLength` bytes. */
  def put(key: String, tail: OrcTail, fileLength: Long, counts: TaskCounts): Unit = {
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
    if (bytes.length > maxBytes) return
    entries.synchronized {
      val old = entries.get(key)
      if (old != null) remove(key, old)
      entries.put(key, new Entry(bytes, fileLength, tail.getFileModificationTime, clock()))
      held += bytes.length
      val it = entries.entrySet().iterator()
      while (held > maxBytes && it.hasNext) {
        val eldest = it.next()
        it.remove()
        held -= eldest.getValue.bytes.length
        counts.add("orc_tail_cache.evictions")
      }
    }
    counts.add("orc_tail_cache.stores")
  }

  private def remove(key: String, e: Entry): Unit = {
    entries.remove(key)
    held -= e.bytes.length
  }
}

object OrcTailCache {
  @volatile private var shared: OrcTailCache = _

  /** This JVM's cache, with the latest plan's bounds (a plan with other bounds starts an
   * empty one: the tails kept are only an optimization). */
  def shared(maxBytes: Long, ttlMillis: Long): OrcTailCache = synchronized {
    val c = shared
    if (c != null && c.maxBytes == maxBytes && c.ttlMillis == ttlMillis) c
    else {
      shared = new OrcTailCache(maxBytes, ttlMillis, () => System.currentTimeMillis())
      shared
    }
  }

  /** The key of a file version. */
  def key(url: String, size: Long, version: String): String = s"$url|$size|$version"
}
