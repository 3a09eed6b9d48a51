package raptorx

import java.util

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import org.apache.spark.sql.AnalysisException
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.{NoSuchNamespaceException, NoSuchTableException}
import org.apache.spark.sql.connector.catalog.{Column, Identifier, NamespaceChange, ProcedureCatalog, SupportsNamespaces, Table, TableCatalog, TableChange}
import org.apache.spark.sql.connector.catalog.procedures.{BoundProcedure, ProcedureParameter, UnboundProcedure}
import org.apache.spark.sql.connector.expressions.{Expressions, Transform}
import org.apache.spark.sql.connector.read.Scan
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceCreationResult
import org.apache.spark.sql.types.{StringType, StructType}
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import raptorx.contract.{Protocol, SourceHints, TableDescription, TableStatistics}


/**
 * `tiered_hive` tables by name in Spark SQL: a DSv2 catalog over the configured metastore, one
 * namespace per Hive database. `raptorx_py.register(spark)` sets
 * `spark.sql.catalog.<name>=raptorx.TieredHiveCatalog` (name `raptorx` unless told
 * otherwise), so `SELECT ... FROM raptorx.tpch.lineitem`, `SHOW NAMESPACES IN raptorx`,
 * `SHOW TABLES IN raptorx.tpch`, `DESCRIBE raptorx.tpch.lineitem`, `INSERT INTO` and
 * `INSERT OVERWRITE raptorx.db.t SELECT ...` work.
 *
 * Contract:
 *  - The table `loadTable` returns is the provider's: a [[TieredHiveTable]] made from the
 *    Python source created with the table's name as its `path`, exactly as
 *    `spark.read.format("tiered_hive").load("db.t")` makes it (one source creation: a
 *    callback into the application's planner, or a planning Python worker without one), so
 *    scans, pushdown, caches, snapshots and writes are the provider's, unchanged. It carries
 *    the table's name as its options (the scan and write options of a SQL statement are
 *    empty), reports the Hive partition keys as identity transforms (`DESCRIBE`; an `INSERT`
 *    hands them to the writer, which checks them) and `location`, `provider` and `external`
 *    as properties (`DESCRIBE EXTENDED`).
 *  - The metastore is read on the Python side only: namespaces and table lists are requests
 *    made as source creations (`raptorx_py/datasource/planning/catalog_requests.py`, the option
 *    [[Protocol.CatalogRequestOption]], the answer on the schema's one field). No metastore
 *    client runs in the JVM.
 *  - A missing namespace or table is Spark's [[NoSuchNamespaceException]] /
 *    [[NoSuchTableException]], naming what exists. (Spark's analyzer turns a missing table
 *    of a query into its own `TABLE_OR_VIEW_NOT_FOUND`, without our listing; `SHOW TABLES`,
 *    `DESCRIBE` of a namespace and direct calls keep it.)
 *  - The catalog's options (`spark.sql.catalog.<name>.<property>`) are property overrides
 *    for every table and request of this catalog (any property name, as a read option); the
 *    Python source is told which they are ([[Protocol.CatalogOptionsOption]]), so an error
 *    names `spark.sql.catalog.<name>` as where a bad one came from.
 *  - It needs the Python source `tiered_hive_python` registered in the session
 *    (`raptorx_py.register`: a pyspark driver, or a Spark Connect client of a server with the
 *    jar). Where none is (`spark-sql`, a Scala application), every call fails with an error
 *    saying so: there is no pure-JVM path, by design (the metastore, its cache and the
 *    planning are raptorx_py's).
 *  - Creating, altering, renaming and dropping tables and namespaces are refused, naming the
 *    way to do each (a `tiered_hive` write creates a managed table; `raptorx table register`
 *    an external one).
 *  - One procedure, Trino's `system.flush_metadata_cache(schema_name => ..., table_name =>
 *    ...)` ([[FlushMetadataCache]]): a catalog request that forgets cached metastore versions
 *    in the process that plans (`catalog_requests.py`).
 */
class TieredHiveCatalog extends TableCatalog with SupportsNamespaces with ProcedureCatalog {
  private var catalogName: String = TieredHiveCatalog.DefaultName
  private var catalogOptions: Map[String, String] = Map.empty

