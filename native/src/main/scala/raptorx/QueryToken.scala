package raptorx

import java.util.{Collections, UUID, WeakHashMap}

import org.apache.spark.sql.catalyst.QueryPlanningTracker
import org.apache.spark.sql.types.{MetadataBuilder, StructType}

import raptorx.contract.Protocol

/**
 * A token shared by every scan planned for one query, so that the Python planning side takes
 * ONE snapshot per query (Hive: one ValidTxnList per statement), not one per scan
 * (`raptorx_py/datasource/query_snapshots.py`).
 *
 * What is really shared per query in Spark 4.x: a `QueryExecution` owns one
 * `QueryPlanningTracker` and installs it as a thread-local (`QueryPlanningTracker.withTracker`)
 * while its analyzer and optimizer run (`RuleExecutor.executeAndTrack`), which is where
 * `V2ScanRelationPushDown` calls `build()` for every scan of the query, scalar subqueries
 * included. Each tracker gets a random token, held in a weak map so it goes with its query.
 * Outside a tracked optimization (no tracker) there is no token and a scan takes its own
 * snapshot, as before.
 *
 * The token travels in the metadata of the first field of the schema the Python reader is
 * planned with (`TokenKey`); a pushed filter cannot carry it (pyspark serializes a filter
 * only for a column of that schema, with a value of the column's type). A scan of no column
 * (`count(*)`) carries none. [[ArrowColumnarScan]] reports the schema without it.
 */
object QueryToken {
  /** `Protocol.QueryTokenKey` (Python: `jvm_protocol.QUERY_TOKEN_KEY`). */
  val TokenKey: String = Protocol.QueryTokenKey

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
  def tag(schema: StructType): StructType = current() match {
    case Some(token) if schema.nonEmpty =>
      val first = schema.fields.head
      val meta = new MetadataBuilder().withMetadata(first.metadata).putString(TokenKey, token).build()
      StructType(first.copy(metadata = meta) +: schema.fields.tail)
    case _ => schema
  }

  /** `schema` without the token (what Spark is told the scan reads). */
  def untag(schema: StructType): StructType = StructType(schema.fields.map { f =>
    if (!f.metadata.contains(TokenKey)) f
    else f.copy(metadata = new MetadataBuilder().withMetadata(f.metadata).remove(TokenKey).build())
  })
}
