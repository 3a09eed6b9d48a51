package raptorx.contract

import java.util.OptionalLong

import org.apache.spark.sql.connector.read.Statistics
import org.apache.spark.sql.types.{MetadataBuilder, StructType}

/**
 * A table's size, for Spark's join planning: without one, a DSv2 scan reports
 * `spark.sql.defaultSizeInBytes` (effectively infinite), so Spark never broadcasts even a
 * 25-row `nation` and shuffles both sides of every join instead.
 *
 * The Python source's `schema()` reports the metastore's `totalSize` and `numRows` (an
 * unpartitioned table's own, a partitioned table's summed over its partitions) in the
 * metadata of the schema's first field (the one thing its creation hands the JVM besides the
 * pickled source); [[TableStatistics.split]] takes them out, so Spark's and the user's schema
 * never show them. A scan's size is the table's, scaled by the width of the columns it reads
 * as Spark scales a projection of its own file relations. A partitioned table with a partition of unknown size
 * reports none (Spark's default: never broadcast).
 */
case class TableStatistics(bytes: Long, rows: Option[Long]) {
  def forColumns(read: StructType, table: StructType): Statistics = {
    // Spark's own rule for a projection of a file relation (`SizeInBytesOnlyStatsPlanVisitor`:
    // each row's columns' default sizes plus 8 bytes of row overhead), so that a scan's size,
    // and with it the choice of join, is the one Spark's Parquet reader would make.
    val size = math.max(1L, (bytes * ((read.defaultSize + 8).toDouble / (table.defaultSize + 8))).toLong)
    val rowCount = rows
    new Statistics {
      override def sizeInBytes(): OptionalLong = OptionalLong.of(size)
      override def numRows(): OptionalLong =
        rowCount.map(OptionalLong.of).getOrElse(OptionalLong.empty())
    }
  }
}

object TableStatistics {
  val BytesKey: String = Protocol.TableBytesKey
  val RowsKey: String = Protocol.TableRowsKey

  /** The schema without the statistics the Python source put in it, and those statistics. */
  def split(schema: StructType): (StructType, Option[TableStatistics]) = {
    if (schema.isEmpty) return (schema, None)
    val meta = schema.head.metadata
    val stats = if (meta.contains(BytesKey)) {
      Some(TableStatistics(meta.getLong(BytesKey),
        if (meta.contains(RowsKey)) Some(meta.getLong(RowsKey)) else None))
    } else None
    val clean = new MetadataBuilder().withMetadata(meta).remove(BytesKey).remove(RowsKey).build()
    (StructType(schema.head.copy(metadata = clean) +: schema.tail), stats)
  }
}