  override def initialize(name: String, options: CaseInsensitiveStringMap): Unit = {
    catalogName = name
    catalogOptions = options.asCaseSensitiveMap().asScala.toMap
  }

  override def name(): String = catalogName

  // -- namespaces ------------------------------------------------------------------------

  override def listNamespaces(): Array[Array[String]] =
    strings(ask("namespaces"), "namespaces").map(n => Array(n)).toArray

  override def listNamespaces(namespace: Array[String]): Array[Array[String]] =
    if (namespace.isEmpty) listNamespaces()
    else {
      loadNamespaceMetadata(namespace) // a missing one fails, naming those that exist
      Array.empty // a Hive database holds no namespaces
    }

  override def namespaceExists(namespace: Array[String]): Boolean =
    namespace.length == 1 && !ask("namespace", "namespace" -> namespace(0)).has("missing")

  override def loadNamespaceMetadata(namespace: Array[String]): util.Map[String, String] = {
    val answer = ask("namespace", "namespace" -> database(namespace))
    failIfMissing(answer, namespace, None)
    val location = answer.path("location").asText("")
    if (location.isEmpty) util.Collections.emptyMap()
    else util.Collections.singletonMap(SupportsNamespaces.PROP_LOCATION, location)
  }

  override def createNamespace(namespace: Array[String], metadata: util.Map[String, String]): Unit =
    throw refused("create namespaces", "a `tiered_hive` write creates its table's database")

  override def alterNamespace(namespace: Array[String], changes: NamespaceChange*): Unit =
    throw refused("alter namespaces", "the metastore's own tools do")

  override def dropNamespace(namespace: Array[String], cascade: Boolean): Boolean =
    throw refused("drop namespaces", "the metastore's own tools do")

  // -- tables ----------------------------------------------------------------------------

  override def listTables(namespace: Array[String]): Array[Identifier] = {
    val answer = ask("tables", "namespace" -> database(namespace))
    failIfMissing(answer, namespace, None)
    strings(answer, "tables").map(t => Identifier.of(namespace, t)).toArray
  }

  override def loadTable(ident: Identifier): Table = {
    if (ident.namespace().length != 1) {
      throw TieredHiveCatalog.noSuchTable(catalogName, ident,
        s"a table of $catalogName is named <database>.<table>")
    }
    val db = ident.namespace()(0)
    val options = tableOptions(s"$db.${ident.name()}")
    val created = try create(options) catch {
      case NonFatal(e) if !e.isInstanceOf[NotRegistered] =>
        // The source failed: when the table is missing, say so as Spark does, naming what
        // exists; any other failure (a bad property, an unreachable metastore) is its own.
        failIfMissing(ask("table", "namespace" -> db, "table" -> ident.name()),
          ident.namespace(), Some(ident))
        throw e
    }
    val (schema, description) = TableDescription.split(created.schema)
    val statistics = TableStatistics.split(schema)
    val hints = SourceHints.split(statistics._1)
    new TieredHiveTable(
      hints._1,
      description.partitionKeys.map(k => Expressions.identity(k): Transform).toArray,
      Some((options.asCaseSensitiveMap(), created)),
      statistics._2,
      hints._2,
      tableName = s"$catalogName.$db.${ident.name()}",
      tableOptions = options.asCaseSensitiveMap(),
      tableProperties = description.properties)
  }

  override def createTable(ident: Identifier, columns: Array[Column],
      partitions: Array[Transform], properties: util.Map[String, String]): Table =
    throw refused("create tables",
      "df.write.format(\"tiered_hive\").save(\"db.table\") creates a managed table, and " +
        "`raptorx table register` registers an existing directory as an external one")

  override def alterTable(ident: Identifier, changes: TableChange*): Table =
    throw refused("alter tables", "`raptorx table` and `raptorx partition` change them")

  override def dropTable(ident: Identifier): Boolean =
    throw refused("drop tables", "the metastore's own tools do")

  override def renameTable(oldIdent: Identifier, newIdent: Identifier): Unit =
    throw refused("rename tables", "the metastore's own tools do")

  // -- procedures ------------------------------------------------------------------------

