package raptorx.contract

import java.nio.charset.StandardCharsets.US_ASCII

import scala.jdk.CollectionConverters._
import scala.util.Try

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

/**
 * The JVM's half of raptorx_py's `jvm_contract/jvm_read_handoff.py`: which splits of a task
 * Spark's own Parquet or ORC reader reads here (`JvmFileRead`), and how (the mark's layout and
 * the plan's fields are spelled there). The mark is
 * `raptorx-parquet|<plan JSON in hex>|<one flag per split>|` in the task's pickled
 * partition; the JVM stamps `J` on each split it read.
 */
object JvmReadHandoff {
  val Marker = "raptorx-parquet|"
  val Unserved: Byte = '-'.toByte
  val Served: Byte = 'J'.toByte

  private val MarkerBytes = Marker.getBytes(US_ASCII)
  private val Bar = '|'.toByte
  private val Json = new ObjectMapper()

  /** One split the JVM reads: its file as Hadoop names it, its identity, block key (null:
   * never cached), byte range, partition values (canonical text, null for null), and
   * whether its rows need the scan's filters (false: no data predicate is left for it, and
   * its partition passed the partition filters at planning), and whether its rows are
   * stored as its fragment entry (`FragmentStores`), its partition's name (`k=v/...`;
   * null for an unpartitioned table), and its file's format ([[Parquet]] or [[Orc]]: its
   * partition's, the table's unless the metastore gives the partition its own). */
  final case class SplitPlan(path: String, size: Long, version: String, etag: String,
                             key: String, start: Long, length: Long,
                             partitionValues: IndexedSeq[String], filtered: Boolean,
                             store: Boolean, partition: String = null,
                             format: String = Parquet)

  /** The block cache as the settings spell its base directory (null: the tier is off). */
  final case class BlockCache(baseDir: String, blockSize: Int, groupShared: Boolean,
                              maxBytes: Long = 0L)

  /** What storing a fragment entry needs (null when the tier is off): the largest entry's
   * Arrow stream, its time to live (0: none), the cache's size bound, its modes. */
  final case class FragmentCache(maxEntryBytes: Long, ttlMillis: Long, maxBytes: Long,
                                 groupShared: Boolean)

  /** The executor JVM's ORC file tail cache: its bound in bytes and the time an entry lives
   * since it was last read (0: until evicted). */
  final case class OrcTailCache(maxBytes: Long, ttlMillis: Long)

  /** The executor JVM's file handle cache: the most handles it keeps idle and the time one
   * stays idle (0: until evicted). */
  final case class FileHandleCache(maxIdle: Int, ttlMillis: Long)

  /** The executor JVM's ORC stripe metadata cache: the bound in bytes and the time since
   * last read (0: until evicted) of its stripe footers and of its index streams. */
  final case class OrcStripeCache(footerBytes: Long, footerTtlMillis: Long, streamBytes: Long,
                                  streamTtlMillis: Long)

  /** `format`: the table's files' format ([[Parquet]] or [[Orc]]), which of Spark's readers
   * reads them; `formats`: every format of the scan's splits (a table whose partitions mix
   * formats needs both readers; a split says its own); `dataSchemaDdl`: the table's data
   * columns as Spark's DDL (null: not handed); `changedAdvice`: what to do about a
   * file that changed after planning, with
   * [[PartitionPlaceholder]] where a split's partition name goes (null: none handed). */
  final case class Plan(partitionKeys: IndexedSeq[String], cache: Option[BlockCache],
                        fragments: Option[FragmentCache], metricsDir: String,
                        hadoop: Map[String, String],
                        splits: IndexedSeq[Option[SplitPlan]], flagsAt: Int,
                        format: String = Parquet, changedAdvice: String = null,
                        orcTails: Option[OrcTailCache] = None,
                        fileHandles: Option[FileHandleCache] = None,
                        orcStripes: Option[OrcStripeCache] = None,
                        formats: Seq[String] = Seq(Parquet),
                        dataSchemaDdl: String = null) {
    /** The changed-file advice for `split`, as the Python reader words it. */
    def adviceFor(split: SplitPlan): String =
      if (changedAdvice == null) DefaultAdvice
      else changedAdvice.replace(PartitionPlaceholder,
        Option(split.partition).getOrElse("<its partition>"))
  }

  val Parquet = "PARQUET"
  val Orc = "ORC"
  val PartitionPlaceholder = "{partition}"
  private val DefaultAdvice = "Run the query again: an unsealed partition is listed again by " +
    "the next query. If it is sealed, its cached listing names the old version until it " +
    "expires (hive.file-status-cache-expire-time) or its metastore entry changes: a sealed " +
    "partition's files must not change; to change them: `raptorx partition unseal`, change " +
    "its files, then `raptorx partition seal`"

