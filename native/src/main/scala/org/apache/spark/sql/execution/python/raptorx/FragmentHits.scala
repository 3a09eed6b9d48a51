package org.apache.spark.sql.execution.python.raptorx

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, NoSuchFileException, Path, Paths, StandardOpenOption}
import java.util.UUID

import scala.util.control.NonFatal

import org.apache.spark.SparkEnv
import org.apache.spark.sql.types.{DataType, StructType}
import org.apache.spark.sql.util.ArrowUtils

import raptorx.JvmCounts
import raptorx.contract.{CacheFiles, FragmentEntry, FragmentHandoff, PickledMarks}

/**
 * Fragment result cache hits served by the JVM. The formats are the contract's:
 * [[raptorx.contract.FragmentHandoff]] (the mark) and [[raptorx.contract.FragmentEntry]]
 * (the entry layout), mirroring raptorx_py's `jvm_contract/fragment_handoff.py` and
 * `cache/fragment_cache.py`.
 *
 * - The planner attaches to each task's pickled partition the ASCII mark
 *   `raptorx-fragments|<cache dir hex>|<metrics dir hex>|<key hex>,...|<flag per split>|`;
 *   `FragmentHandoff.of` finds it in the pickled bytes without unpickling them.
 * - For each key, [[FragmentHits.verified]] reads `<cache dir>/entries/<2 hex>/<key>.arrow`
 *   whole and checks it (`FragmentEntry.check`: its header's magic, format and expiry, and
 *   its HMAC-SHA256 keyed with `<cache dir>/cache.secret` over the header's first 16 bytes,
 *   the key and the Arrow stream). Anything else (absent, expired, torn, forged,
 *   unreadable, another schema) is left to Python, which counts it
 *   (`fragment_cache.misses`, `.corrupt`) and recomputes.
 * - [[SplitServingReader]] hands the verified entries' Arrow batches to Spark as
 *   `ColumnarBatch`es (the vectors Arrow Java read, no per-value copy; decimals as
 *   `LongDecimalColumnVector`), touches each served entry's mtime (its last use, which the
 *   cache's eviction honours), and when some splits were not served runs the Python reader
 *   afterwards with their flags still `-` and the served ones stamped `J` (same length: the
 *   pickle stays valid), so Python computes only the missing splits. A task whose splits all
 *   hit starts no Python worker.
 * - Entries the JVM writes itself (a split Spark's reader read, marked `store`) are built
 *   by [[FragmentEntryWriter]] and published by [[FragmentStores]] in this layout.
 * - Its counts are appended to `<metrics dir>/jvm-counters/<jvm>.tsv`, which raptorx_py's
 *   metrics sink folds in (the JVM has no SQLite driver).
 *
 * Limits: an entry is read into the heap whole (its MAC covers every byte) and then into
 * Arrow buffers; a task on a soft-affinity fallback host is not served here (those
 * entries are the preferred host's; a sibling executor on the preferred host is served).
 */
object FragmentHits {
  val JvmCountsDir = "jvm-counters"

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

  /** The cache's secret, or None (absent, unreadable, or not a secret). */
  def secret(dir: Path): Option[Array[Byte]] =
    try {
      val s = Files.readAllBytes(dir.resolve(CacheFiles.SecretFile))
      if (s.length == CacheFiles.SecretBytes) Some(s) else None
    } catch { case NonFatal(_) => None }

  /** The entry of `key` if it is present, unexpired and its MAC holds (its whole bytes;
   * the Arrow stream starts at `FragmentEntry.HeaderBytes`); None otherwise. */
  def verified(dir: Path, secret: Array[Byte], key: String, nowMillis: Long): Option[Array[Byte]] = {
    val keyBytes =
      if (key == FragmentHandoff.NoKey || key.length < 2) None else PickledMarks.unhexBytes(key)
    keyBytes.flatMap(k => read(dir, key).filter(FragmentEntry.check(_, secret, k, nowMillis)))
  }

  /** The bytes of the entry file of `key`, or None when there is none. */
  private def read(dir: Path, key: String): Option[Array[Byte]] =
    try Some(Files.readAllBytes(FragmentEntry.path(dir, key)))
    catch { case _: NoSuchFileException => None }

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
}
