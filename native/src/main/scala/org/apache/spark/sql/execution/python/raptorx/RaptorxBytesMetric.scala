package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.connector.metric.CustomMetric
import org.apache.spark.util.Utils

/** Bytes summed over tasks, shown as a size ("1.5 MiB"). */
class RaptorxBytesMetric(override val name: String, override val description: String)
    extends CustomMetric {
  def this() = this(null, null)
  override def aggregateTaskMetrics(taskMetrics: Array[Long]): String =
    Utils.bytesToString(taskMetrics.filter(_ >= 0).sum)
}
