package raptorx.contract

import java.nio.charset.StandardCharsets.US_ASCII

/*
 * What a scan reports, the JVM's half of raptorx_py's `jvm_contract/scan_report.py`: the
 * plan mark in its first pickled partition ([[PlanReport]]) and the file a Python reader
 * writes its task's counts to ([[TaskCountsFile]]). What the JVM makes of them for Spark's
 * SQL metrics and `EXPLAIN` is `ScanReport` (`org.apache.spark.sql.execution.python.raptorx`).
 */

/**
 * A scan's plan summary, from the plan mark raptorx_py puts in its first pickled partition
 * (`raptorx-plan|<hex of TSV>|`): the table, its partition keys, the snapshot, the tiers on,
 * and the counts of the scan's planning. Empty when no partition carries a mark (a Python
 * source not behind this provider).
 */
final case class PlanReport(fields: Map[String, String]) {
  import Protocol._

  def table: Option[String] = fields.get(PlanTableKey).filter(_.nonEmpty)
  def partitionKeys: Seq[String] =
    fields.get(PlanPartitionKeysKey).toSeq.flatMap(_.split(",")).filter(_.nonEmpty)
  def snapshot: Option[String] = fields.get(PlanSnapshotKey).filter(_.nonEmpty)
  def tiers: Seq[String] = fields.get(PlanTiersKey).toSeq.flatMap(_.split(",")).filter(_.nonEmpty)
  def counts: Map[String, Long] = fields.collect {
    case (k, v) if !k.startsWith("plan.") && v.nonEmpty && v.stripPrefix("-").forall(_.isDigit) =>
      k -> v.toLong
  }

  /** "3 of 83 (pruned: 80 by partition values, 0 by statistics); splits: 3, tasks: 2". */
  def partitionsText: Option[String] = counts.get("planner.partitions_total").map { total =>
    val byValue = counts.getOrElse("planner.partitions_pruned_by_value", 0L)
    val byStats = counts.getOrElse("planner.partitions_pruned_by_stats", 0L)
    val splits = counts.getOrElse("planner.splits", 0L)
    val tasks = counts.getOrElse("planner.tasks", 0L)
    s"${total - byValue - byStats} of $total (pruned: $byValue by partition values, " +
      s"$byStats by statistics); splits: $splits, tasks: $tasks"
  }
}

object PlanReport {
  private val Mark = Protocol.PlanMark.getBytes(US_ASCII)
  val Empty: PlanReport = PlanReport(Map.empty)

  /** The report in the first of `pickled` partitions carrying a mark, else [[Empty]]. */
  def of(pickled: Iterator[Array[Byte]]): PlanReport =
    pickled.map(parse).collectFirst { case Some(r) => r }.getOrElse(Empty)

  /** The report in one pickled partition, or None without a mark. */
  def parse(bytes: Array[Byte]): Option[PlanReport] = {
    val at = PickledMarks.indexOf(bytes, Mark)
    if (at < 0) return None
    val start = at + Mark.length
    val end = bytes.indexOf('|'.toByte, start)
    if (end < 0) return None
    PickledMarks.unhex(new String(bytes, start, end - start, US_ASCII)).map { text =>
      val lines = text.split("\n").iterator.flatMap { line =>
        line.split("\t", 2) match {
          case Array(k, v) => Some(k -> v)
          case _ => None
        }
      }
      PlanReport(lines.toMap)
    }
  }
}

/**
 * The file a Python reader writes its task's counts to: `<Spark's files root>/` +
 * [[Protocol.TaskCountsDir]] + `/<task attempt id>.tsv`, `<name>\t<value>` lines.
 */
object TaskCountsFile {
  /** The file's path under Spark's files root. */
  def path(root: java.nio.file.Path, taskAttemptId: Long): java.nio.file.Path =
    root.resolve(Protocol.TaskCountsDir).resolve(s"$taskAttemptId.tsv")

  /** The counts in a task counts file's `text` (a malformed line is skipped; a name twice
   * is summed). */
  def parse(text: String): Map[String, Long] =
    text.split("\n").iterator.flatMap { line =>
      line.split("\t") match {
        case Array(k, v) if v.nonEmpty && v.stripPrefix("-").forall(_.isDigit) => Some(k -> v.toLong)
        case _ => None
      }
    }.toSeq.groupMapReduce(_._1)(_._2)(_ + _)
}
