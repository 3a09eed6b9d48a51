package raptorx.contract

import java.nio.charset.StandardCharsets.US_ASCII

/**
 * Soft affinity's strings, the JVM's half of raptorx_py's `jvm_contract/placement.py`.
 *
 * - The read option [[Protocol.ExecutorsOption]] lists the live executors as `host/id`
 *   joined by commas ([[executorsText]]).
 * - A task's pickled partition opens with `raptorx-affinity|<location>|<flag>` (the
 *   location as Spark names an executor, `executor_<host>_<id>`: [[location]]); [[find]]
 *   finds it in the pickled bytes without unpickling them. The flag is one byte, `-` until
 *   the executor overwrites it ([[stamp]], same length: the pickle stays valid) with
 *   [[Preferred]] (the preferred executor), [[PreferredHost]] (another executor of its
 *   host, which shares the host's caches) or [[Fallback]] (another host).
 * - A stamped partition's placement, as the Python reader counts it ([[counts]]).
 */
object Placement {
  private val Mark = Protocol.AffinityMark.getBytes(US_ASCII)
  val Preferred: Byte = Protocol.AffinityPreferred.getBytes(US_ASCII)(0)
  val PreferredHost: Byte = Protocol.AffinityPreferredHost.getBytes(US_ASCII)(0)
  val Fallback: Byte = Protocol.AffinityFallback.getBytes(US_ASCII)(0)
  private val Bar = '|'.toByte

  /** The option's value for the executors `(host, id)`. */
  def executorsText(executors: Seq[(String, String)]): Seq[String] =
    executors.map { case (host, id) => s"$host/$id" }

  /** The location of the executor `id` on `host`. */
  def location(host: String, id: String): String = s"executor_${host}_$id"

  /** The prefix every location on `host` starts with (`executor_<host>_`). */
  def hostPrefix(host: String): String = s"executor_${host}_"

  /** Whether `location` is on `host` (Spark's hosts have no `_`, so the rest is the
   * executor id). */
  def onHost(location: String, host: String): Boolean = {
    val prefix = hostPrefix(host)
    location.startsWith(prefix) && !location.substring(prefix.length).contains('_')
  }

  /** Where the mark's location starts and its closing bar is, if the bytes carry one. */
  def find(bytes: Array[Byte]): Option[(Int, Int)] = {
    val at = PickledMarks.indexOf(bytes, Mark)
    if (at < 0) return None
    val start = at + Mark.length
    val end = bytes.indexOf(Bar, start)
    if (end > start && end + 1 < bytes.length) Some((start, end)) else None
  }

  /** The location the mark in `bytes` names, if it carries one. */
  def markedLocation(bytes: Array[Byte]): Option[String] = find(bytes).map { case (start, end) =>
    new String(bytes, start, end - start, US_ASCII)
  }

  /** `bytes` with the mark's flag set to `flag`; `bytes` itself without a mark. */
  def stamp(bytes: Array[Byte], flag: Byte): Array[Byte] = find(bytes) match {
    case Some((_, end)) =>
      val out = bytes.clone()
      out(end + 1) = flag
      out
    case None => bytes
  }

  /** The counters raptorx_py's reader counts for the placement of a stamped partition
   * (`affinity.preferred` and `affinity.preferred.<location>`; `preferred_host`;
   * `fallback`); empty without a mark or before [[stamp]]. */
  def counts(pickled: Array[Byte]): Seq[String] = find(pickled) match {
    case Some((start, end)) =>
      val location = new String(pickled, start, end - start, US_ASCII)
      val kind = pickled(end + 1) match {
        case Preferred => "preferred"
        case PreferredHost => "preferred_host"
        case Fallback => "fallback"
        case _ => return Seq.empty
      }
      Seq(s"affinity.$kind", s"affinity.$kind.$location")
    case None => Seq.empty
  }
}
