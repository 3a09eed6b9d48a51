package raptorx

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}
import java.nio.file.attribute.BasicFileAttributes
import java.util.concurrent.TimeUnit
import java.util.{Map => JMap}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.codahale.metrics.Gauge

import org.apache.spark.SparkContext
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, PluginContext, SparkPlugin}
import org.apache.spark.sql.execution.python.raptorx.FragmentHits

import raptorx.contract.Protocol

/**
 * raptorx's counters and cache sizes in Spark's metrics system (`spark.plugins=` the class
 * named by `Protocol.MetricsPluginClass`): whatever sink the application configured (JMX,
 * the Prometheus servlet, CSV, ...) shows them, per Spark process, as gauges named
 * `<tier>.<what>` under the plugin's source ([[CacheMetrics.CounterNames]],
 * [[CacheMetrics.GaugeNames]]).
 *
 * Where the figures come from, per Spark process (the driver; each executor):
 *  - the Python processes counting for it (its Python workers; on the driver also the
 *    driver's own Python process, which plans) publish their totals since they started to
 *    `<spark.raptorx.metrics.dir>/<application id>/<process>/<pid>-<nonce>.tsv`, one file each,
 *    replaced whole (`raptorx_py/metrics.py`, `publish_snapshot`): lines
 *    `c<TAB>name<TAB>total` (a counter) and `g<TAB>name<TAB>value` (a size, the same for every
 *    process of a node). The JVM has no SQLite driver in pyspark's jars, so these small text
 *    files, not the metrics sink's SQLite file, are what it reads;
 *  - the JVM's own counts (the fragment hits its columnar reader serves, [[JvmCounts]]).
 * A counter is the sum over the files plus the JVM's count; a size is the newest file's.
 * The files are read again when one of them changed since the last reading.
 *
 * In local mode the executor is the driver: only the driver's component registers metrics.
 * The driver removes `<dir>/<application id>` when the application stops, each executor its
 * own `<process>` directory.
 */
class CacheMetricsPlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = new DriverPlugin {
    private var published: Option[Path] = None

    override def init(sc: SparkContext, ctx: PluginContext): JMap[String, String] =
      JMap.of[String, String]()

    override def registerMetrics(appId: String, ctx: PluginContext): Unit = {
      published = CacheMetrics.register(ctx, appId, CacheMetrics.DriverProcess)
    }

    override def shutdown(): Unit = published.foreach(p => CacheMetrics.remove(p.getParent))
  }

  override def executorPlugin(): ExecutorPlugin = new ExecutorPlugin {
    private var published: Option[Path] = None

    override def init(ctx: PluginContext, extraConf: JMap[String, String]): Unit = {
      // local mode: the driver's component reports this JVM already
      if (ctx.executorID() != CacheMetrics.DriverProcess) {
        published = CacheMetrics.register(ctx, ctx.conf().getAppId,
          CacheMetrics.processName(ctx.executorID()))
      }
    }

    override def shutdown(): Unit = published.foreach(CacheMetrics.remove)
  }
}

object CacheMetrics {
  val DriverProcess = "driver"

  /** Totals since each process started, summed over a Spark process's Python workers (and
   * the JVM's own where it counts too). Each is a row of docs/architecture.md's counter
   * table; `tests/unit/test_spark_metrics.py` reads this list as text. */
  val CounterNames: Seq[String] = Seq(
    "metastore.round_trips",
    "metastore_cache.table_hits",
    "metastore_cache.table_misses",
    "metastore_cache.partition_hits",
    "metastore_cache.partition_misses",
    "planning.scans",
    "planner.partitions_total",
    "planner.partitions_pruned",
    "planner.splits",
    "storage.listings",
    "listing_cache.hits",
    "listing_cache.misses",
    "listing_cache.evictions",
    "listing_cache.invalidations",
    "footer_cache.hits_memory",
    "footer_cache.hits_disk",
    "footer_cache.misses",
    "footer_cache.evictions",
    "block_cache.hits",
    "block_cache.misses",
    "block_cache.remote_requests",
    "block_cache.bytes_from_cache",
    "block_cache.bytes_from_remote",
    "block_cache.evictions",
    "block_cache.corrupt_blocks",
    "fragment_cache.hits",
    "fragment_cache.jvm_hits",
    "fragment_cache.misses",
    "fragment_cache.stores",
    "fragment_cache.bytes_stored",
    "fragment_cache.evicted",
    "fragment_cache.expired",
    "fragment_cache.corrupt",
    "fragment_cache.errors",
    "reader.files_opened",
    "reader.bytes_read",
    "reader.rows_read",
    "reader.rows_to_spark",
    "reader.fragments_computed",
    "reader.python_tasks",
    "reader.python_worker_starts",
    "affinity.preferred",
    "affinity.fallback"
  )

