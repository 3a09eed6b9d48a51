package raptorx.contract

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets.US_ASCII
import java.nio.file.Path
import java.security.MessageDigest
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec

/**
 * A fragment result cache entry, the JVM's half of raptorx_py's `cache/fragment_cache.py`
 * (the entry layout; the constants are spelled once here and once there). The JVM reads
 * entries (`FragmentHits.verified`) and writes them (`FragmentEntryWriter`,
 * `FragmentStores.publish`); the shared vectors in `tests/vectors/` hold one Python wrote.
 *
 * An entry is `<dir>/entries/<key[:2]>/<key>.arrow` ([[path]]): a 16-byte prefix (magic
 * `RXF1`, format 2, three zero bytes, expiry in epoch milliseconds as a little-endian u64,
 * 0 for none: [[prefix]]), then HMAC-SHA256 keyed with the cache's secret
 * ([[CacheFiles.SecretFile]]) over the prefix, the key's length (u32, little-endian), the
 * key and the Arrow stream ([[mac]]), then the Arrow IPC stream (its buffers ZSTD or LZ4
 * frame, as each record batch's `BodyCompression` says). [[check]] is the whole test a
 * reader makes of an entry's bytes. The names file listing the entries the JVM published
 * has one `<key hex> <file bytes>` line each ([[namesText]], [[listedBytes]]).
 */
object FragmentEntry {
  val Magic = "RXF1"
  /** 2: the Arrow stream's buffers may be compressed (LZ4 frame or ZSTD, as each record
   * batch's `BodyCompression` says; read with arrow-compression's codecs). */
  val Format = 2
  val PrefixBytes = 16
  val MacBytes = 32
  val HeaderBytes: Int = PrefixBytes + MacBytes
  val EntriesDir = "entries"
  val Suffix = ".arrow"

  def path(dir: Path, key: String): Path =
    dir.resolve(EntriesDir).resolve(key.substring(0, 2)).resolve(key + Suffix)

  /** The header's first [[PrefixBytes]] bytes of an entry expiring at `expiresMillis` (0:
   * never). */
  def prefix(expiresMillis: Long): Array[Byte] = {
    val prefix = ByteBuffer.allocate(PrefixBytes).order(ByteOrder.LITTLE_ENDIAN)
    prefix.put(Magic.getBytes(US_ASCII)).put(Format.toByte)
    prefix.put(Array[Byte](0, 0, 0)).putLong(expiresMillis)
    prefix.array()
  }

  /** An entry's MAC: HMAC-SHA256 keyed with the cache's secret over the header's first
   * [[PrefixBytes]] bytes, the key's length (u32, little-endian), the key and the Arrow
   * stream `stream[at, at + length)` (raptorx_py's `fragment_cache.entry_mac`). */
  def mac(secret: Array[Byte], prefix: Array[Byte], keyBytes: Array[Byte],
          stream: Array[Byte], at: Int, length: Int): Array[Byte] = {
    val mac = Mac.getInstance("HmacSHA256")
    mac.init(new SecretKeySpec(secret, "HmacSHA256"))
    mac.update(prefix, 0, PrefixBytes)
    mac.update(littleEndianInt(keyBytes.length))
    mac.update(keyBytes)
    mac.update(stream, at, length)
    mac.doFinal()
  }

  /** Whether `data`, the whole bytes of the entry of `keyBytes`, is one: long enough, its
   * magic and format ours, its MAC holding under `secret`, and unexpired at `nowMillis`
   * (its Arrow stream then starts at [[HeaderBytes]]). */
  def check(data: Array[Byte], secret: Array[Byte], keyBytes: Array[Byte],
            nowMillis: Long): Boolean = {
    if (data.length < HeaderBytes) return false
    if (new String(data, 0, 4, US_ASCII) != Magic || data(4) != Format) return false
    val expected = java.util.Arrays.copyOfRange(data, PrefixBytes, HeaderBytes)
    val computed = mac(secret, java.util.Arrays.copyOfRange(data, 0, PrefixBytes), keyBytes,
      data, HeaderBytes, data.length - HeaderBytes)
    if (!MessageDigest.isEqual(computed, expected)) return false
    val expires = littleEndianLong(data, 8)
    expires == 0 || nowMillis <= expires
  }

  /** A names file's text for `entries` (key in hex, file bytes). */
  def namesText(entries: Seq[(String, Long)]): Array[Byte] =
    entries.map { case (k, n) => s"$k $n\n" }.mkString.getBytes(US_ASCII)

  /** The bytes a names file's `text` lists (a malformed line counts 0). */
  def listedBytes(text: String): Long =
    text.linesIterator.map { line =>
      line.split(' ') match {
        case Array(_, n) => n.toLongOption.getOrElse(0L)
        case _ => 0L
      }
    }.sum

  private def littleEndianInt(v: Int): Array[Byte] =
    Array(v.toByte, (v >>> 8).toByte, (v >>> 16).toByte, (v >>> 24).toByte)

  private def littleEndianLong(b: Array[Byte], at: Int): Long =
    (0 until 8).foldLeft(0L)((acc, i) => acc | ((b(at + i) & 0xffL) << (8 * i)))
}
