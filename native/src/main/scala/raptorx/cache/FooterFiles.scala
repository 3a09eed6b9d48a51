package raptorx.cache

import java.nio.file.{Files, NoSuchFileException, Path}

import raptorx.contract.FooterEntry

/**
 * The footer cache's disk entries, read by the JVM: the JVM's half of raptorx_py's
 * `cache.footer_cache`, in the layout of [[raptorx.contract.FooterEntry]] (entry format
 * `RXFOOT03`: a header, the identity JSON `[url,size,version]`, the footer as a Parquet
 * metadata-only file, HMAC-SHA256 keyed with `<dir>/cache.secret`). Reading only: the JVM
 * neither writes nor deletes footer entries.
 */
object FooterFiles {
  /** The entry of the file at `url` whose identity (as Python encodes it) is `identity`. */
  def path(dir: Path, url: String, identity: Array[Byte]): Path =
    FooterEntry.path(dir, url, identity)

  /** The payload of the entry at `file` if it is whole, its MAC holds under `secret` and it
   * was written for `identity`; None otherwise (absent, torn, forged, another identity). */
  def payload(file: Path, secret: Array[Byte], identity: Array[Byte]): Option[Array[Byte]] = {
    val data = try Files.readAllBytes(file) catch { case _: NoSuchFileException => return None }
    FooterEntry.payload(data, secret, identity)
  }
}
