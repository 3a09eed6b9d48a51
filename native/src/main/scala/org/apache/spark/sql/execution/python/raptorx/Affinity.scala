package org.apache.spark.sql.execution.python.raptorx

import java.nio.charset.StandardCharsets.US_ASCII
import java.util

import org.apache.spark.SparkEnv
import org.apache.spark.sql.connector.read.InputPartition
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import raptorx.contract.PickledMarks

/**
 * Soft affinity, the JVM's part (raptorx_py's `scheduling.affinity` and
 * `datasource.placement` are the Python's).
 *
 * - Planning: [[Affinity.withExecutors]] hands the application's live executors (`host/id`,
 *   from the block manager master: the driver excluded, so none in local mode) to the Python
 *   scan as the read option `raptorx.executors`; the Python planner picks each file's
 *   executor by rendezvous hashing and marks each task's pickled partition with
 *   `raptorx-affinity|executor_<host>_<id>|-`.
 * - [[Affinity.placed]] finds that mark in the pickled bytes (no unpickling: a pickle keeps
 *   an ASCII string verbatim) and returns a partition whose `preferredLocations()` is that
 *   executor-level location, which Spark's locality scheduling (`spark.locality.wait`)
 *   honours.
 * - On the executor, [[Affinity.stamped]] overwrites the mark's last byte with `P` (this is
 *   the preferred executor), `H` (another executor of the preferred executor's host: caches
 *   live per node, so the host's caches are the file's) or `F` (another host: a fallback),
 *   same length, so the pickle stays valid and the Python reader knows whether to use and
 *   fill this node's caches. Spark's scheduler itself treats the preferred host as the next
 *   locality level (NODE_LOCAL) after the executor (PROCESS_LOCAL).
 *
 * Limits: a partition without the mark (soft affinity off, local mode) is left as it is. A
 * location's host is read as Spark's `TaskLocation` reads it (up to the first `_`).
 */
object Affinity {
  val ExecutorsOption: String = raptorx.contract.Protocol.ExecutorsOption
  private val Mark = raptorx.contract.Protocol.AffinityMark.getBytes(US_ASCII)
  private val Preferred = raptorx.contract.Protocol.AffinityPreferred.getBytes(US_ASCII)(0)
  private val PreferredHost = raptorx.contract.Protocol.AffinityPreferredHost.getBytes(US_ASCII)(0)
  private val Fallback = raptorx.contract.Protocol.AffinityFallback.getBytes(US_ASCII)(0)
  private val Bar = '|'.toByte

  /** `host/id` of each live executor, sorted; empty without a `SparkEnv` or executors. */
  def liveExecutors(): Seq[String] = {
    val env = SparkEnv.get
    if (env == null || env.blockManager == null) return Seq.empty
    env.blockManager.master.getMemoryStatus.keys.toSeq
      .filterNot(_.isDriver).map(id => s"${id.host}/${id.executorId}").distinct.sorted
  }

  /** `options` plus the live executors, or `options` itself (the same object) when there
   * are none, so that a local session plans exactly as before. */
  def withExecutors(options: CaseInsensitiveStringMap): CaseInsensitiveStringMap = {
    val executors = liveExecutors()
    if (executors.isEmpty) return options
    val merged = new util.HashMap[String, String](options.asCaseSensitiveMap())
    merged.put(ExecutorsOption, executors.mkString(","))
    new CaseInsensitiveStringMap(merged)
  }

  /** Where the mark's location starts and its closing bar is, if the bytes carry one. */
  private def find(bytes: Array[Byte]): Option[(Int, Int)] = {
    val at = PickledMarks.indexOf(bytes, Mark)
    if (at < 0) return None
    val start = at + Mark.length
    val end = bytes.indexOf(Bar, start)
    if (end > start && end + 1 < bytes.length) Some((start, end)) else None
  }

  def placed(partition: InputPartition): InputPartition = partition match {
    case p: PlacedPythonInputPartition => p
    case p: PythonInputPartition =>
      find(p.pickedPartition) match {
        case Some((start, end)) =>
          new PlacedPythonInputPartition(p.index, p.pickedPartition,
            new String(p.pickedPartition, start, end - start, US_ASCII))
        case None => p
      }
    case other => other
  }

  /** The counters raptorx_py's reader counts for the placement of a stamped partition
   * (`affinity.preferred` and `affinity.preferred.<location>`; `preferred_host`;
   * `fallback`), for a task the JVM serves whole without the Python reader, which would
   * have counted them; empty without a mark or before [[stamped]]. */
  def placementCounts(pickled: Array[Byte]): Seq[String] = find(pickled) match {
    case Some((start, end)) =>
      val location = new String(pickled, start, end - start, US_ASCII)
      val kind = pickled(end + 1) match {
        case Preferred => "preferred"
        case PreferredHost => "preferred_host"
        case Fallback => "fallback"
        case _ => return Seq.empty
      }
      Seq(s"affinity.$kind", s"affinity.$kind.$location")
    case None => Seq.empty
  }

  /** This executor's location, as the driver's [[liveExecutors]] names it. */
  def here(): String = {
    val env = SparkEnv.get
    s"executor_${env.blockManager.blockManagerId.host}_${env.executorId}"
  }

  /** The prefix every location of this executor's host starts with (`executor_<host>_`). */
  private def hereHost(): String =
    s"executor_${SparkEnv.get.blockManager.blockManagerId.host}_"

  /** Whether `location` is on this executor's host (this executor or a sibling). */
  private def onThisHost(location: String): Boolean = {
    val prefix = hereHost()
    // Spark's hosts have no `_`, so the rest is the executor id.
    location.startsWith(prefix) && !location.substring(prefix.length).contains('_')
  }

  /** Whether `partition` prefers another host than this one (a fallback run, which neither
   * reads nor fills this node's caches). */
  def ranAway(partition: InputPartition): Boolean = partition match {
    case p: PlacedPythonInputPartition => !onThisHost(p.location)
    case _ => false
  }

  def stamped(partition: InputPartition): InputPartition = partition match {
    case p: PlacedPythonInputPartition =>
      find(p.pickedPartition) match {
        case Some((_, end)) =>
          val bytes = p.pickedPartition.clone()
          bytes(end + 1) =
            if (p.location == here()) Preferred
            else if (onThisHost(p.location)) PreferredHost
            else Fallback
          PythonInputPartition(p.index, bytes)
        case None => p
      }
    case other => other
  }
}

/** A pickled Python partition that prefers the executor at `location`. */
class PlacedPythonInputPartition(index: Int, pickled: Array[Byte], val location: String)
    extends PythonInputPartition(index, pickled) {
  override def preferredLocations(): Array[String] = Array(location)
}