  override def loadProcedure(ident: Identifier): UnboundProcedure = {
    if (ident.namespace().sameElements(TieredHiveCatalog.SystemNamespace) &&
        ident.name().equalsIgnoreCase(FlushMetadataCache.Name)) {
      return new FlushMetadataCache(this)
    }
    throw new IllegalArgumentException(s"the tiered_hive catalog $catalogName has no procedure " +
      s"${(ident.namespace() :+ ident.name()).mkString(".")}; it has " +
      s"${TieredHiveCatalog.SystemNamespace.mkString(".")}.${FlushMetadataCache.Name}")
  }

  override def listProcedures(namespace: Array[String]): Array[Identifier] =
    if (namespace.sameElements(TieredHiveCatalog.SystemNamespace)) {
      Array(Identifier.of(TieredHiveCatalog.SystemNamespace, FlushMetadataCache.Name))
    } else Array.empty

  /** Forget the cached metastore versions of `schema.table`, of every table of `schema`, or
   * of all (both None); a missing schema or table fails naming what exists. */
  private[raptorx] def flushMetadataCache(schema: Option[String], table: Option[String]): Unit = {
    val args = schema.map("namespace" -> _).toSeq ++ table.map("table" -> _).toSeq
    failIfMissing(ask("flush_metadata_cache", args: _*), schema.toArray,
      table.map(t => Identifier.of(schema.toArray, t)))
  }

  // -- the Python side -------------------------------------------------------------------

  /** The options a table of this catalog is read and written with: its name and the
   * catalog's property overrides. */
  private def tableOptions(table: String): CaseInsensitiveStringMap = {
    val options = new util.HashMap[String, String](catalogOptions.asJava)
    options.put("path", table)
    markOrigins(options)
    new CaseInsensitiveStringMap(options)
  }

  /** Which of `options` are the catalog's own (its Spark conf), for the Python side's errors
   * ([[Protocol.CatalogOptionsOption]]). */
  private def markOrigins(options: util.HashMap[String, String]): Unit = {
    if (catalogOptions.nonEmpty) {
      options.put(Protocol.CatalogOptionsOption,
        catalogName + ":" + catalogOptions.keys.toSeq.sorted.mkString(","))
    }
  }

  /** The Python source created with `options` (a table, or a catalog request). */
  private def create(options: CaseInsensitiveStringMap): PythonDataSourceCreationResult = {
    NativeCompatibility.check()
    try {
      TieredHiveProvider.freshPythonSource().getOrCreateDataSourceInPython(
        TieredHiveProvider.PythonName, TieredHiveProvider.withCaseSensitivity(options), None)
    } catch {
      case e: AnalysisException if e.getCondition == "DATA_SOURCE_NOT_EXIST" =>
        throw new NotRegistered(catalogName, e)
    }
  }

  /** The answer to a catalog request (`catalog_requests.py`). */
  private def ask(op: String, args: (String, String)*): JsonNode = {
    val request = new util.LinkedHashMap[String, String]()
    request.put("op", op)
    args.foreach { case (k, v) => request.put(k, v) }
    val options = new util.HashMap[String, String](catalogOptions.asJava)
    options.put(Protocol.CatalogRequestOption, TieredHiveCatalog.Json.writeValueAsString(request))
    markOrigins(options)
    val schema = create(new CaseInsensitiveStringMap(options)).schema
    if (schema.isEmpty || !schema.head.metadata.contains(Protocol.CatalogAnswerKey)) {
      throw new IllegalStateException(s"$catalogName: the Python source answered the catalog " +
        s"request $request without an answer (schema $schema): is raptorx_py older than the jar?")
    }
    TieredHiveCatalog.Json.readTree(schema.head.metadata.getString(Protocol.CatalogAnswerKey))
  }

  private def database(namespace: Array[String]): String = {
    if (namespace.length != 1) {
      throw TieredHiveCatalog.noSuchNamespace(catalogName, namespace,
        s"a namespace of $catalogName is one Hive database")
    }
    namespace(0)
  }

  private def failIfMissing(answer: JsonNode, namespace: Array[String],
      table: Option[Identifier]): Unit = {
    val listing = answer.path("listing").asText("")
    answer.path("missing").asText("") match {
      case "namespace" => throw TieredHiveCatalog.noSuchNamespace(catalogName, namespace, listing)
      case "table" =>
        throw TieredHiveCatalog.noSuchTable(catalogName, table.getOrElse(
          Identifier.of(namespace, "")), listing)
      case _ =>
    }
  }