  /** Sizes of the node's disk tiers, as the newest snapshot of the node saw them. */
  val GaugeNames: Seq[String] = Seq(
    "fragment_cache.size_bytes",
    "fragment_cache.entries",
    "block_cache.size_bytes"
  )

  /** The directory name of an executor's snapshots, as `raptorx_py.metrics` names it. */
  def processName(executorId: String): String =
    if (executorId == DriverProcess) DriverProcess else s"executor-$executorId"

  /** Register every metric of this Spark process on `ctx`'s registry; the directory its
   * Python processes publish to, if it could be resolved. */
  def register(ctx: PluginContext, appId: String, process: String): Option[Path] = {
    val root = ctx.conf().get(Protocol.MetricsDirConf, Protocol.MetricsDirDefault)
    val dir = try Some(FragmentHits.resolve(root).resolve(appId).resolve(process)) catch {
      case NonFatal(_) => None
    }
    // Made here, removed at shutdown: Python publishes only into a directory that exists, so
    // a publish after the application stopped (a timer, the process's exit) leaves nothing.
    dir.foreach(d => try Files.createDirectories(d) catch { case NonFatal(_) => () })
    val snapshots = new Snapshots(dir)
    val registry = ctx.metricRegistry()
    CounterNames.foreach { name =>
      registry.register(name, new Gauge[Long] {
        override def getValue: Long = snapshots.read().counter(name) + JvmCounts.get(name)
      })
    }
    GaugeNames.foreach { name =>
      registry.register(name, new Gauge[Long] {
        override def getValue: Long = snapshots.read().gauge(name)
      })
    }
    dir
  }

  /** Best effort: `dir` and what is in it. */
  def remove(dir: Path): Unit =
    try {
      if (Files.isDirectory(dir)) {
        val paths = Files.walk(dir)
        try paths.iterator().asScala.toSeq.reverse.foreach(p => Files.deleteIfExists(p))
        finally paths.close()
      }
    } catch { case NonFatal(_) => () }

  /** What a Spark process's snapshot files say, summed. */
  final case class Totals(counters: Map[String, Long], gauges: Map[String, Long]) {
    def counter(name: String): Long = counters.getOrElse(name, 0L)
    def gauge(name: String): Long = gauges.getOrElse(name, 0L)
  }

  /** The snapshot files of one directory, read again when one of them changed (each is
   * replaced whole, so a new file key or modification time), and only then. */
  final class Snapshots(dir: Option[Path]) {
    private var seen: Seq[(String, AnyRef, Long)] = Seq.empty
    private var totals = Totals(Map.empty, Map.empty)

    def read(): Totals = synchronized {
      dir.foreach { d =>
        val now = stamps(d)
        if (now != seen) {
          totals = load(d)
          seen = now
        }
      }
      totals
    }
  }

  private def snapshotFiles(dir: Path): Seq[Path] =
    try {
      val list = Files.list(dir)
      try list.iterator().asScala.filter(_.getFileName.toString.endsWith(Protocol.SnapshotSuffix))
        .toSeq.sortBy(_.getFileName.toString)
      finally list.close()
    } catch { case NonFatal(_) => Seq.empty } // none yet: nothing counted

  /** Each snapshot file's name, file key (its inode) and modification time. */
  private def stamps(dir: Path): Seq[(String, AnyRef, Long)] =
    snapshotFiles(dir).flatMap { file =>
      try {
        val a = Files.readAttributes(file, classOf[BasicFileAttributes])
        Some((file.getFileName.toString, a.fileKey(), a.lastModifiedTime().to(TimeUnit.NANOSECONDS)))
      } catch { case NonFatal(_) => None }
    }

  /** Sum every `*.tsv` of `dir`: counters added, each size from the newest file holding it.
   * A file being replaced is read whole, old or new (`os.replace`); an unreadable one is
   * skipped. */
  def load(dir: Path): Totals = {
    val files = snapshotFiles(dir)
    val counters = scala.collection.mutable.Map.empty[String, Long].withDefaultValue(0L)
    val gauges = scala.collection.mutable.Map.empty[String, (Long, Long)] // name -> (mtime, value)
    files.foreach { file =>
      try {
        val mtime = Files.getLastModifiedTime(file).toMillis
        new String(Files.readAllBytes(file), UTF_8).split("\n").foreach { line =>
          line.split("\t") match {
            case Array(kind, name, value) if value.nonEmpty && value.forall(_.isDigit) =>
              if (kind == Protocol.SnapshotCounter) counters(name) += value.toLong
              else if (kind == Protocol.SnapshotGauge &&
                gauges.get(name).forall(_._1 <= mtime)) gauges(name) = (mtime, value.toLong)
            case _ => ()
          }
        }
      } catch { case NonFatal(_) => () }
    }
    Totals(counters.toMap, gauges.map { case (k, (_, v)) => k -> v }.toMap)
  }
}
