package raptorx.cache

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.channels.FileChannel
import java.nio.charset.StandardCharsets.US_ASCII
import java.nio.file.{FileAlreadyExistsException, Files, NoSuchFileException, Path,
  StandardCopyOption, StandardOpenOption}
import java.nio.file.attribute.{BasicFileAttributes, PosixFilePermission, PosixFilePermissions}
import java.security.SecureRandom
import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import raptorx.contract.BlockEntry
import raptorx.contract.BlockEntry.TrailerBytes
import raptorx.contract.CacheFiles.{AdoptDir, NamesSuffix, SecretBytes, SecretFile, TempSuffix, TmpDir}

/**
 * The block cache's files, read and written by the JVM: the JVM's half of raptorx_py's
 * `cache.block_store` and `cache.cache_files` (the secret, the modes). The layouts are the
 * contract's: [[raptorx.contract.BlockEntry]] (a block file, the names and capacity files)
 * and [[raptorx.contract.CacheFiles]] (the secret, the temp and names files' places).
 *
 * - A block `<key>-<index>` is the file `<dir>/data/<name[:2]>/<name>`: the payload, then
 *   a 48-byte trailer (`RXBC`, version 3, payload length, HMAC-SHA256 keyed with
 *   `<dir>/cache.secret` over the name and payload).
 * - [[read]] / [[readRange]] verify a block file once per JVM per (fileKey, size, mtime)
 *   (a bounded memo) and then read just the bytes asked for. Anything that fails
 *   verification (wrong size, magic, version, length, MAC) is a corrupt block: deleted if
 *   the path still names the file that was read, counted, None. An absent file is a miss.
 * - [[publish]] writes `<dir>/tmp/<pid>.<16 hex>.part` (mode 0600, or 0660 when the cache is
 *   group-shared) and renames it atomically onto the block's path. Never throws.
 * - The JVM cannot update the Python store's SQLite index: [[adopt]] publishes
 *   `<dir>/adopt/<pid>.<16 hex>.names` (one block name per line) which the Python
 *   `BlockStore` folds into its index (and then evicts past capacity); [[capacity]] reads
 *   the bound the Python store wrote to `<dir>/capacity` when it opened.
 * - Counts are in [[BlockCounts]].
 *
 * Limits: a corrupt block deleted here keeps its index row until the Python store meets it
 * (a miss there, dropped by its next recovery or eviction); the memo cannot see a file
 * modified in place within one mtime tick (the Python store's limit too).
 */
object BlockFiles {
  /** Most verified block files remembered before the memo is forgotten whole. */
  val MemoSize: Int = 1 << 18

  private val random = new SecureRandom()

  /** What a verified file was: its path's file key, size and mtime. */
  private final case class Stamp(fileKey: AnyRef, size: Long, mtimeNanos: Long)

  private val verified = new ConcurrentHashMap[String, Stamp]()

  // --- paths and modes -----------------------------------------------------------------

  private def filePermissions(groupShared: Boolean): java.util.Set[PosixFilePermission] =
    PosixFilePermissions.fromString(if (groupShared) "rw-rw----" else "rw-------")

  /** 0700, or 2770 (setgid: new files take the directory's group) when group-shared. */
  private def dirMode(groupShared: Boolean): Int = if (groupShared) 0x5f8 else 0x1c0

  /** `Files.createDirectories` giving each directory it creates exactly the cache's mode
   * (as `cache_files.make_dirs`; an existing directory is left as it is). */
  private def makeDirs(path: Path, groupShared: Boolean): Unit = {
    if (Files.isDirectory(path)) return
    val parent = path.getParent
    if (parent != null) makeDirs(parent, groupShared)
    try Files.createDirectory(path) catch {
      case _: FileAlreadyExistsException if Files.isDirectory(path) => return
    }
    try Files.setAttribute(path, "unix:mode", Integer.valueOf(dirMode(groupShared)))
    catch {
      case _: UnsupportedOperationException | _: IllegalArgumentException =>
        Files.setPosixFilePermissions(path,
          PosixFilePermissions.fromString(if (groupShared) "rwxrwx---" else "rwx------"))
    }
  }

  /** A new file holding `chunks`, created with exactly the cache's file mode. */
  private def writeNew(path: Path, groupShared: Boolean, chunks: ByteBuffer*): Unit = {
    val perms = filePermissions(groupShared)
    val channel = FileChannel.open(path,
      java.util.Set.of(StandardOpenOption.WRITE, StandardOpenOption.CREATE_NEW),
      PosixFilePermissions.asFileAttribute(perms))
    try {
      Files.setPosixFilePermissions(path, perms) // whatever the umask
      chunks.foreach(b => while (b.hasRemaining) channel.write(b))
    } finally channel.close()
  }

