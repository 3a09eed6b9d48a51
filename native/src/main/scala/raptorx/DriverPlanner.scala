package raptorx

import java.util.concurrent.atomic.AtomicReference

import raptorx.contract.Protocol

/**
 * The application's planner, living in the driver's own Python process
 * (`raptorx_py/datasource/planning/driver_planner.py`), which implements this interface and
 * registers itself through pyspark's Py4J callback server ([[DriverPlanners.register]]).
 *
 * Each method takes the bytes pyspark's JVM would write to a planning Python worker's socket
 * and returns a status byte ([[DriverPlanners.Ok]] or [[DriverPlanners.Failed]]) followed by
 * what the worker would write back (or, after `Failed`, the error as a UTF-8 text):
 *  - `create`: the protocol of `pyspark.sql.worker.create_data_source` (pyspark's
 *    `UserDefinedPythonDataSourceRunner`): the Python `DataSource` made from the options, and
 *    its schema;
 *  - `plan`: the protocol of `pyspark.sql.worker.data_source_pushdown_filters` (pyspark's
 *    `UserDefinedPythonDataSourceFilterPushdownRunner`): the reader made for the schema, the
 *    filters it took, its pickled read function and its pickled partitions;
 *  - `prefetch` (ours): scan builders of a query were created; the request is the query's
 *    token, then how many sources and each pickled source (each distinct source of the
 *    builders made since the query's last `plan`, sent just before its next one), the answer
 *    only the status byte, given at once while the planner reads ahead what each scan's
 *    first reads of its table will be (`raptorx_py/datasource/planning/scan_prefetch.py`).
 * So the pickled reader and partitions executors receive are the very bytes a worker would
 * have made; only the process that makes them changes.
 */
trait DriverPlanner {
  def create(request: Array[Byte]): Array[Byte]
  def plan(request: Array[Byte]): Array[Byte]
  def prefetch(request: Array[Byte]): Array[Byte]
}

/**
 * The application's registered planner ([[DriverPlanner]]), if any.
 *
 * Contract: with a planner registered (`raptorx_py.register(spark)` in a classic session),
 * every `tiered_hive` source creation and scan planning of the JVM is one callback into the
 * driver's Python process, and no planning Python worker starts
 * (`org.apache.spark.sql.execution.datasources.v2.python.raptorx.PlannedPython`). Without one
 * (a Spark Connect server, `spark-sql`, a Scala application), or when a callback fails in
 * transport (the Python process went away: the planner is then dropped), planning takes
 * pyspark's worker path, as before. An error the planner reports (a missing table, a bad
 * option) fails the query as a `PythonException`, as the worker path's would.
 */
object DriverPlanners {
  /** Status bytes opening a planner's answer (`Protocol.PlannerOk`/`PlannerFailed`). */
  val Ok: Byte = Protocol.PlannerOk.charAt(0).toByte
  val Failed: Byte = Protocol.PlannerFailed.charAt(0).toByte

  private val registered = new AtomicReference[DriverPlanner]()

  /** Make `planner` the application's planner (replacing any earlier one). */
  def register(planner: DriverPlanner): Unit = registered.set(planner)

  /** Forget the planner: planning goes back to pyspark's workers. */
  def unregister(): Unit = registered.set(null)

  def isRegistered: Boolean = registered.get() != null

  def current: Option[DriverPlanner] = Option(registered.get())

  /** Forget `planner` if it is still the registered one (its process is gone). */
  def drop(planner: DriverPlanner): Unit = registered.compareAndSet(planner, null)
}
