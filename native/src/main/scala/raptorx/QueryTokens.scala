package raptorx

import java.util.{Collections, UUID, WeakHashMap}

import org.apache.spark.sql.catalyst.QueryPlanningTracker
import org.apache.spark.sql.types.StructType

import raptorx.contract.QueryToken

/**
 * A token shared by every scan planned for one query, so that the Python planning side takes
 * ONE snapshot per query (Hive: one ValidTxnList per statement), not one per scan
 * (`raptorx_py/datasource/planning/query_snapshots.py`). How it travels on the scan's
 * schema is the contract's [[raptorx.contract.QueryToken]].
 *
 * What is really shared per query in Spark 4.x: a `QueryExecution` owns one
 * `QueryPlanningTracker` and installs it as a thread-local (`QueryPlanningTracker.withTracker`)
 * while its analyzer and optimizer run (`RuleExecutor.executeAndTrack`), which is where
 * `V2ScanRelationPushDown` calls `build()` for every scan of the query, scalar subqueries
 * included. Each tracker gets a random token, held in a weak map so it goes with its query.
 * Outside a tracked optimization (no tracker) there is no token and a scan takes its own
 * snapshot, as before. `ArrowColumnarScan` reports the schema without it.
 */
object QueryTokens {
  private val tokens = Collections.synchronizedMap(new WeakHashMap[QueryPlanningTracker, String]())

  def current(): Option[String] = QueryPlanningTracker.get.map { tracker =>
    tokens.synchronized {
      var token = tokens.get(tracker)
      if (token == null) {
        token = UUID.randomUUID().toString
        tokens.put(tracker, token)
      }
      token
    }
  }

  /** `schema` with the query's token on its first field, when a query is being planned. */
  def tag(schema: StructType): StructType = QueryToken.tag(schema, current())
}
