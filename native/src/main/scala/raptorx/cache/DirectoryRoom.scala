package raptorx.cache

import java.nio.channels.FileChannel
import java.nio.file.{Files, Path, StandardOpenOption}
import java.nio.file.attribute.BasicFileAttributes

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

/**
 * Room in a node's cache directory, made by the JVM itself.
 *
 * The Python stores keep each tier within its bound: they fold what the JVM published (the
 * names files under `adopt/`) into their SQLite index and evict by it. A node where no Python
 * process runs (executors need none to read) has no one to do that, so the JVM, once what it
 * published and nobody folded would pass the tier's bound, makes room itself: it sums the
 * files under the tier's data directory and, when they come to more than nine tenths of the
 * bound, deletes the oldest (by modification time: when a block was published, when a
 * fragment entry was last served) until they do not.
 *
 * Contract and limits:
 *  - one JVM thread and one process of the node at a time (a lock file in the directory,
 *    taken without waiting: a caller that finds it taken makes no room this time);
 *  - deleting a file is a cache fault the readers already treat as a miss: a Python index
 *    row whose file is gone is a miss there and is dropped, a reader holding the file open
 *    reads it whole;
 *  - the Python store, when one runs again, folds and evicts by its own index as before.
 *
 * After making room in a directory, this JVM keeps a ledger of it: the bytes found on disk
 * plus what it published there since ([[published]]). While the ledger says there is room
 * ([[roomLeft]]), it stores without walking the directory again; it walks again only when
 * the ledger says the bound is reached (other processes of the node publish too, so the
 * ledger is an estimate the next walk corrects).
 */
object DirectoryRoom {
  /** Share of the bound left free after making room (a tenth), so room is made seldom. */
  val FreeShare = 10
  val LockFile = "jvm-room.lock"

  /** What making room found and did: the bytes under the data directory after it, and the
   * files and bytes it deleted. */
  final case class Made(total: Long, evicted: Int, evictedBytes: Long)

  private val ledger = new java.util.concurrent.ConcurrentHashMap[Path, java.util.concurrent.atomic.AtomicLong]()

  /** Make room under `data` (a tier's data directory inside `dir`) for a tier bound to
   * `capacity` bytes; None when another thread or process holds the lock, the bound is
   * unknown, or the directory cannot be read. Never throws. */
  def make(dir: Path, data: Path, capacity: Long): Option[Made] =
    if (capacity <= 0) None
    else synchronized {
      try {
        val channel = FileChannel.open(dir.resolve(LockFile),
          StandardOpenOption.CREATE, StandardOpenOption.WRITE)
        try {
          val lock = channel.tryLock()
          if (lock == null) None
          else try {
            val made = evict(data, capacity - capacity / FreeShare)
            ledger.computeIfAbsent(dir, _ => new java.util.concurrent.atomic.AtomicLong())
              .set(made.total)
            Some(made)
          } finally lock.release()
        } finally channel.close()
      } catch { case NonFatal(_) => None }
    }

  /** The bytes `dir` has room for by this JVM's ledger, or None when this JVM never made
   * room there (the Python store's accounting holds). */
  def roomLeft(dir: Path, capacity: Long): Option[Long] =
    Option(ledger.get(dir)).map(capacity - _.get())

  /** `bytes` published under `dir` by this JVM, for its ledger. */
  def published(dir: Path, bytes: Long): Unit =
    Option(ledger.get(dir)).foreach(_.addAndGet(bytes))

  /** Whether `bytes` more fit under `dir`'s bound: by this JVM's ledger, walking the
   * directory again (and making room, told to `made`) when it says they do not; with no
   * ledger, by `pythonSaysRoom`, and when that says no, by making room. */
  def fits(dir: Path, data: Path, capacity: Long, bytes: Long, pythonSaysRoom: => Boolean)(
      made: Made => Unit): Boolean =
    roomLeft(dir, capacity) match {
      case Some(left) if left >= bytes => true
      case None if pythonSaysRoom => true
      case _ =>
        make(dir, data, capacity).foreach(made)
        roomLeft(dir, capacity).exists(_ >= bytes)
    }

  private def evict(data: Path, target: Long): Made = {
    if (!Files.isDirectory(data)) return Made(0L, 0, 0L)
    val files = {
      val walk = Files.walk(data)
      try walk.iterator().asScala.flatMap { p =>
        try {
          val a = Files.readAttributes(p, classOf[BasicFileAttributes])
          if (a.isRegularFile) Some((p, a.size(), a.lastModifiedTime().toMillis)) else None
        } catch { case NonFatal(_) => None } // removed while walked
      }.toVector finally walk.close()
    }
    var total = files.map(_._2).sum
    var evicted = 0
    var evictedBytes = 0L
    if (total > target) {
      val oldestFirst = files.sortBy(_._3).iterator
      while (total > target && oldestFirst.hasNext) {
        val (p, size, _) = oldestFirst.next()
        if (try Files.deleteIfExists(p) catch { case NonFatal(_) => false }) {
          total -= size
          evicted += 1
          evictedBytes += size
        }
      }
    }
    Made(total, evicted, evictedBytes)
  }
}
