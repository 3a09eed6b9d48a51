package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.connector.metric.CustomMetric

/** A count summed over tasks. A no-argument constructor: Spark's status listener makes one by
 * reflection to aggregate the values. */
class RaptorxCountMetric(override val name: String, override val description: String)
    extends CustomMetric {
  def this() = this(null, null)
  override def aggregateTaskMetrics(taskMetrics: Array[Long]): String =
    taskMetrics.filter(_ >= 0).sum.toString
}
