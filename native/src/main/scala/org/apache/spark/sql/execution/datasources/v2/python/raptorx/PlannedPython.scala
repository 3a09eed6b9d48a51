package org.apache.spark.sql.execution.datasources.v2.python.raptorx

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}
import java.nio.charset.StandardCharsets.UTF_8
import java.util

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import net.razorvine.pickle.Pickler
import py4j.{Py4JException, Py4JNetworkException}

import org.apache.spark.QueryContext
import org.apache.spark.api.python.{PythonException, PythonFunction}
import org.apache.spark.internal.Logging
import org.apache.spark.sql.catalyst.QueryPlanningTracker
import org.apache.spark.sql.catalyst.util.CaseInsensitiveMap
import org.apache.spark.sql.connector.read.Scan
import org.apache.spark.sql.execution.datasources.v2.python.{PythonDataSourceCreationResult, PythonDataSourceV2, PythonScan, UserDefinedPythonDataSourceRunner}
import org.apache.spark.sql.sources.Filter
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import _root_.raptorx.{CallbackSockets, DriverPlanner, DriverPlanners, QueryTokens, TieredHiveProvider}

/**
 * Planning through the application's planner ([[DriverPlanners]]): pyspark's own planning
 * protocol (its runners write the request and read the answer, byte for byte what a planning
 * worker's socket carries), with one Py4J callback as the transport.
 */
object PlannedPython extends Logging {
  /** The Python `DataSource` of `ds` for `options`, created by the planner. */
  def create(ds: PythonDataSourceV2, shortName: String, options: CaseInsensitiveStringMap,
      userSchema: Option[StructType]): Option[PythonDataSourceCreationResult] =
    DriverPlanners.current.flatMap { planner =>
      val runner = new CreateRequest(ds.source.dataSourceCls, shortName,
        userSchema, CaseInsensitiveMap(options.asCaseSensitiveMap().asScala.toMap))
      call(planner, "create", runner.write, planner.create, runner.read)
    }

  /** A scan of `ds` reading `schema`, planned by the planner with `filters` offered, and the
   * filters the reader did not take. `ds` keeps the read plan (pyspark's `setReadInfo`), so
   * the scan's batch neither plans again nor starts a worker. */
  def plan(ds: PythonDataSourceV2, shortName: String, schema: StructType,
      options: CaseInsensitiveStringMap, filters: Array[Filter]): Option[(Scan, Array[Filter])] =
    DriverPlanners.current.flatMap { planner =>
      val created = ds.getOrCreateDataSourceInPython(shortName, options, Some(schema))
      val runner = new PlanRequest(
        ds.source.createPythonFunction(created.dataSource), schema, filters.toSeq)
      sendReadAhead(planner)
      call(planner, "plan", runner.write, planner.plan, runner.read).map { result =>
        ds.setReadInfo(result.readInfo)
        val pushed = result.isFilterPushed
        val taken = filters.indices.filter(i => pushed(i)).map(filters(_)).toArray
        val notTaken = filters.indices.filterNot(i => pushed(i)).map(filters(_)).toArray
        (new PythonScan(ds, shortName, schema, options, taken), notTaken)
      }
    }

  /** Tell the planner that a scan of `ds` is being created for the query being optimized
   * (its [[QueryTokens]] token): Spark creates every scan builder of a query before it builds any,
   * so the planner reads ahead, on threads of its own, what each scan's first reads of its
   * table will be (`raptorx_py/datasource/planning/scan_prefetch.py`), and the query's scans no
   * longer wait for their tables' round trips one after another.
   *
   * The sources are kept here and sent in ONE callback just before the query's next `plan`
   * ([[sendReadAhead]]), each distinct source once: each callback costs transport and
   * waiting for the Python side's lock (Q2 created 9 builders over 5 tables, 9
   * callbacks), and nothing
   * reads ahead sooner by being told at once, since no scan is built before the last
   * builder is made. Best effort: nothing without a planner or a token; a failure is logged,
   * and the scan then reads for itself. */
  def prefetch(ds: PythonDataSourceV2, options: CaseInsensitiveStringMap): Unit =
    for (_ <- DriverPlanners.current; tracker <- QueryPlanningTracker.get;
         token <- QueryTokens.current()) {
      val created = ds.getOrCreateDataSourceInPython(TieredHiveProvider.PythonName, options, None)
      readAhead.synchronized {
        val pending = readAhead.computeIfAbsent(tracker, _ => new PendingReadAhead(token))
        if (!pending.sources.exists(util.Arrays.equals(_, created.dataSource))) {
          pending.sources += created.dataSource
        }
      }
    }

  /** The sources of each query's scan builders not yet sent to the planner, by the query's
   * planning tracker (weakly, as [[QueryTokens]] keeps its tokens: they go with the query). */
  private val readAhead = new util.WeakHashMap[QueryPlanningTracker, PendingReadAhead]()

