package raptorx

import java.lang.ref.WeakReference
import java.lang.reflect.{Proxy => JavaProxy}
import java.net.Socket
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

/**
 * Nagle's algorithm off (`TCP_NODELAY`) on the Py4J socket a callback into the driver's
 * Python process travels over.
 *
 * Why: the py4j 0.10.9.9 pyspark ships writes a command longer than its writer's 8 KiB buffer
 * in several writes, and leaves Nagle on (py4j issue 516, fixed upstream after that release).
 * A planning request carries the pickled data source, so it is longer than that: the last
 * write waits for the first one's ACK, which the Python side delays (40 ms on Linux), so every
 * scan planned by the driver's planner paid about 42 ms of waiting, where its planning took
 * 1 to 5. The planner's process sets the option on its own end (`driver_planner.py`); this
 * sets it on the JVM's end, once per connection.
 *
 * Limits: reads py4j's fields by name (`PythonProxyHandler.gateway`,
 * `PythonClient.threadConnection`, the connections' `socket`); when they are not there (another
 * py4j), nothing is set, the callback works as before (only slower), and [[problem]] says why.
 * Only the connection the callback uses is touched: in pyspark's pinned-thread mode that is
 * the calling Python thread's own; otherwise every idle connection of the callback client.
 */
object CallbackSockets {
  private val set = new AtomicLong()
  @volatile private var lastProblem: Option[String] = None

  /** Sockets this JVM turned `TCP_NODELAY` on (tests read it). */
  def socketsSet: Long = set.get()

  /** Why the last attempt set nothing, if it failed (tests and the compatibility report). */
  def problem: String = lastProblem.orNull

  /** Turn Nagle off on the socket(s) a call on `proxy` (a Py4J Python proxy) will use. */
  def noDelay(proxy: AnyRef): Unit =
    try {
      val handler = JavaProxy.getInvocationHandler(proxy)
      val gateway = field(handler, "gateway").asInstanceOf[py4j.Gateway]
      sockets(gateway.getCallbackClient).foreach { s =>
        if (!s.getTcpNoDelay) {
          s.setTcpNoDelay(true)
          set.incrementAndGet()
        }
      }
      lastProblem = None
    } catch {
      case NonFatal(e) => lastProblem = Some(e.toString)
    }

  private def sockets(client: AnyRef): Seq[Socket] = client match {
    case pinned: py4j.PythonClient =>
      val local = field(pinned, "threadConnection")
        .asInstanceOf[ThreadLocal[WeakReference[AnyRef]]].get()
      Option(local).flatMap(r => Option(r.get())).map(socketOf).toSeq
    case pooled: py4j.CallbackClient =>
      field(pooled, "connections").asInstanceOf[java.util.Deque[AnyRef]]
        .asScala.toSeq.map(socketOf)
    case other => throw new IllegalStateException(s"unknown callback client ${other.getClass}")
  }

  private def socketOf(connection: AnyRef): Socket =
    field(connection, "socket").asInstanceOf[Socket]

  /** `name` declared by the instance's class or one of its superclasses. */
  private def field(instance: AnyRef, name: String): AnyRef = {
    var cls: Class[_] = instance.getClass
    while (cls != null) {
      cls.getDeclaredFields.find(_.getName == name) match {
        case Some(f) =>
          f.setAccessible(true)
          return f.get(instance)
        case None => cls = cls.getSuperclass
      }
    }
    throw new NoSuchFieldException(s"${instance.getClass.getName}.$name")
  }
}
