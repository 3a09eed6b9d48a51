package raptorx

import org.apache.spark.sql.connector.read.Scan
import org.apache.spark.sql.execution.python.raptorx.{ArrowColumnarScan, ScanFacts, ScanIdentity}
import org.apache.spark.sql.types.StructType

/**
 * The scan of a pushed partial aggregation: the columnar Python scan whose reader returns the
 * partial rows; its schema is the partial schema (without the aggregation it carried to
 * Python), its size unknown, and its `EXPLAIN` names what was pushed (`PushedAggregates`,
 * `PushedGroupByExpressions`) with the rest of the scan's facts (`ScanReport.metadata`).
 */
class AggregatedScan(python: Scan, partial: PartialAggregation, facts: ScanFacts,
    identity: Option[ScanIdentity] = None)
    extends ArrowColumnarScan(python, None,
      Some(facts.copy(aggregation = Some((partial.aggregatesText, partial.groupByText)))),
      identity) {
  override def readSchema(): StructType = partial.partialSchema
}
