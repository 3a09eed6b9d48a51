package org.apache.spark.sql.execution.python.raptorx

import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}
import java.nio.file.{Files, NoSuchFileException, Path, Paths, StandardOpenOption}
import java.security.MessageDigest
import java.util.UUID
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec

import scala.collection.mutable
import scala.util.control.NonFatal

import org.apache.spark.SparkEnv
import org.apache.spark.sql.types.{DataType, StructType}
import org.apache.spark.sql.util.ArrowUtils

import raptorx.JvmCounts
import raptorx.contract.PickledMarks

/**
 * Fragment result cache hits served by the JVM: the JVM's half of raptorx_py's
 * `datasource.fragment_handoff` (the mark's layout) and `cache.fragment_cache` (the entry
 * layout). The constants below are spelled once here and once there.
 *
 * - The planner attaches to each task's pickled partition the ASCII mark
 *   `raptorx-fragments|<cache dir hex>|<metrics dir hex>|<key hex>,...|<flag per split>|`;
 *   [[FragmentHits.handoff]] finds it in the pickled bytes without unpickling them.
 * - For each key, [[FragmentHits.verified]] reads `<cache dir>/entries/<2 hex>/<key>.arrow`
 *   whole, checks its header (magic, format, expiry) and its HMAC-SHA256 keyed with
 *   `<cache dir>/cache.secret` over the header's first 16 bytes, the key and the Arrow
 *   stream. Anything else (absent, expired, torn, forged, unreadable, another schema) is
 *   left to Python, which counts it (`fragment_cache.misses`, `.corrupt`) and recomputes.
 * - [[SplitServingReader]] hands the verified entries' Arrow batches to Spark as
 *   `ColumnarBatch`es (the vectors Arrow Java read, no per-value copy; decimals as
 *   `LongDecimalColumnVector`), touches each served entry's mtime (its last use, which the
 *   cache's eviction honours), and when some splits were not served runs the Python reader
 *   afterwards with their flags still `-` and the served ones stamped `J` (same length: the
 *   pickle stays valid), so Python computes only the missing splits. A task whose splits all
 *   hit starts no Python worker.
 * - Entries the JVM writes itself (a split Spark's reader read, marked `store`) are built
 *   by [[FragmentEntryWriter]] and published by [[FragmentStores]] in this layout, with
 *   [[entryMac]].
 * - Its counts are appended to `<metrics dir>/jvm-counters/<jvm>.tsv`, which raptorx_py's
 *   metrics sink folds in (the JVM has no SQLite driver).
 *
 * Limits: an entry is read into the heap whole (its MAC covers every byte) and then into
 * Arrow buffers; a task on a soft-affinity fallback host is not served here (those
 * entries are the preferred host's; a sibling executor on the preferred host is served).
 */
object FragmentHits {
  val Marker = "raptorx-fragments|"
  val NoKey = "-"
  val Unserved: Byte = '-'.toByte
  val Served: Byte = 'J'.toByte

  val EntryMagic = "RXF1"
  /** 2: the Arrow stream's buffers may be compressed (LZ4 frame or ZSTD, as each record
   * batch's `BodyCompression` says; read with arrow-compression's codecs). */
  val EntryFormat = 2
  val PrefixBytes = 16
  val MacBytes = 32
  val HeaderBytes: Int = PrefixBytes + MacBytes
  val EntriesDir = "entries"
  val EntrySuffix = ".arrow"
  val SecretFile = "cache.secret"
  val SecretBytes = 32
  val JvmCountsDir = "jvm-counters"

  private val MarkerBytes = Marker.getBytes(US_ASCII)
  private val Bar = '|'.toByte

  /** A task's hand-off: the directories as given, the keys in hex (or [[NoKey]]), and where
   * the flags start in the pickled bytes. */
  final case class Handoff(cacheDir: String, metricsDir: String, keys: IndexedSeq[String],
                           flagsAt: Int)

  def handoff(bytes: Array[Byte]): Option[Handoff] = {
    val at = PickledMarks.indexOf(bytes, MarkerBytes)
    if (at < 0) return None
    var pos = at + MarkerBytes.length
    val fields = mutable.ArrayBuffer.empty[(Int, Int)]
    while (fields.length < 4) {
      val end = bytes.indexOf(Bar, pos)
      if (end < 0) return None
      fields += ((pos, end))
      pos = end + 1
    }
    def text(i: Int): String = new String(bytes, fields(i)._1, fields(i)._2 - fields(i)._1, US_ASCII)
    val keys = text(2).split(",").toIndexedSeq
    val (flagsAt, flagsEnd) = fields(3)
    if (flagsEnd - flagsAt != keys.length) return None
    for {
      cache <- PickledMarks.unhex(text(0))
      metrics <- PickledMarks.unhex(text(1))
    } yield Handoff(cache, metrics, keys, flagsAt)
  }

  /** `bytes` with the flags of the splits `served` stamped [[Served]]. */
  def stamp(bytes: Array[Byte], handoff: Handoff, served: collection.Set[Int]): Array[Byte] = {
    val out = bytes.clone()
    served.foreach(i => out(handoff.flagsAt + i) = Served)
    out
  }

  /** The cache directory as raptorx_py resolves it in this process's working directory:
   * `~` expanded (from `HOME`, as Python's `expanduser`), relative to the working directory. */
  def resolve(dir: String): Path = {
    val home = Option(System.getenv("HOME")).getOrElse(System.getProperty("user.home"))
    val expanded =
      if (dir == "~") home
      else if (dir.startsWith("~/")) home + dir.substring(1)
      else dir
    Paths.get(expanded).toAbsolutePath.normalize()
  }

