package raptorx.cache

import java.io.{EOFException, FileNotFoundException, IOException}
import java.net.URI
import java.nio.ByteBuffer
import java.nio.file.{Files, Path => NioPath, Paths}
import java.util.concurrent.{Callable, ConcurrentHashMap, ExecutionException, ExecutorService, Executors, Future, ThreadFactory}
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong}
import java.util.concurrent.atomic.LongAdder
import java.util.function.IntFunction

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{EtagSource, FSDataInputStream, FSDataOutputStream, FSInputStream, FileRange, FileStatus, FileSystem, Path, StreamCapabilities}
import org.apache.hadoop.fs.permission.FsPermission
import org.apache.hadoop.util.Progressable

import raptorx.contract.{BlockEntry, CacheFiles}

/**
 * One file a task reads through the block cache: the file's own address (`remote`, a Hadoop
 * URI: `s3a://`, `file:`), the identity planning listed (size, version, ETag: raptorx_py's
 * `storage.file_versions`), the key its blocks are stored under (`block_cache.block_key`,
 * computed by the planner, so the JVM and the Python reader share the blocks; null: never
 * cached), the node's block directory, and the counts of the task reading it.
 */
final case class CachedFile(
    remote: String,
    size: Long,
    version: String,
    etag: String,
    key: String,
    blocksDir: NioPath,
    blockSize: Int,
    groupShared: Boolean,
    fill: Boolean,
    counts: TaskCounts,
    capacity: Long = 0L,
    orcTails: OrcTailCache = null,
    handles: FileHandles = null,
    orcStripes: OrcStripeCache = null)

/** Counts of one task, added to by its reading thread and the block fetchers. */
final class TaskCounts {
  private val counts = new ConcurrentHashMap[String, LongAdder]()
  def add(name: String, value: Long = 1L): Unit =
    if (value != 0) counts.computeIfAbsent(name, _ => new LongAdder()).add(value)
  def snapshot(): Map[String, Long] = counts.asScala.map { case (k, v) => k -> v.sum() }.toMap
}

/** A file's blocks changed under a reader: the version planning listed is gone. */
class FileChangedException(message: String, cause: Throwable = null)
    extends IOException(message, cause)

/**
 * The files the file system below serves, by the path a task registered them under
 * (`rxcache://<id>/<name>`): Spark's Parquet reader opens a Hadoop path and nothing else, so
 * a split's identity and cache travel here. A task registers each split before reading it
 * and forgets it when the split ends.
 */
object CachedFiles {
  val Scheme = "rxcache"
  private val files = new ConcurrentHashMap[String, CachedFile]()
  private val ids = new AtomicLong()

  def register(file: CachedFile): Path = {
    val id = s"f${ids.incrementAndGet()}"
    files.put(id, file)
    val name = file.remote.substring(file.remote.lastIndexOf('/') + 1)
    new Path(new URI(Scheme, id, "/" + name, null))
  }

  def forget(path: Path): Unit = files.remove(path.toUri.getAuthority)

  /** The file registered under `path`, or None (not a `rxcache://` path, or forgotten). */
  def find(path: Path): Option[CachedFile] =
    if (path.toUri.getScheme != Scheme) None else Option(files.get(path.toUri.getAuthority))

  def get(path: Path): CachedFile = {
    val file = files.get(path.toUri.getAuthority)
    if (file == null) throw new FileNotFoundException(s"$path: not registered by a raptorx task")
    file
  }

  /** The Hadoop settings that make `rxcache://` this file system (never cached by Hadoop:
   * an instance holds nothing but its URI). */
  def configure(conf: Configuration): Unit = {
    conf.set(s"fs.$Scheme.impl", classOf[BlockCachingFileSystem].getName)
    conf.setBoolean(s"fs.$Scheme.impl.disable.cache", true)
  }
}

