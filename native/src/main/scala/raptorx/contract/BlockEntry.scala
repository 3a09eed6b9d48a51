package raptorx.contract

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets.US_ASCII
import java.nio.file.Path
import java.security.MessageDigest
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec

/**
 * A block cache file, the JVM's half of raptorx_py's `cache/block_store.py` (format version
 * 3; the constants are spelled once here and once there). The JVM reads and writes blocks
 * (`raptorx.cache.BlockFiles`); the shared vectors in `tests/vectors/` hold blocks Python
 * wrote.
 *
 * A block `<key>-<index>` (key: lower-case hex, index: decimal: [[isBlockName]]) is the
 * file `<dir>/data/<name[:2]>/<name>` ([[path]]): the payload, then a 48-byte
 * little-endian trailer ([[trailer]]: `RXBC`, version 3, 3 zero bytes, payload length u64,
 * HMAC-SHA256 keyed with the cache's secret over u32 len(name) || name (ASCII) ||
 * payload). [[check]] is the whole test a reader makes of a payload and its trailer. The
 * names file the JVM publishes has one block name a line ([[namesText]]); `<dir>/capacity`,
 * which the Python store writes when it opens, holds its bound and, on a second line, the
 * bytes its index held at its last adoption ([[capacityAndHeld]]).
 */
object BlockEntry {
  val Magic = "RXBC"
  val FormatVersion = 3
  val TrailerBytes = 48
  val MacBytes = 32
  val DataDir = "data"
  val CapacityFile = "capacity"

  private val BlockName = "^[0-9a-f]{8,64}-\\d+$".r
  private val MagicBytes = Magic.getBytes(US_ASCII)

  def path(dir: Path, name: String): Path = dir.resolve(DataDir).resolve(name.substring(0, 2)).resolve(name)

  /** Whether `name` is a block name (`<8-64 lower-case hex>-<decimal>`). */
  def isBlockName(name: String): Boolean = BlockName.matches(name)

  private def mac(secret: Array[Byte], name: String, payload: Array[Byte], length: Int): Array[Byte] = {
    val m = Mac.getInstance("HmacSHA256")
    m.init(new SecretKeySpec(secret, "HmacSHA256"))
    val nameBytes = name.getBytes(US_ASCII)
    m.update(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(nameBytes.length).array())
    m.update(nameBytes)
    m.update(payload, 0, length)
    m.doFinal()
  }

  /** The trailer of a `length`-byte payload named `name`. */
  def trailer(secret: Array[Byte], name: String, payload: Array[Byte], length: Int): Array[Byte] = {
    val b = ByteBuffer.allocate(TrailerBytes).order(ByteOrder.LITTLE_ENDIAN)
    b.put(MagicBytes).put(FormatVersion.toByte).put(new Array[Byte](3)).putLong(length.toLong)
    b.put(mac(secret, name, payload, length))
    b.array()
  }

  /** Whether `trailer` is the one of `payload` (whole) named `name` under `secret`. */
  def check(secret: Array[Byte], name: String, payload: Array[Byte],
            trailer: Array[Byte]): Boolean = {
    val b = ByteBuffer.wrap(trailer).order(ByteOrder.LITTLE_ENDIAN)
    val magic = new Array[Byte](4)
    b.get(magic)
    val version = b.get()
    b.position(8)
    val length = b.getLong()
    val expected = java.util.Arrays.copyOfRange(trailer, TrailerBytes - MacBytes, TrailerBytes)
    java.util.Arrays.equals(magic, MagicBytes) && version == FormatVersion &&
      length == payload.length.toLong &&
      MessageDigest.isEqual(mac(secret, name, payload, payload.length), expected)
  }

  /** A names file's text for the blocks `names`. */
  def namesText(names: Seq[String]): Array[Byte] = names.map(_ + "\n").mkString.getBytes(US_ASCII)

  /** The bound and the bytes held that a capacity file's `text` gives (each None when its
   * line is absent or not a size). */
  def capacityAndHeld(text: String): (Option[Long], Option[Long]) = {
    val lines = text.linesIterator.map(_.trim.toLongOption.filter(_ >= 0)).toIndexedSeq
    (lines.lift(0).flatten, lines.lift(1).flatten)
  }
}
