package org.apache.spark.sql.execution.python.raptorx

import scala.util.control.NonFatal

/**
 * Stage input bytes for Spark's UI. Spark 4.3's DSv2 scan sets a task's input bytes, at each
 * update and at its last one (when a reader's stream ends, and in its completion listener,
 * which runs after every listener a reader registers), to what Hadoop's file system
 * statistics counted on the task's thread since the task started; an addition to the task's
 * input metrics is overwritten (measured: 0 bytes). So a reader adds what it read, on the
 * task's thread, to the statistics of a Hadoop file system class of its own
 * ([[InputBytesFileSystem]], never used to read: Hadoop keeps one statistics object per file
 * system class, which its `initialize` registers), and Spark's own count picks it up.
 */
object InputBytes {
  private lazy val statistics: Option[org.apache.hadoop.fs.FileSystem.Statistics] =
    try {
      val fs = new InputBytesFileSystem()
      fs.initialize(new java.net.URI("raptorx:///"),
        new org.apache.hadoop.conf.Configuration(false))
      Option(fs.bytesRead)
    } catch { case NonFatal(_) => None }

  /** Count `bytes` as read by the current thread (a task's: call it on the task's thread). */
  def add(bytes: Long): Unit = if (bytes > 0) statistics.foreach(_.incrementBytesRead(bytes))
}