  /** A plan's Hadoop path as the user's URL names it: `s3a://b/k` -> `s3://b/k` (the inverse
   * of the Python half's `hadoop_path`). */
  def userUrl(path: String): String =
    if (path.startsWith("s3a://")) "s3://" + path.substring("s3a://".length) else path

  /** The plan in `bytes` (a pickled partition), or None without a well-formed mark. */
  def of(bytes: Array[Byte]): Option[Plan] = {
    val at = PickledMarks.indexOf(bytes, MarkerBytes)
    if (at < 0) return None
    val textAt = at + MarkerBytes.length
    val textEnd = bytes.indexOf(Bar, textAt)
    if (textEnd < 0) return None
    val flagsAt = textEnd + 1
    val flagsEnd = bytes.indexOf(Bar, flagsAt)
    if (flagsEnd < 0) return None
    PickledMarks.unhex(new String(bytes, textAt, textEnd - textAt, US_ASCII))
      .flatMap(text => Try(parse(text, flagsAt)).toOption)
      .filter(_.splits.length == flagsEnd - flagsAt)
  }

  /** `bytes` with the splits `served` stamped [[Served]]. */
  def stamp(bytes: Array[Byte], plan: Plan, served: collection.Set[Int]): Array[Byte] = {
    val out = bytes.clone()
    served.foreach(i => out(plan.flagsAt + i) = Served)
    out
  }

  private def parse(text: String, flagsAt: Int): Plan = {
    val node = Json.readTree(text)
    def str(n: JsonNode): String = if (n == null || n.isNull) null else n.asText()
    val cache = Option(node.get("cache")).filterNot(_.isNull).map { c =>
      BlockCache(c.get("dir").asText(), c.get("block_size").asInt(), c.get("group_shared").asBoolean(),
        Option(c.get("max_bytes")).map(_.asLong(0L)).getOrElse(0L))
    }
    val fragments = Option(node.get("fragments")).filterNot(_.isNull).map { f =>
      FragmentCache(f.get("max_entry_bytes").asLong(), f.get("ttl_ms").asLong(),
        f.get("max_bytes").asLong(), f.get("group_shared").asBoolean())
    }
    val hadoop = Option(node.get("hadoop")).map(_.properties().asScala.map { e =>
      e.getKey -> e.getValue.asText()
    }.toMap).getOrElse(Map.empty)
    def known(f: String): String = {
      require(f == Parquet || f == Orc, s"unknown file format $f")
      f
    }
    val format = known(Option(str(node.get("format"))).getOrElse(Parquet))
    val formats = Option(node.get("formats")).filterNot(_.isNull)
      .map(_.elements().asScala.map(f => known(f.asText())).toSeq).getOrElse(Seq(format))
    val splits = node.get("splits").elements().asScala.map { s =>
      if (s.isNull) None
      else Some(SplitPlan(s.get("path").asText(), s.get("size").asLong(), str(s.get("version")),
        str(s.get("etag")), str(s.get("key")), s.get("start").asLong(), s.get("length").asLong(),
        s.get("pv").elements().asScala.map(str).toIndexedSeq,
        Option(s.get("filter")).forall(_.asBoolean(true)),
        Option(s.get("store")).exists(_.asBoolean(false)), str(s.get("partition")),
        Option(str(s.get("format"))).map(known).getOrElse(format)))
    }.toIndexedSeq
    require(splits.flatten.forall(s => formats.contains(s.format)),
      "a split's format is not among the plan's formats")
    val orcTails = Option(node.get("orc_tail_cache")).filterNot(_.isNull).map { t =>
      OrcTailCache(t.get("max_bytes").asLong(), t.get("ttl_ms").asLong())
    }
    val fileHandles = Option(node.get("file_handles")).filterNot(_.isNull).map { h =>
      FileHandleCache(h.get("max_idle").asInt(), h.get("ttl_ms").asLong())
    }
    val orcStripes = Option(node.get("orc_stripe_cache")).filterNot(_.isNull).map { c =>
      OrcStripeCache(c.get("footer_max_bytes").asLong(), c.get("footer_ttl_ms").asLong(),
        c.get("stream_max_bytes").asLong(), c.get("stream_ttl_ms").asLong())
    }
    Plan(node.get("partition_keys").elements().asScala.map(_.asText()).toIndexedSeq, cache,
      fragments, str(node.get("metrics")), hadoop, splits, flagsAt, format,
      str(node.get("changed_advice")), orcTails, fileHandles, orcStripes, formats,
      str(node.get("data_schema")))
  }
}