/**
 * The block cache as a Hadoop file system, under Spark's own Parquet reader (RaptorX's
 * shape: Alluxio's local cache as the Hive connector's file system). Reads only: a file is
 * served in aligned blocks of `blockSize` bytes from `<blocks dir>/data/` (the format of
 * raptorx_py's `cache/block_store.py`, verified with the cache's secret by [[BlockFiles]]);
 * a block not there is fetched from the file's own file system (the one Hadoop configures
 * for `s3a://` or `file:`) with one ranged read, handed out, and published for the next
 * reader, Python's or the JVM's.
 *
 * Contract:
 * - Bytes of another version are never served or cached: before its first fetch of a file a
 *   stream compares the store's identity (size; the ETag on an object store; inode, change
 *   and modification times of a local file) with planning's, and fails with
 *   [[FileChangedException]] on a difference; s3a then sends that ETag with every ranged GET
 *   (`If-Match`), so a later overwrite fails the GET; a local file is compared again after
 *   every fetch before its bytes are published.
 * - A cache fault is a miss: a missing, short, corrupt or forged block file is read from the
 *   store (a corrupt one is deleted by [[BlockFiles]]); a block that cannot be published
 *   (read-only or full disk) is only counted.
 * - Several missing blocks of one read (a vectored read of a row group's column chunks, a
 *   read across blocks) are fetched in parallel, one ranged read per block, on a pool of
 *   `raptorx.block-fetch-threads` (16) threads per JVM.
 * - Capacity: the JVM cannot update the store's SQLite index, so it publishes the names of
 *   the blocks it wrote (`adopt/`), which the Python store folds in and evicts by; while the
 *   blocks waiting there exceed the room the store's index left at its last adoption, or a
 *   tenth of its capacity when that is more (its `capacity` file), blocks are read without
 *   being stored (`block_cache.jvm_fill_deferred`). The store adopts when a scan is planned,
 *   before any of its blocks is read, so with a tenth alone one query could fill no more
 *   than a tenth of the cache (SF 10, Q21: 845 of 3,100 blocks).
 *
 * Limits: no listing, writing or renaming (Spark's reader needs none); a file's identity is
 * the planner's, so a path must be registered ([[CachedFiles]]) by the task reading it.
 */
class BlockCachingFileSystem extends FileSystem {
  private var fsUri: URI = URI.create(CachedFiles.Scheme + ":///")
  private var workingDir = new Path(fsUri)

  override def initialize(name: URI, conf: Configuration): Unit = {
    super.initialize(name, conf)
    setConf(conf)
    fsUri = URI.create(s"${name.getScheme}://${Option(name.getAuthority).getOrElse("")}")
  }

  override def getScheme: String = CachedFiles.Scheme
  override def getUri: URI = fsUri

  override def open(f: Path, bufferSize: Int): FSDataInputStream =
    new FSDataInputStream(new BlockCachingInputStream(CachedFiles.get(f), getConf))

  override def getFileStatus(f: Path): FileStatus = {
    val file = CachedFiles.get(f)
    new FileStatus(file.size, false, 1, file.blockSize.toLong, 0L, f)
  }

  override def listStatus(f: Path): Array[FileStatus] = Array(getFileStatus(f))

  private def readOnly(what: String): Nothing =
    throw new UnsupportedOperationException(s"${CachedFiles.Scheme}:// is read-only ($what)")

  override def create(f: Path, permission: FsPermission, overwrite: Boolean, bufferSize: Int,
                      replication: Short, blockSize: Long, progress: Progressable): FSDataOutputStream =
    readOnly("create")
  override def append(f: Path, bufferSize: Int, progress: Progressable): FSDataOutputStream =
    readOnly("append")
  override def rename(src: Path, dst: Path): Boolean = readOnly("rename")
  override def delete(f: Path, recursive: Boolean): Boolean = readOnly("delete")
  override def mkdirs(f: Path, permission: FsPermission): Boolean = readOnly("mkdirs")
  override def setWorkingDirectory(dir: Path): Unit = workingDir = dir
  override def getWorkingDirectory: Path = workingDir
}

object BlockCachingFileSystem {
  val FetchThreadsKey = "raptorx.block-fetch-threads"
  val S3aInputStream = "fs.s3a.input.stream.type"
  /** Blocks published and not yet adopted may take at least this share of the store's
   * capacity (1/10), whatever room its index left. */
  val UnadoptedShare = 10

  /** Bytes a JVM may publish before the store adopts them: the room the index left, or a
   * tenth of `capacity` when that is more; 0 without a capacity (no store opened). */
  def fillRoom(capacity: Long, held: Option[Long]): Long =
    if (capacity <= 0) 0L
    else math.max(capacity / UnadoptedShare, held.map(capacity - _).getOrElse(0L))