  private def tempPath(dir: Path): Path = {
    val bytes = new Array[Byte](8)
    random.nextBytes(bytes)
    dir.resolve(TmpDir).resolve(s"${ProcessHandle.current().pid()}.${hex(bytes)}$TempSuffix")
  }

  private def hex(bytes: Array[Byte]): String = bytes.map(b => f"${b & 0xff}%02x").mkString

  private def deleteQuietly(path: Path): Unit =
    try { Files.deleteIfExists(path); () } catch { case NonFatal(_) => () }

  // --- the secret ------------------------------------------------------------------------

  /** The cache's secret in `dir`, created (first creator wins: every process then reads the
   * same) if missing, and replaced if it is not 32 bytes (as `cache_files.load_secret`).
   * Throws IOException when it can be neither read nor created. */
  def secret(dir: Path, groupShared: Boolean): Array[Byte] = {
    val file = dir.resolve(SecretFile)
    var attempt = 0
    while (attempt < 3) {
      attempt += 1
      try {
        val s = Files.readAllBytes(file)
        if (s.length == SecretBytes) return s
        Files.deleteIfExists(file) // torn or foreign: entries keyed with it cannot be trusted
      } catch { case _: NoSuchFileException => () }
      makeDirs(dir, groupShared)
      val bytes = new Array[Byte](SecretBytes)
      random.nextBytes(bytes)
      val suffix = new Array[Byte](8)
      random.nextBytes(suffix)
      val tmp = dir.resolve(s"$SecretFile.${ProcessHandle.current().pid()}.${hex(suffix)}")
      writeNew(tmp, groupShared, ByteBuffer.wrap(bytes))
      try {
        try Files.createLink(file, tmp) catch {
          case _: FileAlreadyExistsException => () // another process published first
          case _: UnsupportedOperationException | _: java.nio.file.FileSystemException
              if !Files.exists(file) =>
            // No hard links here: an exclusive create of the same bytes.
            try writeNew(file, groupShared, ByteBuffer.wrap(bytes))
            catch { case _: FileAlreadyExistsException => () }
        }
      } finally deleteQuietly(tmp)
    }
    throw new IOException(s"cannot set up the cache secret $file")
  }

  // --- reading ---------------------------------------------------------------------------

  private def attributes(path: Path): Option[BasicFileAttributes] =
    try Some(Files.readAttributes(path, classOf[BasicFileAttributes]))
    catch { case _: NoSuchFileException => None }

  private def stamp(a: BasicFileAttributes): Stamp =
    Stamp(a.fileKey(), a.size(), a.lastModifiedTime().to(java.util.concurrent.TimeUnit.NANOSECONDS))

  /** Reads `dest` whole from `channel` at `position`; false if the file ends first. */
  private def readFully(channel: FileChannel, dest: ByteBuffer, position: Long): Boolean = {
    var at = position
    while (dest.hasRemaining) {
      val n = channel.read(dest, at)
      if (n < 0) return false
      at += n
    }
    true
  }

  private sealed trait Outcome
  private case object Absent extends Outcome
  private case object Corrupt extends Outcome
  private final case class Whole(payload: Array[Byte]) extends Outcome
  private case object Ranged extends Outcome

  /**
   * Open the block `name` and either verify it whole (the first read of this file by this
   * JVM, or a file changed since) or, when already verified, read without its MAC:
   * `dest.remaining()` bytes at `offset` into `dest` (then the outcome is [[Ranged]]), or
   * the whole payload when `dest` is null.
   */
  private def open(dir: Path, secret: Array[Byte], name: String, blockLen: Int, offset: Int,
                   dest: ByteBuffer): Outcome = {
    val file = BlockEntry.path(dir, name)
    val memoKey = file.toString
    // Attributes before and after opening: when equal, the file opened is the one they
    // describe (a publish always renames a new inode into place).
    val before = attributes(file) match {
      case Some(a) => a
      case None => return Absent
    }
    val channel = try FileChannel.open(file, StandardOpenOption.READ) catch {
      case _: NoSuchFileException => return Absent
    }
    val result = try {
      val same = attributes(file).exists(a => stamp(a) == stamp(before))
      val expectedSize = blockLen.toLong + TrailerBytes
      val outcome =
        if (channel.size() != expectedSize || before.size() != expectedSize) Corrupt
        else if (same && verified.get(memoKey) == stamp(before)) {
          if (dest != null) {
            if (readFully(channel, dest, offset.toLong)) Ranged else Corrupt
          } else {
            val payload = new Array[Byte](blockLen)
            if (readFully(channel, ByteBuffer.wrap(payload), 0L)) Whole(payload) else Corrupt
          }
        } else verifyWhole(channel, secret, name, blockLen) match {
          case Some(payload) =>
            if (same) remember(memoKey, stamp(before))
            Whole(payload)
          case None => Corrupt
        }
      // A file replaced between the two looks is not the one described: a miss, not deleted.
      if (outcome == Corrupt && !same) Absent else outcome
    } finally channel.close()
    if (result == Corrupt) discardCorrupt(file, memoKey, before.fileKey())
    result
  }

