package raptorx.cache

import java.io.Closeable

import scala.collection.mutable
import scala.util.control.NonFatal

import org.apache.hadoop.fs.{FSDataInputStream, StreamCapabilities}

/**
 * The file handle cache (`hive.file-handle-cache-*`; RaptorX's workers keep their open
 * files): streams of the stores' files kept open in this JVM between reads, so that the
 * splits of a file (its row groups or stripes, in one query or the next) and the blocks
 * they fetch open it once rather than once per read.
 *
 * Contract:
 * - A handle belongs to one reader at a time: [[use]] takes an idle handle of the file, or
 *   opens one, and puts it back when the read returns. Reads of one file that run at once
 *   (the block fetches of one split run in parallel) each have their own handle, so a file
 *   is opened as many times as reads of it ran together, once.
 * - Keyed by the store, the file and its size and version as planning listed them: a file
 *   of another version is another key, so no read goes through a handle of an older
 *   version. Idle handles of a path whose version changed are closed when the new version
 *   is first read (`file_handles.invalidated`). The stream's own checks still apply: s3a
 *   sends the opened ETag with every GET, and a local file's version is compared after
 *   each fetch ([[BlockCachingInputStream]]).
 * - A read that fails closes its handle (never put back); so does a handle over the bound.
 * - Bounded by the handles kept idle (`maxIdle`, the least recently used closed first) and
 *   by the time a handle stays idle (`ttlMillis`; 0: until evicted), checked whenever a
 *   handle is taken or put back. An idle handle lets go of what it holds that it can
 *   (`unbuffer`: s3a's HTTP connection goes back to its pool), so kept handles never hold
 *   the connections reads need.
 *
 * Counts (per task): `storage.file_opens` (opens of the store's files, cached or not),
 * `file_handles.hits`, `.evictions`, `.invalidated`.
 *
 * Limits: on S3 an open sends no request when the listing gave the file's status (see
 * `BlockCachingFileSystem.listedStatus`), so a hit saves the stream's setup only; on a
 * local file system it saves the open itself.
 */
final class FileHandles(val maxIdle: Int, val ttlMillis: Long, clock: () => Long)
    extends Closeable {
  private final class Idle(val key: String, val path: String, val in: FSDataInputStream,
                           val since: Long)

  /** Idle handles, least recently put back first. */
  private val idle = mutable.LinkedHashSet.empty[Idle]
  private var closed = false

  /** `read` given a handle of the file `path` whose version is `key` (an idle one, or one
   * `open` makes), put back after it returns and closed when it throws. */
  def use[T](key: String, path: String, counts: TaskCounts)(open: => FSDataInputStream)
            (read: FSDataInputStream => T): T = {
    val (kept, toClose) = synchronized {
      val changed = idle.filter(h => h.path == path && h.key != key).toSeq
      changed.foreach(idle.remove)
      val old = expired(clock())
      old.foreach(idle.remove)
      counts.add("file_handles.invalidated", changed.size.toLong)
      counts.add("file_handles.evictions", old.size.toLong)
      val found = idle.toSeq.reverseIterator.find(_.key == key)
      found.foreach(idle.remove)
      (found, changed ++ old)
    }
    closeAll(toClose)
    val in = kept match {
      case Some(h) =>
        counts.add("file_handles.hits")
        h.in
      case None =>
        val opened = open
        counts.add("storage.file_opens")
        opened
    }
    val out = try read(in) catch {
      case e: Throwable =>
        closeQuietly(in)
        throw e
    }
    putBack(key, path, in, counts)
    out
  }

  private def putBack(key: String, path: String, in: FSDataInputStream, counts: TaskCounts): Unit = {
    try {
      if (in.hasCapability(StreamCapabilities.UNBUFFER)) in.unbuffer()
    } catch {
      case NonFatal(_) =>
        closeQuietly(in)
        return
    }
    val toClose = synchronized {
      if (closed || maxIdle <= 0) Seq(new Idle(key, path, in, 0L))
      else {
        idle += new Idle(key, path, in, clock())
        val over = idle.take(math.max(0, idle.size - maxIdle)).toSeq
        over.foreach(idle.remove)
        counts.add("file_handles.evictions", over.size.toLong)
        over
      }
    }
    closeAll(toClose)
  }

  /** The idle handles past their time (the caller holds the lock). */
  private def expired(now: Long): Seq[Idle] =
    if (ttlMillis <= 0) Seq.empty else idle.filter(h => now - h.since > ttlMillis).toSeq

  /** Handles idle now (tests). */
  def idleCount: Int = synchronized(idle.size)

  /** Close every idle handle; handles in use are closed when they are put back. */
  override def close(): Unit = closeAll(synchronized {
    closed = true
    val all = idle.toSeq
    idle.clear()
    all
  })

  private def closeAll(handles: Iterable[Idle]): Unit = handles.foreach(h => closeQuietly(h.in))

  private def closeQuietly(in: FSDataInputStream): Unit =
    try in.close() catch { case NonFatal(_) => () }
}

object FileHandles {
  @volatile private var clock: () => Long = () => System.currentTimeMillis()

  /** The clock of the caches made after this call (tests: a [[ManualClock]]). */
  def useClock(c: () => Long): Unit = clock = c

  private val instances = new PerJvm[(Int, Long), FileHandles](
    { case (maxIdle, ttl) => new FileHandles(maxIdle, ttl, clock) }, _.close())

  /** This JVM's handle cache, with the latest plan's bounds ([[PerJvm]]; the one it replaces
   * closes its idle handles). */
  def shared(maxIdle: Int, ttlMillis: Long): FileHandles = instances((maxIdle, ttlMillis))

  /** The key of a file version read through `store` (one of the stores' file systems). */
  def key(store: AnyRef, url: String, size: Long, version: String): String =
    s"${System.identityHashCode(store)}|$url|$size|$version"
}

/** A clock that moves when told to (tests: idle time without waiting). */
final class ManualClock(private var now: Long) extends (() => Long) {
  override def apply(): Long = synchronized(now)
  def advance(millis: Long): Unit = synchronized(now += millis)
}
