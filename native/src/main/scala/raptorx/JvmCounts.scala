package raptorx

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.LongAdder

/** The JVM's own counts (the fragment hits `FragmentHits` serves), kept for
 * [[CacheMetricsPlugin]] since the process started. */
object JvmCounts {
  private val counts = new ConcurrentHashMap[String, LongAdder]()

  def add(name: String, value: Long): Unit =
    counts.computeIfAbsent(name, _ => new LongAdder()).add(value)

  def get(name: String): Long = Option(counts.get(name)).map(_.sum()).getOrElse(0L)
}
