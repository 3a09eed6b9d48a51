package raptorx.contract

import org.apache.spark.sql.types.{MetadataBuilder, StructType}

/**
 * The query's token on a scan's schema, the JVM's half of raptorx_py's
 * `datasource/planning/query_snapshots.py`: every scan planned for one query carries the
 * same token (made per query by `raptorx.QueryTokens`), so that the Python planning side
 * takes ONE snapshot per query, not one per scan.
 *
 * The token travels in the metadata of the first field of the schema the Python reader is
 * planned with ([[TokenKey]], [[tag]]); a pushed filter cannot carry it (pyspark serializes
 * a filter only for a column of that schema, with a value of the column's type). A scan of
 * no column (`count(*)`) carries none. What Spark is told the scan reads is the schema
 * without it ([[untag]]).
 */
object QueryToken {
  /** `Protocol.QueryTokenKey` (Python: `jvm_contract.protocol.QUERY_TOKEN_KEY`). */
  val TokenKey: String = Protocol.QueryTokenKey

  /** `schema` with `token` on its first field; `schema` itself without a token or a field. */
  def tag(schema: StructType, token: Option[String]): StructType = token match {
    case Some(t) if schema.nonEmpty =>
      val first = schema.fields.head
      val meta = new MetadataBuilder().withMetadata(first.metadata).putString(TokenKey, t).build()
      StructType(first.copy(metadata = meta) +: schema.fields.tail)
    case _ => schema
  }

  /** `schema` without the token (what Spark is told the scan reads). */
  def untag(schema: StructType): StructType = StructType(schema.fields.map { f =>
    if (!f.metadata.contains(TokenKey)) f
    else f.copy(metadata = new MetadataBuilder().withMetadata(f.metadata).remove(TokenKey).build())
  })
}
