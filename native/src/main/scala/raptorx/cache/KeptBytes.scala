package raptorx.cache

import java.util.zip.CRC32

/**
 * Byte arrays kept in this JVM's memory by key: the store under the ORC tail cache and the
 * stripe metadata caches (each keeps the serialized form of what it caches, parsed per use).
 *
 * Contract:
 * - [[get]] returns the bytes [[put]] kept, or None: absent, idle longer than `ttlMillis`
 *   (0: never too long; counted `<counter>.evictions`), or changed since they were kept (a
 *   CRC-32 kept beside them; counted `<counter>.errors`). What is not returned is dropped.
 * - Bounded by the bytes kept (`maxBytes`, the least recently read dropped first, counted
 *   `<counter>.evictions`); an array larger than the bound is not kept.
 * - Each entry carries one number of the caller's (`meta`: what parsing needs besides the
 *   bytes, such as a file's modification time).
 * - Thread-safe; the arrays handed out are the kept ones, to be read, not written.
 *
 * `counter` is the prefix of the counts, in the reading task's [[TaskCounts]].
 */
final class KeptBytes(val maxBytes: Long, val ttlMillis: Long, counter: String,
                      clock: () => Long) {
  private final class Entry(val bytes: Array[Byte], val meta: Long, var lastRead: Long) {
    val crc: Long = KeptBytes.crc(bytes)
  }

  private val entries = new java.util.LinkedHashMap[String, Entry](16, 0.75f, true)
  private var held = 0L

  /** The bytes kept under `key` and their `meta`, or None. */
  def get(key: String, counts: TaskCounts): Option[(Array[Byte], Long)] = {
    val now = clock()
    val entry = entries.synchronized {
      val e = entries.get(key)
      if (e != null && ttlMillis > 0 && now - e.lastRead > ttlMillis) {
        remove(key, e)
        counts.add(s"$counter.evictions")
        null
      } else {
        if (e != null) e.lastRead = now
        e
      }
    }
    if (entry == null) None
    else if (KeptBytes.crc(entry.bytes) != entry.crc) {
      drop(key, entry)
      counts.add(s"$counter.errors")
      None
    } else Some((entry.bytes, entry.meta))
  }

  /** Keep `bytes` (and `meta`) under `key`, replacing what was kept there. */
  def put(key: String, bytes: Array[Byte], meta: Long, counts: TaskCounts): Unit = {
    if (bytes.length > maxBytes) return
    entries.synchronized {
      val old = entries.get(key)
      if (old != null) remove(key, old)
      entries.put(key, new Entry(bytes, meta, clock()))
      held += bytes.length
      val it = entries.entrySet().iterator()
      while (held > maxBytes && it.hasNext) {
        val eldest = it.next()
        it.remove()
        held -= eldest.getValue.bytes.length
        counts.add(s"$counter.evictions")
      }
    }
    counts.add(s"$counter.stores")
  }

  /** Drop what is kept under `key` if it is still `bytes` (the caller could not parse them). */
  def drop(key: String, bytes: Array[Byte]): Unit = entries.synchronized {
    val e = entries.get(key)
    if (e != null && (e.bytes eq bytes)) remove(key, e)
  }

  private def drop(key: String, e: Entry): Unit =
    entries.synchronized(if (entries.get(key) eq e) remove(key, e))

  /** Flip a byte of every kept array (tests: damage is a counted miss); how many. */
  def damageAll(): Int = entries.synchronized {
    entries.values().forEach { e =>
      if (e.bytes.nonEmpty) e.bytes(e.bytes.length / 2) = (e.bytes(e.bytes.length / 2) ^ 1).toByte
    }
    entries.size()
  }

  private def remove(key: String, e: Entry): Unit = {
    entries.remove(key)
    held -= e.bytes.length
  }
}

object KeptBytes {
  def crc(bytes: Array[Byte]): Long = {
    val c = new CRC32()
    c.update(bytes)
    c.getValue
  }
}
