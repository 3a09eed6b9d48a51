package raptorx.cache

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.LongAdder

/** The JVM block reads' and writes' counts since the process started ([[snapshot]]), and
 * since the last [[drain]] (deltas, for appending to a `jvm-counters/` file as
 * `FragmentHits.appendCounts` does). Thread-safe. */
object BlockCounts {
  val Hits = "jvm_blocks.hits"
  val Misses = "jvm_blocks.misses"
  /** Block files whose MAC was checked (a hit on a file already verified checks none). */
  val Verified = "jvm_blocks.verified"
  val Corrupt = "jvm_blocks.corrupt"
  val ReadErrors = "jvm_blocks.read_errors"
  val Published = "jvm_blocks.published"
  val PublishErrors = "jvm_blocks.publish_errors"
  val AdoptFiles = "jvm_blocks.adopt_files"
  val AdoptErrors = "jvm_blocks.adopt_errors"
  val Names: Seq[String] =
    Seq(Hits, Misses, Verified, Corrupt, ReadErrors, Published, PublishErrors, AdoptFiles, AdoptErrors)

  private val totals = new ConcurrentHashMap[String, LongAdder]()
  private val pending = new ConcurrentHashMap[String, LongAdder]()
  Names.foreach { n => totals.put(n, new LongAdder()); pending.put(n, new LongAdder()) }

  def add(name: String, value: Long = 1L): Unit = {
    totals.computeIfAbsent(name, _ => new LongAdder()).add(value)
    pending.computeIfAbsent(name, _ => new LongAdder()).add(value)
  }

  def get(name: String): Long = Option(totals.get(name)).map(_.sum()).getOrElse(0L)

  /** Every count since the process started (zeros included). */
  def snapshot(): java.util.Map[String, java.lang.Long] = {
    val out = new java.util.TreeMap[String, java.lang.Long]()
    totals.forEach((k, v) => { out.put(k, java.lang.Long.valueOf(v.sum())); () })
    out
  }

  /** The counts added since the last drain (non-zero ones), reset to zero. */
  def drain(): java.util.Map[String, java.lang.Long] = {
    val out = new java.util.TreeMap[String, java.lang.Long]()
    pending.forEach((k, v) => {
      val n = v.sumThenReset()
      if (n != 0) out.put(k, java.lang.Long.valueOf(n))
      ()
    })
    out
  }
}