  def entryPath(dir: Path, key: String): Path =
    dir.resolve(EntriesDir).resolve(key.substring(0, 2)).resolve(key + EntrySuffix)

  /** The cache's secret, or None (absent, unreadable, or not a secret). */
  def secret(dir: Path): Option[Array[Byte]] =
    try {
      val s = Files.readAllBytes(dir.resolve(SecretFile))
      if (s.length == SecretBytes) Some(s) else None
    } catch { case NonFatal(_) => None }

  /** The entry of `key` if it is present, unexpired and its MAC holds (its whole bytes;
   * the Arrow stream starts at [[HeaderBytes]]); None otherwise. */
  def verified(dir: Path, secret: Array[Byte], key: String, nowMillis: Long): Option[Array[Byte]] = {
    val keyBytes = if (key == NoKey || key.length < 2) None else PickledMarks.unhexBytes(key)
    keyBytes.flatMap(k => verifiedEntry(dir, secret, key, k, nowMillis))
  }

  private def verifiedEntry(dir: Path, secret: Array[Byte], key: String, keyBytes: Array[Byte],
                            nowMillis: Long): Option[Array[Byte]] = {
    val data = try Files.readAllBytes(entryPath(dir, key)) catch {
      case _: NoSuchFileException => return None
    }
    if (data.length < HeaderBytes) return None
    if (new String(data, 0, 4, US_ASCII) != EntryMagic || data(4) != EntryFormat) return None
    val mac = entryMac(secret, java.util.Arrays.copyOfRange(data, 0, PrefixBytes), keyBytes,
      data, HeaderBytes, data.length - HeaderBytes)
    val expected = java.util.Arrays.copyOfRange(data, PrefixBytes, HeaderBytes)
    if (!MessageDigest.isEqual(mac, expected)) return None
    val expires = littleEndianLong(data, 8)
    if (expires != 0 && nowMillis > expires) return None
    Some(data)
  }

  /** An entry's MAC: HMAC-SHA256 keyed with the cache's secret over the header's first
   * [[PrefixBytes]] bytes, the key's length (u32, little-endian), the key and the Arrow
   * stream `stream[at, at + length)` (raptorx_py's `fragment_cache.entry_mac`). */
  def entryMac(secret: Array[Byte], prefix: Array[Byte], keyBytes: Array[Byte],
               stream: Array[Byte], at: Int, length: Int): Array[Byte] = {
    val mac = Mac.getInstance("HmacSHA256")
    mac.init(new SecretKeySpec(secret, "HmacSHA256"))
    mac.update(prefix, 0, PrefixBytes)
    mac.update(littleEndianInt(keyBytes.length))
    mac.update(keyBytes)
    mac.update(stream, at, length)
    mac.doFinal()
  }

  /** Whether an entry's Arrow schema reads as `schema`: the same columns in the same order
   * (names compared case-insensitively, as Spark resolves them) of the same types
   * (nullability aside). The key already names the output schema; this keeps a column
   * from ever being served in another's place. */
  def sameTypes(entry: org.apache.arrow.vector.types.pojo.Schema, schema: StructType): Boolean = {
    val read = ArrowUtils.fromArrowSchema(entry)
    read.length == schema.length && read.fields.zip(schema.fields).forall { case (a, b) =>
      a.name.equalsIgnoreCase(b.name) &&
        DataType.equalsStructurally(a.dataType, b.dataType, ignoreNullability = true)
    }
  }

  /** The Spark process whose counts these are, named as raptorx_py's `process_source`. */
  def source(): String = {
    val env = SparkEnv.get
    if (env == null || env.executorId == "driver") "driver" else s"executor ${env.executorId}"
  }

  private lazy val countsFile = s"${UUID.randomUUID()}.tsv"

  /** Add `counts` to this JVM's own ([[raptorx.JvmCounts]], which Spark's metrics system
   * shows through `raptorx.CacheMetricsPlugin`) and append the non-zero ones to this JVM's
   * counts file under `metricsDir`; a failure loses the counts, never the query. */
  def appendCounts(metricsDir: String, counts: collection.Map[String, Long]): Unit = {
    val nonZero = counts.filter(_._2 != 0)
    nonZero.foreach { case (k, v) => JvmCounts.add(k, v) }
    if (metricsDir.isEmpty || nonZero.isEmpty) return
    val src = source()
    val text = nonZero.map { case (k, v) => s"$src\t$k\t$v\n" }.mkString
    try {
      val dir = resolve(metricsDir).resolve(JvmCountsDir)
      Files.createDirectories(dir)
      // Opened per append: a cleared sink (its files removed) gets a new file.
      Files.write(dir.resolve(countsFile), text.getBytes(UTF_8),
        StandardOpenOption.CREATE, StandardOpenOption.APPEND)
    } catch { case NonFatal(_) => () }
  }

  private def littleEndianInt(v: Int): Array[Byte] =
    Array(v.toByte, (v >>> 8).toByte, (v >>> 16).toByte, (v >>> 24).toByte)

  private def littleEndianLong(b: Array[Byte], at: Int): Long =
    (0 until 8).foldLeft(0L)((acc, i) => acc | ((b(at + i) & 0xffL) << (8 * i)))
}