  @volatile private var pool: ExecutorService = _

  def fetchPool(conf: Configuration): ExecutorService = {
    if (pool == null) synchronized {
      if (pool == null) {
        val n = math.max(1, conf.getInt(FetchThreadsKey, 16))
        val made = new AtomicInteger()
        pool = Executors.newFixedThreadPool(n, new ThreadFactory {
          override def newThread(r: Runnable): Thread = {
            val t = new Thread(r, s"raptorx-block-fetch-${made.incrementAndGet()}")
            t.setDaemon(true)
            t
          }
        })
      }
    }
    pool
  }

  /** The file systems of the stores (one per scheme, authority and settings), made with
   * `newInstance`: Hadoop's own cache keys by scheme and authority only, so a session's
   * s3a for the same bucket with other settings would be handed out instead. */
  private val stores = new ConcurrentHashMap[String, FileSystem]()

  def storeFor(uri: URI, conf: Configuration): FileSystem = {
    val settings = conf.getPropsWithPrefix("fs.s3a.").asScala.toSeq.sorted.mkString(",")
    val key = s"${uri.getScheme}://${uri.getAuthority}|$settings"
    stores.computeIfAbsent(key, _ => FileSystem.newInstance(uri, conf))
  }

  /** Store statuses of the file versions this JVM checked against planning's identity, by
   * file and version: the footer's read and the row groups' (two streams of one split), and
   * every split of a file, ask the store once. Bounded by forgetting them all. */
  private val checked = new ConcurrentHashMap[String, FileStatus]()
  private val CheckedMax = 1 << 14

  def checkedStatus(file: CachedFile)(check: => FileStatus): FileStatus = {
    val key = s"${file.remote}|${file.version}|${file.size}"
    val known = checked.get(key)
    if (known != null) return known
    val status = check
    if (checked.size() >= CheckedMax) checked.clear()
    checked.put(key, status)
    status
  }

  /** The status of an S3 object as planning listed it (its size and ETag, quoted as s3a
   * keeps it), for s3a to open it with no HEAD and check each GET against the ETag: only
   * where the read fetches cached blocks (s3a's classic stream, whose change detection is
   * known) and s3a's change detection compares ETags on the server or the client (its
   * defaults). None elsewhere: the store is asked (a HEAD) and the answer checked. Made by
   * reflection: hadoop-aws is on the executors' class path only with s3a. */
  def listedStatus(file: CachedFile, path: Path, caching: Boolean, conf: Configuration,
                   loader: ClassLoader): Option[FileStatus] = {
    val s3a = Option(path.toUri.getScheme).exists(_.equalsIgnoreCase("s3a"))
    val mode = conf.getTrimmed("fs.s3a.change.detection.mode", "server").toLowerCase
    val source = conf.getTrimmed("fs.s3a.change.detection.source", "etag").toLowerCase
    val etag = Option(file.etag).map(_.stripPrefix("\"").stripSuffix("\"")).filter(_.nonEmpty)
    if (!caching || !s3a || etag.isEmpty || source != "etag" ||
        !(mode == "server" || mode == "client")) return None
    scala.util.Try {
      Class.forName("org.apache.hadoop.fs.s3a.S3AFileStatus", true, loader)
        .getConstructor(classOf[Long], classOf[Long], classOf[Path], classOf[Long],
          classOf[String], classOf[String], classOf[String])
        .newInstance(Long.box(file.size), Long.box(0L), path, Long.box(file.blockSize.toLong),
          "", "\"" + etag.get + "\"", null)
        .asInstanceOf[FileStatus]
    }.toOption
  }

  /** Forget every checked status (tests: the next read of each file asks the store again). */
  def forgetChecked(): Unit = checked.clear()

