package raptorx

import org.apache.spark.sql.connector.read.Scan
import org.apache.spark.sql.execution.python.raptorx.{ArrowColumnarScan, ScanFacts, ScanIdentity}
import org.apache.spark.sql.types.StructType

/**
 * The scan of a pushed partial aggregation: per split, the partial rows, computed in the JVM
 * over Spark's reader's batches of the aggregation's input columns ([[SplitAggregation]]),
 * or by the Python reader for the splits the planner left to it. Its schema is the partial
 * schema (without the aggregation it carried to Python), its size unknown, and its `EXPLAIN` names what was pushed (`PushedAggregates`,
 * `PushedGroupByExpressions`) with the rest of the scan's facts (`ScanReport.metadata`).
 */
class AggregatedScan(python: Scan, partial: PartialAggregation, facts: ScanFacts,
    identity: Option[ScanIdentity] = None)
    extends ArrowColumnarScan(python, None,
      Some(facts.copy(aggregation = Some((partial.aggregatesText, partial.groupByText)))),
      identity) {
  override def readSchema(): StructType = partial.partialSchema
  override protected def jvmReadSchema: StructType = partial.inputSchema
  override protected def jvmAggregation: Option[SplitAggregation] = Some(partial.splitAggregation)
}
