package raptorx.contract

import java.nio.charset.StandardCharsets.UTF_8

/**
 * How the JVM reads the marks raptorx_py's planner puts in a task's pickled partition
 * (fragment hits, splits for Spark's Parquet reader, the plan summary, soft affinity): a
 * pickle keeps an ASCII string verbatim, so a mark is found in the pickled bytes without
 * unpickling them ([[indexOf]]), and the fields that are not plain ASCII travel as hex
 * ([[unhexBytes]], [[unhex]]).
 */
object PickledMarks {
  /** Where `pattern` first starts in `bytes` (-1: nowhere). */
  def indexOf(bytes: Array[Byte], pattern: Array[Byte]): Int = {
    var i = 0
    val last = bytes.length - pattern.length
    while (i <= last) {
      var j = 0
      while (j < pattern.length && bytes(i + j) == pattern(j)) j += 1
      if (j == pattern.length) return i
      i += 1
    }
    -1
  }

  /** Hex text as bytes; None for text that is not hex of whole bytes. */
  def unhexBytes(s: String): Option[Array[Byte]] = {
    if (s.length % 2 != 0) return None
    val out = new Array[Byte](s.length / 2)
    var i = 0
    while (i < out.length) {
      val hi = Character.digit(s.charAt(2 * i), 16)
      val lo = Character.digit(s.charAt(2 * i + 1), 16)
      if (hi < 0 || lo < 0) return None
      out(i) = ((hi << 4) | lo).toByte
      i += 1
    }
    Some(out)
  }

  /** Hex of UTF-8 text as the text; None as for [[unhexBytes]]. */
  def unhex(s: String): Option[String] = unhexBytes(s).map(new String(_, UTF_8))
}