  /** The payload of the open block file if it is `blockLen` bytes and its trailer holds. */
  private def verifyWhole(channel: FileChannel, secret: Array[Byte], name: String,
                          blockLen: Int): Option[Array[Byte]] = {
    val payload = new Array[Byte](blockLen)
    if (!readFully(channel, ByteBuffer.wrap(payload), 0L)) return None
    val tail = ByteBuffer.allocate(TrailerBytes + 1) // one more byte: a file that grew
    while (tail.hasRemaining && channel.read(tail, blockLen.toLong + tail.position()) >= 0) ()
    if (tail.position() != TrailerBytes) return None
    val trailer = java.util.Arrays.copyOf(tail.array(), TrailerBytes)
    if (!BlockEntry.check(secret, name, payload, trailer)) return None
    BlockCounts.add(BlockCounts.Verified)
    Some(payload)
  }

  private def remember(key: String, s: Stamp): Unit = {
    if (verified.size() >= MemoSize) verified.clear() // simple bound: re-verified on next read
    verified.put(key, s)
  }

  /** Delete a block file that failed verification, only if `path` still names the file that
   * was read (not a good one published since); counted. */
  private def discardCorrupt(file: Path, memoKey: String, fileKey: AnyRef): Unit = {
    BlockCounts.add(BlockCounts.Corrupt)
    verified.remove(memoKey)
    try {
      val now = attributes(file)
      if (now.exists(a => a.fileKey() == null || a.fileKey() == fileKey)) Files.deleteIfExists(file)
    } catch { case NonFatal(_) => () }
  }

  /** The verified payload of block `name` (exactly `blockLen` bytes), or None: absent (a miss),
   * or corrupt (deleted, counted in `jvm_blocks.corrupt`), or unreadable
   * (`jvm_blocks.read_errors`). */
  def read(dir: Path, secret: Array[Byte], name: String, blockLen: Int): Option[Array[Byte]] =
    if (!BlockEntry.isBlockName(name) || blockLen < 0) None
    else counted(open(dir, secret, name, blockLen, 0, null)) match {
      case Whole(payload) => Some(payload)
      case _ => None
    }

  /** Bytes `[offset, offset + length)` of the verified block `name` of `blockLen` bytes into
   * `dest` at `destOff`; false as [[read]] returns None. The first read of a file by this
   * JVM reads and verifies it whole; later ones read just the range. Throws
   * IllegalArgumentException for a range outside the block or `dest`. */
  def readRange(dir: Path, secret: Array[Byte], name: String, blockLen: Int, offset: Int,
                dest: Array[Byte], destOff: Int, length: Int): Boolean = {
    require(destOff >= 0 && length >= 0 && destOff.toLong + length <= dest.length,
      s"[$destOff, ${destOff.toLong + length}) outside a destination of ${dest.length} bytes")
    readRange(dir, secret, name, blockLen, offset, ByteBuffer.wrap(dest, destOff, length))
  }

  /** [[readRange]] of `dest.remaining()` bytes into `dest` (heap or direct), whose position
   * advances by that much on success (on failure its contents and position are undefined). */
  def readRange(dir: Path, secret: Array[Byte], name: String, blockLen: Int, offset: Int,
                dest: ByteBuffer): Boolean = {
    val length = dest.remaining()
    require(offset >= 0 && offset.toLong + length <= blockLen,
      s"range [$offset, ${offset.toLong + length}) outside a block of $blockLen bytes")
    if (!BlockEntry.isBlockName(name)) return false
    counted(open(dir, secret, name, blockLen, offset, dest)) match {
      case Whole(payload) =>
        dest.put(payload, offset, length)
        true
      case Ranged => true
      case _ => false
    }
  }

