package raptorx.contract

/**
 * What the block cache's and the fragment result cache's directories share, the JVM's half
 * of raptorx_py's `cache/cache_files.py` (the constants are spelled once here and once
 * there): the cache's secret `<dir>/cache.secret` (32 random bytes, the key of every entry's
 * HMAC-SHA256), the temporary files a publish writes under `<dir>/tmp/` and renames into
 * place, and the names files `<dir>/adopt/<pid>.<16 hex>.names` by which the JVM tells the
 * Python index what it published (each cache's lines: [[BlockEntry.namesText]],
 * [[FragmentEntry.namesText]]).
 */
object CacheFiles {
  val SecretFile = "cache.secret"
  val SecretBytes = 32
  val TmpDir = "tmp"
  val TempSuffix = ".part"
  val AdoptDir = "adopt"
  val NamesSuffix = ".names"
}
