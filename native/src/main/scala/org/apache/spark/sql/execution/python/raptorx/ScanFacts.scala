package org.apache.spark.sql.execution.python.raptorx

import org.apache.spark.sql.sources.Filter

/** What the scan builder knows of a scan for `EXPLAIN`: the table as loaded, the filters the
 * source evaluates and those left to Spark, a pushed aggregation (its aggregates and group-by
 * expressions as text), and how long planning took. */
final case class ScanFacts(
    table: String,
    pushedFilters: Seq[Filter] = Seq.empty,
    postScanFilters: Seq[Filter] = Seq.empty,
    aggregation: Option[(String, String)] = None,
    planningMillis: Long = 0L)
