package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.connector.metric.CustomMetric
import org.apache.spark.util.Utils

/** Milliseconds summed, shown as a duration ("12 ms"). */
class RaptorxMillisMetric(override val name: String, override val description: String)
    extends CustomMetric {
  def this() = this(null, null)
  override def aggregateTaskMetrics(taskMetrics: Array[Long]): String =
    Utils.msDurationToString(taskMetrics.filter(_ >= 0).sum)
}