  /** `outcome`, counted; an I/O error (not a verdict on the file) is a read error. */
  private def counted(outcome: => Outcome): Outcome = {
    val o = try outcome catch { case NonFatal(_) => BlockCounts.add(BlockCounts.ReadErrors); Absent }
    o match {
      case Whole(_) | Ranged => BlockCounts.add(BlockCounts.Hits)
      case _ => BlockCounts.add(BlockCounts.Misses)
    }
    o
  }

  // --- writing ---------------------------------------------------------------------------

  /** Publish `payload[0, length)` as block `name`: temp file, then an atomic rename onto its
   * path. False (counted in `jvm_blocks.publish_errors`) on any failure; never throws. The
   * Python store learns of it through [[adopt]]. */
  def publish(dir: Path, secret: Array[Byte], name: String, payload: Array[Byte], length: Int,
              groupShared: Boolean): Boolean =
    attempt(BlockCounts.Published, BlockCounts.PublishErrors) {
      if (!BlockEntry.isBlockName(name) || length < 0 || length > payload.length || secret.length != SecretBytes)
        throw new IllegalArgumentException(s"not a block: $name ($length bytes)")
      publishFile(dir, groupShared, ByteBuffer.wrap(payload, 0, length),
        ByteBuffer.wrap(BlockEntry.trailer(secret, name, payload, length)))(_ => BlockEntry.path(dir, name))
    }

  /** Publish `<dir>/adopt/<pid>.<16 hex>.names` naming blocks this JVM published, for the
   * Python store to index. False (counted in `jvm_blocks.adopt_errors`) on any failure or a
   * name that is not a block's; never throws. No names: nothing written, true. */
  def adopt(dir: Path, names: Seq[String], groupShared: Boolean): Boolean =
    names.isEmpty || attempt(BlockCounts.AdoptFiles, BlockCounts.AdoptErrors) {
      if (!names.forall(BlockEntry.isBlockName)) throw new IllegalArgumentException("not a block name")
      publishFile(dir, groupShared, ByteBuffer.wrap(BlockEntry.namesText(names))) { tmp =>
        dir.resolve(AdoptDir).resolve(tmp.getFileName.toString.stripSuffix(TempSuffix) + NamesSuffix)
      }
    }

  /** `body`, counted in `done`; false, counted in `failed`, if it throws. */
  private def attempt(done: String, failed: String)(body: => Unit): Boolean =
    try {
      body
      BlockCounts.add(done)
      true
    } catch {
      case NonFatal(_) =>
        BlockCounts.add(failed)
        false
    }

  /** Write `chunks` to a new temp file `<dir>/tmp/<pid>.<16 hex>.part` and rename it onto
   * `target(temp file)` (its directory created); the temp file is removed on failure.
   * Throws what the write or the rename throws. The fragment cache's JVM writer publishes
   * its entries and names files this way too. */
  def publishFile(dir: Path, groupShared: Boolean, chunks: ByteBuffer*)(
      target: Path => Path): Unit = {
    makeDirs(dir.resolve(TmpDir), groupShared)
    val tmp = tempPath(dir)
    var moved = false
    try {
      writeNew(tmp, groupShared, chunks: _*)
      val file = target(tmp)
      makeDirs(file.getParent, groupShared)
      Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE)
      moved = true
    } finally if (!moved) deleteQuietly(tmp)
  }

  /** [[adopt]] for callers holding a Java list (py4j). */
  def adopt(dir: Path, names: java.util.List[String], groupShared: Boolean): Boolean =
    adopt(dir, names.asScala.toSeq, groupShared)

  /** The bound in bytes the Python store keeps the cache within (`<dir>/capacity`'s first
   * line), or None (no store has opened the directory, or the file is unreadable). */
  def capacity(dir: Path): Option[Long] = capacityAndHeld(dir)._1

  /** The bytes the Python store's index held at its last adoption (`<dir>/capacity`'s
   * second line), or None (not written yet, or unreadable). */
  def held(dir: Path): Option[Long] = capacityAndHeld(dir)._2

  /** [[capacity]] and [[held]] from one read of the file. */
  def capacityAndHeld(dir: Path): (Option[Long], Option[Long]) =
    try BlockEntry.capacityAndHeld(
      new String(Files.readAllBytes(dir.resolve(BlockEntry.CapacityFile)), US_ASCII))
    catch { case NonFatal(_) => (None, None) }

  /** Forget every verification (for tests: the next read of each file verifies it again). */
  def forgetVerified(): Unit = verified.clear()
}