  private def strings(answer: JsonNode, field: String): Seq[String] =
    answer.path(field).elements().asScala.map(_.asText()).toSeq

  private def refused(what: String, instead: String): UnsupportedOperationException =
    new UnsupportedOperationException(
      s"the tiered_hive catalog $catalogName does not $what; $instead")
}

object TieredHiveCatalog {
  /** The name `raptorx_py.register` gives the catalog unless told otherwise. */
  val DefaultName = "raptorx"
  /** The namespace of the catalog's procedures (Trino's). */
  val SystemNamespace: Array[String] = Array("system")

  private val Json = new ObjectMapper()

  private def quoted(parts: Seq[String]): String = parts.map(p => s"`$p`").mkString(".")

  /** Spark's own exception (`SCHEMA_NOT_FOUND`), its name followed by what exists. */
  def noSuchNamespace(catalog: String, namespace: Array[String], listing: String)
      : NoSuchNamespaceException =
    new NoSuchNamespaceException("SCHEMA_NOT_FOUND",
      Map("schemaName" -> s"${quoted(catalog +: namespace.toSeq)} ($listing)"))

  /** Spark's own exception (`TABLE_OR_VIEW_NOT_FOUND`); its search path is the namespace
   * searched, with what it holds. */
  def noSuchTable(catalog: String, ident: Identifier, listing: String): NoSuchTableException =
    new NoSuchTableException("TABLE_OR_VIEW_NOT_FOUND", Map(
      "relationName" -> quoted(catalog +: ident.namespace().toSeq :+ ident.name()),
      "searchPath" -> s"${quoted(catalog +: ident.namespace().toSeq)} ($listing)"), None)
}

/**
 * `CALL <catalog>.system.flush_metadata_cache(schema_name => 's', table_name => 't')`, Trino's
 * procedure: forgets the versioned metastore cache's entries of one table, of every table of
 * one schema, or (no argument) of all, so the next query reads them from the metastore. A
 * thin call: the catalog request `flush_metadata_cache` (`catalog_requests.py`), answered in
 * the process that plans (the driver's planner). Returns no rows.
 */
private class FlushMetadataCache(catalog: TieredHiveCatalog)
    extends UnboundProcedure with BoundProcedure {
  override def name(): String = FlushMetadataCache.Name

  override def description(): String =
    "forget the cached metastore versions of a table, a schema's tables, or all"

  override def bind(inputType: StructType): BoundProcedure = this

  override def parameters(): Array[ProcedureParameter] = Array(
    ProcedureParameter.in("schema_name", StringType).defaultValue("NULL").build(),
    ProcedureParameter.in("table_name", StringType).defaultValue("NULL").build())

  override def isDeterministic: Boolean = false

  override def call(input: InternalRow): util.Iterator[Scan] = {
    def arg(i: Int): Option[String] =
      if (input.isNullAt(i)) None else Some(input.getUTF8String(i).toString)
    val (schema, table) = (arg(0), arg(1))
    if (schema.isEmpty && table.isDefined) {
      throw new IllegalArgumentException(
        s"${FlushMetadataCache.Name}: table_name => '${table.get}' needs its schema_name")
    }
    catalog.flushMetadataCache(schema, table)
    util.Collections.emptyIterator[Scan]()
  }
}

private object FlushMetadataCache {
  val Name = "flush_metadata_cache"
}

/** The session has no `tiered_hive_python` source: the catalog cannot reach a metastore. */
private class NotRegistered(catalog: String, cause: Throwable)
    extends IllegalStateException(
      s"the tiered_hive catalog $catalog reads its metastore through raptorx_py's Python " +
        s"source ${TieredHiveProvider.PythonName}, which this session has not registered: " +
        "call raptorx_py.register(spark) (or start it with raptorx_py.tiered_session()) in " +
        "the driver's Python process, or on a Spark Connect client of a server with the jar. " +
        "spark-sql and Scala applications, which have no such process, cannot use the " +
        "catalog (docs/configuration.md, \"The Spark catalog\")", cause)
