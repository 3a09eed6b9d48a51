package org.apache.spark.sql.execution.python.raptorx

/** The file system class whose Hadoop statistics carry raptorx's input bytes ([[InputBytes]]). */
class InputBytesFileSystem extends org.apache.hadoop.fs.RawLocalFileSystem {
  def bytesRead: org.apache.hadoop.fs.FileSystem.Statistics = statistics
}
