package raptorx.contract

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}
import java.nio.file.Path
import java.security.MessageDigest
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec

/**
 * A footer cache entry on disk, the JVM's half of raptorx_py's `cache/footer_cache.py`
 * (entry format `RXFOOT03`; the constants are spelled once here and once there). The JVM
 * only reads them (`raptorx.cache.FooterFiles`); the shared vectors in `tests/vectors/`
 * hold one Python wrote.
 *
 * An entry `<dir>/<digest[:2]>/<digest>.footer` ([[path]]; digest: the first 16 hex digits
 * of SHA-256 of the file's URL, then the first 48 of SHA-256 of its identity) is a header
 * (magic `RXFOOT03`, identity length u32, payload length u64, little-endian), the identity
 * (JSON `[url,size,version]`, compact), the payload (the footer as a Parquet metadata-only
 * file) and HMAC-SHA256 keyed with `<dir>/cache.secret` over u32 len(magic) || magic ||
 * everything before it ([[payload]] checks it all).
 */
object FooterEntry {
  val Magic = "RXFOOT03"
  val HeaderBytes = 20
  val MacBytes = 32
  val Suffix = ".footer"

  private val MagicBytes = Magic.getBytes(US_ASCII)

  private def sha256Hex(bytes: Array[Byte]): String =
    MessageDigest.getInstance("SHA-256").digest(bytes).map(b => f"${b & 0xff}%02x").mkString

  /** The entry of the file at `url` whose identity (as Python encodes it) is `identity`. */
  def path(dir: Path, url: String, identity: Array[Byte]): Path = {
    val digest = sha256Hex(url.getBytes(UTF_8)).take(16) + sha256Hex(identity).take(48)
    dir.resolve(digest.take(2)).resolve(digest + Suffix)
  }

  /** The payload of the entry whose whole bytes are `data` if it is whole, its MAC holds
   * under `secret` and it was written for `identity`; None otherwise (torn, forged, another
   * identity). */
  def payload(data: Array[Byte], secret: Array[Byte], identity: Array[Byte]): Option[Array[Byte]] = {
    if (data.length < HeaderBytes + MacBytes) return None
    val header = ByteBuffer.wrap(data, 0, HeaderBytes).order(ByteOrder.LITTLE_ENDIAN)
    val magic = new Array[Byte](8)
    header.get(magic)
    val identLen = header.getInt().toLong & 0xffffffffL
    val payloadLen = header.getLong()
    if (!java.util.Arrays.equals(magic, MagicBytes) || payloadLen < 0 ||
        data.length.toLong != HeaderBytes + identLen + payloadLen + MacBytes) return None
    val bodyLen = data.length - MacBytes
    val mac = Mac.getInstance("HmacSHA256")
    mac.init(new SecretKeySpec(secret, "HmacSHA256"))
    mac.update(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(MagicBytes.length).array())
    mac.update(MagicBytes)
    mac.update(data, 0, bodyLen)
    val expected = java.util.Arrays.copyOfRange(data, bodyLen, data.length)
    if (!MessageDigest.isEqual(mac.doFinal(), expected)) return None
    val ident = java.util.Arrays.copyOfRange(data, HeaderBytes, HeaderBytes + identLen.toInt)
    if (!java.util.Arrays.equals(ident, identity)) return None
    Some(java.util.Arrays.copyOfRange(data, HeaderBytes + identLen.toInt, bodyLen))
  }
}
