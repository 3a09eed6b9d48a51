package raptorx.contract

import java.util

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.connector.catalog.TableCatalog
import org.apache.spark.sql.types.{MetadataBuilder, StructType}

/**
 * What the catalog shows of a table, which the Python source's `schema()` puts on the
 * schema's first field ([[Protocol.TableDescriptionKey]], JSON: partition keys, table type,
 * location); [[TableDescription.split]] takes it out, so no schema shows it.
 */
case class TableDescription(partitionKeys: Seq[String], properties: util.Map[String, String])

object TableDescription {
  private val Json = new ObjectMapper()
  val Empty: TableDescription = TableDescription(Nil, util.Collections.emptyMap())

  def split(schema: StructType): (StructType, TableDescription) = {
    if (schema.isEmpty || !schema.head.metadata.contains(Protocol.TableDescriptionKey)) {
      return (schema, Empty)
    }
    val meta = schema.head.metadata
    val node = Json.readTree(meta.getString(Protocol.TableDescriptionKey))
    val keys = node.path("partition_keys").elements().asScala.map(_.asText()).toSeq
    val properties = new util.HashMap[String, String]()
    properties.put(TableCatalog.PROP_PROVIDER, Protocol.PublicName)
    val location = node.path("location").asText("")
    if (location.nonEmpty) properties.put(TableCatalog.PROP_LOCATION, location)
    // DESCRIBE EXTENDED's Type is EXTERNAL when the property is there at all, else MANAGED.
    if (node.path("table_type").asText("") == "EXTERNAL_TABLE") {
      properties.put(TableCatalog.PROP_EXTERNAL, "true")
    }
    val clean = new MetadataBuilder().withMetadata(meta).remove(Protocol.TableDescriptionKey)
      .build()
    (StructType(schema.head.copy(metadata = clean) +: schema.tail),
      TableDescription(keys, properties))
  }
}
