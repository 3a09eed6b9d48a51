package raptorx.contract

import java.nio.charset.StandardCharsets.US_ASCII

import scala.collection.mutable

/**
 * The fragment hand-off mark, the JVM's half of raptorx_py's
 * `jvm_contract/fragment_handoff.py` (the constants are spelled once here and once there).
 *
 * The planner attaches to each task's pickled partition the ASCII mark
 * `raptorx-fragments|<cache dir hex>|<metrics dir hex>|<key hex>,...|<flag per split>|` (a
 * split without a key is [[NoKey]]); [[FragmentHandoff.of]] finds it in the pickled bytes
 * without unpickling them ([[PickledMarks]]). The JVM serves the keys' verified entries
 * (`FragmentHits`, entry layout: [[FragmentEntry]]) and stamps [[Served]] on each split it
 * served ([[FragmentHandoff.stamp]], same length: the pickle stays valid), so the Python
 * reader computes only the splits still [[Unserved]].
 */
object FragmentHandoff {
  val Marker = "raptorx-fragments|"
  val NoKey = "-"
  val Unserved: Byte = '-'.toByte
  val Served: Byte = 'J'.toByte

  private val MarkerBytes = Marker.getBytes(US_ASCII)
  private val Bar = '|'.toByte

  /** A task's hand-off: the directories as given, the keys in hex (or [[NoKey]]), and where
   * the flags start in the pickled bytes. */
  final case class Handoff(cacheDir: String, metricsDir: String, keys: IndexedSeq[String],
                           flagsAt: Int)

  /** The hand-off in `bytes` (a pickled partition), or None without a well-formed mark. */
  def of(bytes: Array[Byte]): Option[Handoff] = {
    val at = PickledMarks.indexOf(bytes, MarkerBytes)
    if (at < 0) return None
    var pos = at + MarkerBytes.length
    val fields = mutable.ArrayBuffer.empty[(Int, Int)]
    while (fields.length < 4) {
      val end = bytes.indexOf(Bar, pos)
      if (end < 0) return None
      fields += ((pos, end))
      pos = end + 1
    }
    def text(i: Int): String = new String(bytes, fields(i)._1, fields(i)._2 - fields(i)._1, US_ASCII)
    val keys = text(2).split(",").toIndexedSeq
    val (flagsAt, flagsEnd) = fields(3)
    if (flagsEnd - flagsAt != keys.length) return None
    for {
      cache <- PickledMarks.unhex(text(0))
      metrics <- PickledMarks.unhex(text(1))
    } yield Handoff(cache, metrics, keys, flagsAt)
  }

  /** `bytes` with the flags of the splits `served` stamped [[Served]]. */
  def stamp(bytes: Array[Byte], handoff: Handoff, served: collection.Set[Int]): Array[Byte] = {
    val out = bytes.clone()
    served.foreach(i => out(handoff.flagsAt + i) = Served)
    out
  }
}