  /** Bytes of the blocks whose names wait in `<dir>/adopt/` for the Python store to fold
   * them in (every process's; counted as whole blocks of `blockSize`). */
  def pendingAdoption(dir: NioPath, blockSize: Int): Long = {
    val adopt = dir.resolve(CacheFiles.AdoptDir)
    if (!Files.isDirectory(adopt)) return 0L
    val listing = Files.newDirectoryStream(adopt, "*" + CacheFiles.NamesSuffix)
    try listing.asScala.map { f =>
      try Files.readAllLines(f).size().toLong * (blockSize + BlockEntry.TrailerBytes)
      catch { case NonFatal(_) => 0L } // adopted (removed) while listed
    }.sum finally listing.close()
  }

  /** The version of a local file as raptorx_py's `file_versions.stat_version` spells it. */
  def posixVersion(path: NioPath): String = {
    val a = Files.readAttributes(path, "unix:ino,ctime,lastModifiedTime")
    def nanos(name: String): Long =
      a.get(name).asInstanceOf[java.nio.file.attribute.FileTime].to(java.util.concurrent.TimeUnit.NANOSECONDS)
    s"posix:${a.get("ino")}:${nanos("ctime")}:${nanos("lastModifiedTime")}"
  }
}

/**
 * One open file of [[BlockCachingFileSystem]]: positioned and vectored reads served block
 * by block. A cached block is read only in the ranges asked for, straight into the reader's
 * buffer (verified whole once per JVM per block file, `BlockFiles.readRange`): a scan of a
 * few columns reads those columns' bytes from disk, not the whole 1 MiB blocks around them.
 * A block missing from the cache is fetched whole from the store (in parallel with the
 * other blocks one call misses), published, and kept in memory (the last few), so the
 * reader's next small reads of it (a footer's tail, then the footer) cost nothing more.
 */
