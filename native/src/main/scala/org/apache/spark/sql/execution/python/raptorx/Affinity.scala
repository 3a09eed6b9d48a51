package org.apache.spark.sql.execution.python.raptorx

import java.util

import org.apache.spark.SparkEnv
import org.apache.spark.sql.connector.read.InputPartition
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import raptorx.contract.{Placement, Protocol}

/**
 * Soft affinity, the JVM's part (raptorx_py's `scheduling.affinity` and
 * `jvm_contract.placement` are the Python's; the strings are [[raptorx.contract.Placement]]).
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
  val ExecutorsOption: String = Protocol.ExecutorsOption

  /** `host/id` of each live executor, sorted; empty without a `SparkEnv` or executors. */
  def liveExecutors(): Seq[String] = {
    val env = SparkEnv.get
    if (env == null || env.blockManager == null) return Seq.empty
    Placement.executorsText(env.blockManager.master.getMemoryStatus.keys.toSeq
      .filterNot(_.isDriver).map(id => (id.host, id.executorId))).distinct.sorted
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

  def placed(partition: InputPartition): InputPartition = partition match {
    case p: PlacedPythonInputPartition => p
    case p: PythonInputPartition =>
      Placement.markedLocation(p.pickedPartition) match {
        case Some(location) => new PlacedPythonInputPartition(p.index, p.pickedPartition, location)
        case None => p
      }
    case other => other
  }

  /** The counters raptorx_py's reader counts for the placement of a stamped partition,
   * for a task the JVM serves whole without the Python reader, which would have counted
   * them (`Placement.counts`); empty without a mark or before [[stamped]]. */
  def placementCounts(pickled: Array[Byte]): Seq[String] = Placement.counts(pickled)

  /** This executor's location, as the driver's [[liveExecutors]] names it. */
  def here(): String = {
    val env = SparkEnv.get
    Placement.location(env.blockManager.blockManagerId.host, env.executorId)
  }

  /** Whether `location` is on this executor's host (this executor or a sibling). */
  private def onThisHost(location: String): Boolean =
    Placement.onHost(location, SparkEnv.get.blockManager.blockManagerId.host)

  /** Whether `partition` prefers another host than this one (a fallback run, which neither
   * reads nor fills this node's caches). */
  def ranAway(partition: InputPartition): Boolean = partition match {
    case p: PlacedPythonInputPartition => !onThisHost(p.location)
    case _ => false
  }

  def stamped(partition: InputPartition): InputPartition = partition match {
    case p: PlacedPythonInputPartition if Placement.find(p.pickedPartition).isDefined =>
      val flag =
        if (p.location == here()) Placement.Preferred
        else if (onThisHost(p.location)) Placement.PreferredHost
        else Placement.Fallback
      PythonInputPartition(p.index, Placement.stamp(p.pickedPartition, flag))
    case other => other
  }
}

/** A pickled Python partition that prefers the executor at `location`. */
class PlacedPythonInputPartition(index: Int, pickled: Array[Byte], val location: String)
    extends PythonInputPartition(index, pickled) {
  override def preferredLocations(): Array[String] = Array(location)
}