  private final class PendingReadAhead(val token: String) {
    val sources = new ArrayBuffer[Array[Byte]]()
  }

  /** Send the planner, in one callback, the sources of the query's scan builders made since
   * the last call (the request: the token, their count, each pickled source). */
  private def sendReadAhead(planner: DriverPlanner): Unit = {
    val pending = QueryPlanningTracker.get.flatMap { tracker =>
      readAhead.synchronized(Option(readAhead.remove(tracker)))
    }
    for (reads <- pending if reads.sources.nonEmpty) {
      val bytes = new ByteArrayOutputStream()
      val out = new DataOutputStream(bytes)
      val tokenBytes = reads.token.getBytes(UTF_8)
      out.writeInt(tokenBytes.length)
      out.write(tokenBytes)
      out.writeInt(reads.sources.length)
      for (source <- reads.sources) {
        out.writeInt(source.length)
        out.write(source)
      }
      out.flush()
      CallbackSockets.noDelay(planner)
      try {
        val answer = planner.prefetch(bytes.toByteArray)
        if (answer == null || answer.isEmpty || answer(0) != DriverPlanners.Ok) {
          logDebug("raptorx: the driver's planner did not read ahead: " +
            (if (answer == null || answer.length < 2) "no answer"
            else new String(answer, 1, answer.length - 1, UTF_8)))
        }
      } catch {
        case e: Py4JException => logDebug(s"raptorx: the driver's planner did not read ahead ($e)")
      } finally CallbackSockets.noDelay(planner)
    }
  }

  /** Plan requests compared with the bytes Spark's runner writes (tests:
   * `spark.raptorx.planning.checkRequests`, [[PlanRequest]]). */
  def planRequestsChecked(): Long = PlanRequest.checked.get()

  private def call[T](planner: DriverPlanner, what: String,
      write: DataOutputStream => Unit, serve: Array[Byte] => Array[Byte],
      read: DataInputStream => T): Option[T] = {
    val bytes = new ByteArrayOutputStream()
    val out = new DataOutputStream(bytes)
    write(out)
    out.flush()
    // Else each request waits ~40 ms on a delayed ACK. Before the call for a connection
    // made earlier, after it for the one a thread's first callback opens.
    CallbackSockets.noDelay(planner)
    val answer = try serve(bytes.toByteArray) catch {
      case e: Py4JException =>
        // The planner is unreachable or broke outside the source's own code: the worker
        // path can still answer, so it does; a planner whose process is gone is dropped.
        if (e.isInstanceOf[Py4JNetworkException]) DriverPlanners.drop(planner)
        logWarning(s"raptorx: the driver's planner failed to $what ($e); " +
          "planning in a Python worker instead")
        return None
    } finally CallbackSockets.noDelay(planner)
    if (answer == null || answer.isEmpty) {
      logWarning(s"raptorx: the driver's planner returned nothing for $what; " +
        "planning in a Python worker instead")
      return None
    }
    val in = new DataInputStream(new ByteArrayInputStream(answer, 1, answer.length - 1))
    if (answer(0) == DriverPlanners.Ok) Some(read(in))
    else throw new PythonException(new String(answer, 1, answer.length - 1, UTF_8),
      null: Throwable, None: Option[String], Map.empty[String, String],
      Array.empty[QueryContext])
  }
}

/** pyspark's request to create a source: what its runner writes to a worker, and reads back. */
private class CreateRequest(cls: PythonFunction, provider: String, schema: Option[StructType],
    options: CaseInsensitiveMap[String])
    extends UserDefinedPythonDataSourceRunner(cls, provider, schema, options) {
  def write(out: DataOutputStream): Unit = writeToPython(out, new Pickler())
  def read(in: DataInputStream): PythonDataSourceCreationResult = receiveFromPython(in)
}

/**
 * A `PythonDataSourceV2` whose Python `DataSource` is created by the application's planner
 * when one is registered ([[DriverPlanners.create]]), else by pyspark (a worker).
 */
class PlannedPythonDataSource extends PythonDataSourceV2 {
  /** What the planner created (pyspark's own path keeps its result itself). */
  @volatile private var created: PythonDataSourceCreationResult = _

  override def getOrCreateDataSourceInPython(
      shortName: String,
      options: CaseInsensitiveStringMap,
      userSpecifiedSchema: Option[StructType]): PythonDataSourceCreationResult = {
    if (created == null) {
      PlannedPython.create(this, shortName, options, userSpecifiedSchema) match {
        case Some(made) => created = made
        case None => return super.getOrCreateDataSourceInPython(shortName, options,
          userSpecifiedSchema)
      }
    }
    created
  }
}