class BlockCachingInputStream(file: CachedFile, conf: Configuration) extends FSInputStream
    with StreamCapabilities {
  import BlockCachingFileSystem._

  private var pos = 0L
  private var closed = false
  private val blockSize = file.blockSize
  private val caching = file.key != null && file.blocksDir != null
  private lazy val secret: Option[Array[Byte]] =
    if (!caching) None
    else try Some(BlockFiles.secret(file.blocksDir, file.groupShared)) catch {
      case NonFatal(_) =>
        file.counts.add("block_cache.jvm_unavailable")
        None
    }
  /** Blocks fetched from the store, kept in memory by index (a few: the reader moves forward). */
  private val recent = mutable.LinkedHashMap.empty[Long, Array[Byte]]
  private val RecentBlocks = 4
  /** The bound: the plan's (the session's setting), else what a Python store wrote. */
  private lazy val capacity: Long =
    if (file.capacity > 0) file.capacity else BlockFiles.capacity(file.blocksDir).getOrElse(0L)
  /** The room the Python store's index left, and the blocks waiting for it to adopt them. */
  private lazy val room: Long = BlockCachingFileSystem.fillRoom(capacity, BlockFiles.held(file.blocksDir))
  private lazy val pendingAtOpen: Long = pendingAdoption(file.blocksDir, blockSize)

  /** Whether a block of `bytes` may be stored: within the room the Python store left, or,
   * where no Python store folds what the JVMs publish, within the bound by the bytes on disk
   * ([[DirectoryRoom]], which makes room when needed). */
  private def fits(bytes: Long): Boolean =
    DirectoryRoom.fits(file.blocksDir, file.blocksDir.resolve(BlockEntry.DataDir), capacity,
      bytes, room > 0 && pendingAtOpen + publishedBytes + bytes <= room) { made =>
      file.counts.add("block_cache.jvm_room_made")
      file.counts.add("block_cache.jvm_evicted", made.evicted.toLong)
      file.counts.add("block_cache.jvm_evicted_bytes", made.evictedBytes)
    }
  /** Names of the blocks this stream published, adopted by the store at close. */
  private val publishedNames = mutable.ArrayBuffer.empty[String]
  private var publishedBytes = 0L

  private val remotePath = new Path(file.remote)
  /** The store's file system. A cached file's blocks are fetched whole through s3a's classic
   * stream: hadoop-aws 3.5's default, the analytics stream, keeps objects and their metadata
   * in this JVM's memory across streams, a second cache under this one, outside its
   * identity checks and bounds (HADOOP-20058). A file never cached is read as Spark's own
   * reader would read it, with s3a's default stream. */
  private lazy val store: FileSystem = storeFor(remotePath.toUri,
    if (!caching) conf
    else {
      val classic = new Configuration(conf)
      classic.set(BlockCachingFileSystem.S3aInputStream, "classic")
      classic
    })
  /** The store's status of the file, checked against planning's identity (once per file
   * version and JVM), or, for an object a cached read fetches through s3a with its change
   * detection on, the status the listing gave (size and ETag: no HEAD). s3a sends that
   * ETag with every ranged GET (`If-Match`), so a file changed since it was listed fails
   * its first fetch (HTTP 412, or 404 for one deleted) as the HEAD's check would have. */
  private lazy val remoteStatus: FileStatus = checkedStatus(file) {
    BlockCachingFileSystem.listedStatus(file, remotePath, caching, conf,
        store.getClass.getClassLoader) match {
      case Some(st) =>
        file.counts.add("storage.status_from_listing")
        st
      case None =>
        val st = try store.getFileStatus(remotePath) catch {
          case e: FileNotFoundException =>
            throw changed(s"it no longer exists (${e.getMessage})")
        }
        file.counts.add("storage.remote_requests")
        file.counts.add("storage.status_requests")
        checkIdentity(st)
        st
    }
  }

  private def changed(why: String): FileChangedException =
    // The facts only: the reader that planned the file adds what to do (SplitServingReader).
    new FileChangedException(s"${file.remote}: planned as version ${file.version} (size " +
      s"${file.size}), but $why; the file changed after it was listed, and nothing read of " +
      "it was cached")

  private def checkIdentity(st: FileStatus): Unit = {
    if (st.getLen != file.size) throw changed(s"its size is now ${st.getLen}")
    val version = Option(file.version).getOrElse("")
    st match {
      case e: EtagSource if version.startsWith("etag:") && e.getEtag != null =>
        val found = e.getEtag.stripPrefix("\"").stripSuffix("\"")
        if (found != version.stripPrefix("etag:")) throw changed(s"its ETag is now $found")
      case _ if version.startsWith("posix:") => checkLocalVersion()
      case _ =>
    }
  }

  private def checkLocalVersion(): Unit = {
    val found = try posixVersion(Paths.get(remotePath.toUri)) catch {
      case NonFatal(e) => throw changed(s"it cannot be read ($e)")
    }
    if (found != file.version) throw changed(s"its version is now $found")
  }

  /** Vectored reads are served (in parallel for the blocks they miss): Parquet's reader
   * hands a row group's column chunks over in one call when the stream says so. */
  override def hasCapability(capability: String): Boolean =
    capability == StreamCapabilities.VECTOREDIO

  override def seek(target: Long): Unit = {
    if (target < 0) throw new EOFException(s"negative seek $target in ${file.remote}")
    pos = target
  }
  override def getPos: Long = pos
  override def seekToNewSource(targetPos: Long): Boolean = false
  override def available(): Int = math.min(Int.MaxValue.toLong, math.max(0L, file.size - pos)).toInt

  override def read(): Int = {
    val one = new Array[Byte](1)
    if (read(one, 0, 1) <= 0) -1 else one(0) & 0xff
  }

  override def read(b: Array[Byte], off: Int, len: Int): Int = {
    val n = read(pos, b, off, len)
    if (n > 0) pos += n
    n
  }

  override def read(position: Long, b: Array[Byte], off: Int, len: Int): Int = {
    if (len == 0) return 0
    if (position >= file.size) return -1
    val n = math.min(len.toLong, file.size - position).toInt
    serve(Seq(position -> ByteBuffer.wrap(b, off, n)))
    n
  }

  override def readFully(position: Long, b: Array[Byte], off: Int, len: Int): Unit = {
    if (position < 0 || position + len > file.size) {
      throw new EOFException(s"${file.remote}: read of $len bytes at $position past its end " +
        s"(${file.size} bytes)")
    }
    serve(Seq(position -> ByteBuffer.wrap(b, off, len)))
  }

  override def readVectored(ranges: java.util.List[_ <: FileRange],
                            allocate: IntFunction[ByteBuffer]): Unit = {
    val buffers = ranges.asScala.toSeq.map { r =>
      val buffer = allocate.apply(r.getLength)
      buffer.limit(buffer.position() + r.getLength)
      r -> buffer
    }
    // One call for every range: the blocks they miss are fetched together, in parallel.
    serve(buffers.map { case (r, buffer) => r.getOffset -> buffer })
    buffers.foreach { case (r, buffer) =>
      r.setData(java.util.concurrent.CompletableFuture.completedFuture(buffer))
    }
  }

  /** Each buffer's `remaining()` bytes from its file position. */
  private def serve(ranges: Seq[(Long, ByteBuffer)]): Unit = {
    if (closed) throw new IOException(s"${file.remote}: stream closed")
    if (caching) fill(ranges.flatMap { case (at, buffer) => pieces(at, buffer) })
    else direct(ranges)
  }

  /** The reads of a file that is never cached (no block key, or no cache directory) go to
   * the store as asked, not in blocks: what Spark's reader would fetch without us, with the
   * store's own vectored read merging near ranges. On the pool, stream opened and closed
   * there, for the same reason as [[fetchAll]]. */
  private def direct(ranges: Seq[(Long, ByteBuffer)]): Unit = {
    remoteStatus // the identity check comes before any read
    val read = fetchPool(conf).submit(new Callable[Unit] {
      override def call(): Unit = {
        withHandle { in =>
          if (ranges.size == 1 && ranges.head._2.hasArray) {
            val (at, buffer) = ranges.head // a positioned read, straight into the caller's array
            in.readFully(at, buffer.array(), buffer.arrayOffset() + buffer.position(),
              buffer.remaining())
          } else {
            val asked = ranges.map { case (at, buffer) =>
              FileRange.createFileRange(at, buffer.remaining())
            }
            in.readVectored(asked.asJava, (n: Int) => ByteBuffer.allocate(n))
            asked.zip(ranges).foreach { case (r, (_, buffer)) =>
              buffer.duplicate().put(r.getData.get())
            }
          }
        }
      }
    })
    awaited(read)
    if (file.version != null && file.version.startsWith("posix:")) checkLocalVersion()
    file.counts.add("storage.remote_requests", ranges.size.toLong)
    file.counts.add("storage.remote_bytes", ranges.map(_._2.remaining().toLong).sum)
  }

  /** Bytes `[within, within + dest.remaining())` of block `index`, for `dest`. */
  private final class Piece(val index: Long, val within: Int, val dest: ByteBuffer)

  /** `dest.remaining()` bytes at `position`, cut at block boundaries (`dest` itself is not
   * moved: each piece has its own view of its part). */
  private def pieces(position: Long, dest: ByteBuffer): Seq[Piece] = {
    if (position < 0) throw new EOFException(s"negative read position $position in ${file.remote}")
    val out = mutable.ArrayBuffer.empty[Piece]
    var at = position
    var to = dest.position()
    while (to < dest.limit()) {
      val index = at / blockSize
      val within = (at - index * blockSize).toInt
      val n = math.min(dest.limit() - to, blockLength(index) - within)
      if (n <= 0) throw new EOFException(s"${file.remote}: read at $at past its end (${file.size} bytes)")
      val part = dest.duplicate()
      part.limit(to + n)
      part.position(to)
      out += new Piece(index, within, part)
      at += n
      to += n
    }
    out.toSeq
  }

  /** Fill every piece: from the blocks this stream fetched, from ranges of cached blocks,
   * and what is left from the store (its blocks fetched whole, in parallel, and cached). */
  private def fill(all: Seq[Piece]): Unit = {
    val left = all.filterNot(p => fromRecent(p) || fromCache(p))
    if (left.nonEmpty) {
      val got = fetchAll(left.map(_.index).distinct)
      left.foreach(p => p.dest.duplicate().put(got(p.index), p.within, p.dest.remaining()))
    }
  }

  private def fromRecent(p: Piece): Boolean = recent.get(p.index) match {
    case Some(block) =>
      p.dest.duplicate().put(block, p.within, p.dest.remaining())
      true
    case None => false
  }

  /** The piece from the cached block, if it is there and verifies (a miss otherwise: the
   * piece's buffer is then rewritten from the store). */
  private def fromCache(p: Piece): Boolean = secret.exists { s =>
    val n = p.dest.remaining()
    val ok = try BlockFiles.readRange(file.blocksDir, s, name(p.index), blockLength(p.index),
      p.within, p.dest.duplicate()) catch {
      case NonFatal(_) =>
        file.counts.add("block_cache.jvm_errors")
        false
    }
    if (ok) {
      file.counts.add("block_cache.hits")
      file.counts.add("block_cache.bytes_from_cache", n.toLong)
    }
    ok
  }

  private def blockLength(index: Long): Int =
    math.min(blockSize.toLong, file.size - index * blockSize).toInt

  private def name(index: Long): String = s"${file.key}-$index"

  /** The blocks `indexes`, fetched from the store in parallel, published, and kept. */
  private def fetchAll(indexes: Seq[Long]): collection.Map[Long, Array[Byte]] = {
    remoteStatus // the identity check comes before any fetch
    // Always on the pool, even one block: the store's file system counts the bytes it reads
    // per thread, and Spark adds the task thread's counts to the stage's input, which the
    // reader reports itself (cache and store alike, `InputBytes`).
    val pool = fetchPool(conf)
    val futures: Seq[(Long, Future[Array[Byte]])] = indexes.map { i =>
      i -> pool.submit(new Callable[Array[Byte]] { override def call(): Array[Byte] = fetch(i) })
    }
    val fetched: Seq[(Long, Array[Byte])] = futures.map { case (i, f) => i -> awaited(f) }
    if (file.version != null && file.version.startsWith("posix:")) checkLocalVersion()
    fetched.foreach { case (i, b) =>
      publishBlock(i, b)
      remember(i, b)
    }
    fetched.toMap
  }

  /** What a read on the pool returned, or the I/O error it failed with (any other failure
   * wrapped in one). */
  private def awaited[T](f: Future[T]): T =
    try f.get() catch {
      case e: ExecutionException => e.getCause match {
        case io: IOException => throw io
        case other => throw new IOException(other)
      }
    }

  private def remember(i: Long, b: Array[Byte]): Unit = {
    recent.remove(i)
    recent(i) = b
    while (recent.size > RecentBlocks) recent.remove(recent.head._1)
  }

  private def fetch(i: Long): Array[Byte] = {
    val len = blockLength(i)
    val out = new Array[Byte](len)
    withHandle(_.readFully(i * blockSize, out, 0, len))
    file.counts.add("block_cache.misses")
    file.counts.add("block_cache.remote_requests")
    file.counts.add("block_cache.bytes_from_remote", len.toLong)
    file.counts.add("storage.remote_requests")
    file.counts.add("storage.remote_bytes", len.toLong)
    out
  }

  /** `read` given an open stream of the file: one of the JVM's kept handles when the split
   * has a handle cache ([[FileHandles]]), else one opened for it and closed after. */
  private def withHandle[T](read: FSDataInputStream => T): T = {
    def open(): FSDataInputStream = store.openFile(remotePath).withFileStatus(remoteStatus)
      .opt("fs.option.openfile.read.policy", "random").build().get()
    if (file.handles != null) {
      file.handles.use(FileHandles.key(store, file.remote, file.size, file.version),
        file.remote, file.counts)(open())(read)
    } else {
      val in = open()
      file.counts.add("storage.file_opens")
      try read(in) finally in.close()
    }
  }

  private def publishBlock(i: Long, b: Array[Byte]): Unit = {
    if (!file.fill) return
    secret.foreach { s =>
      val size = b.length + BlockEntry.TrailerBytes
      if (!fits(size)) {
        file.counts.add("block_cache.jvm_fill_deferred")
      } else if (BlockFiles.publish(file.blocksDir, s, name(i), b, b.length, file.groupShared)) {
        publishedNames += name(i)
        publishedBytes += size
        DirectoryRoom.published(file.blocksDir, size)
        file.counts.add("block_cache.jvm_published")
      } else {
        file.counts.add("block_cache.put_errors")
      }
    }
  }

  override def close(): Unit = {
    if (closed) return
    closed = true
    recent.clear()
    if (publishedNames.nonEmpty) {
      if (!BlockFiles.adopt(file.blocksDir, publishedNames.toSeq, file.groupShared)) {
        file.counts.add("block_cache.put_errors")
      }
    }
    super.close()
  }
}
