package org.apache.spark.sql.execution.python.raptorx

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.FileSystem
import org.apache.hadoop.hive.ql.io.sarg.SearchArgument
import org.apache.hadoop.mapreduce.{InputSplit, JobID, TaskAttemptContext, TaskAttemptID, TaskID, TaskType}
import org.apache.hadoop.mapreduce.lib.input.FileSplit
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl
import org.apache.orc.{OrcConf, OrcFile, TypeDescription}
import org.apache.orc.impl.{DataReaderProperties, InStream, OrcCodecPool, OrcTail, RecordReaderUtils}
import org.apache.orc.mapred.OrcInputFormat

import org.apache.spark.TaskContext
import org.apache.spark.memory.MemoryMode
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.execution.datasources.{PartitionedFile, RecordReaderIterator}
import org.apache.spark.sql.execution.datasources.orc.{OrcColumnarBatchReader, OrcFilters, OrcUtils}
import org.apache.spark.sql.sources
import org.apache.spark.sql.types.StructType
import org.apache.spark.util.{SerializableConfiguration, Utils}

import raptorx.NativeCompatibility
import raptorx.cache.{CachedFiles, OrcStripeCache, OrcTailCache, StripeCachingDataReader, TaskCounts}

/**
 * Spark's vectorized ORC reader for one split, as `OrcFileFormat.buildReaderWithPartitionValues`
 * (Spark 4.3) builds it for a batch read, with one difference: the file's tail comes from
 * the JVM's [[raptorx.cache.OrcTailCache]] when the split's file registered one
 * ([[raptorx.cache.CachedFile]]`.orcTails`), and a tail read from the file is kept there.
 * With a stripe metadata cache ([[raptorx.cache.OrcStripeCache]]) the record reader is
 * built by [[StripeCachingOrcReader]], whose data reader keeps stripe footers and index
 * streams.
 * The reader itself (`OrcColumnarBatchReader`: column pruning, the search argument built
 * from the pushed filters, which skips stripes and row groups by their statistics, schema
 * evolution by name or position) is Spark's, given the tail as Spark gives it the one it
 * read (`initialize(split, context, tail, sarg)`).
 *
 * `dataSchema` is the table's data columns, `requiredSchema` those the scan reads: a file
 * written by old Hive names its columns `_col0`, `_col1`... and is read by position in the
 * whole data schema, as Spark does.
 *
 * Only the batch path: [[JvmFileRead.prepare]] builds this only where Spark's reader returns
 * batches for the scan's columns (`supportBatch`).
 */
private[raptorx] object OrcSplitReader {
  def build(spark: SparkSession, dataSchema: StructType, requiredSchema: StructType,
            partitionSchema: StructType,
            filters: Seq[sources.Filter], hadoopConf: Configuration)
      : PartitionedFile => Iterator[InternalRow] = {
    val resultSchema = StructType(requiredSchema.fields ++ partitionSchema.fields)
    val sqlConf = spark.sessionState.conf
    val capacity = sqlConf.orcVectorizedReaderBatchSize
    val memoryMode = if (sqlConf.offHeapColumnVectorEnabled) MemoryMode.OFF_HEAP else MemoryMode.ON_HEAP
    OrcConf.IS_SCHEMA_EVOLUTION_CASE_SENSITIVE.setBoolean(hadoopConf, sqlConf.caseSensitiveAnalysis)
    val broadcastConf = SerializableConfiguration.broadcast(spark.sparkContext, hadoopConf)
    val isCaseSensitive = sqlConf.caseSensitiveAnalysis
    val filterPushDown = sqlConf.orcFilterPushDown

    (file: PartitionedFile) => {
      val conf = broadcastConf.value.value
      val filePath = file.toPath
      val fs = filePath.getFileSystem(conf)
      val readerOptions = OrcFile.readerOptions(conf).filesystem(fs)
      val cached = CachedFiles.find(filePath)
      val tails = cached.flatMap(f => Option(f.orcTails))
      val tailKey = cached.map(f => OrcTailCache.key(f.remote, f.size, f.version)).orNull
      for (c <- tails; f <- cached; tail <- c.get(tailKey, f.size, f.counts)) {
        readerOptions.orcTail(tail)
      }
      val fromCache = readerOptions.getOrcTail != null
      val orcSchema = Utils.tryWithResource(OrcFile.createReader(filePath, readerOptions))(_.getSchema)
      // The reader keeps the tail it read in the options: kept for the next split.
      if (!fromCache) {
        for (c <- tails; f <- cached; tail <- Option(readerOptions.getOrcTail)) {
          c.put(tailKey, tail, f.counts)
        }
      }
      val prune = OrcUtils.requestedColumnIds(isCaseSensitive, dataSchema, requiredSchema,
        orcSchema, conf)
      if (prune.isEmpty) Iterator.empty
      else {
        val sarg = if (filterPushDown && filters.nonEmpty) {
          OrcFilters.createFilter(OrcUtils.toCatalystSchema(orcSchema), filters, Some(requiredSchema))
        } else None
        val (requestedColIds, canPruneCols) = prune.get
        val resultSchemaString = OrcUtils.orcResultSchemaString(canPruneCols, dataSchema,
          resultSchema, partitionSchema, conf)
        require(requestedColIds.length == requiredSchema.length,
          "requested column ids do not match the required schema")
        val taskConf = new Configuration(conf)
        taskConf.set(OrcConf.INCLUDE_COLUMNS.getAttribute,
          requestedColIds.filter(_ != -1).sorted.mkString(","))
        val fileSplit = new FileSplit(filePath, file.start, file.length, Array.empty[String])
        val attemptId = new TaskAttemptID(new TaskID(new JobID(), TaskType.MAP, 0), 0)
        val context = new TaskAttemptContextImpl(taskConf, attemptId)
        val stripes = for (f <- cached; c <- Option(f.orcStripes)) yield (c, f.counts)
        val batchReader = stripes match {
          case Some((c, counts)) => new StripeCachingOrcReader(capacity, memoryMode, c, tailKey, counts)
          case None => new OrcColumnarBatchReader(capacity, memoryMode)
        }
        // Closed at the task's end in all cases, as Spark's own (SPARK-23399).
        val iter = new RecordReaderIterator(batchReader)
        Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit](_ => iter.close()))
        val requestedDataColIds = requestedColIds ++ Array.fill(partitionSchema.length)(-1)
        val requestedPartitionColIds =
          Array.fill(requiredSchema.length)(-1) ++ Range(0, partitionSchema.length)
        batchReader.initialize(fileSplit, context, readerOptions.getOrcTail, sarg.orNull)
        batchReader.initBatch(TypeDescription.fromString(resultSchemaString), resultSchema.fields,
          requestedDataColIds, requestedPartitionColIds, file.partitionValues)
        iter.asInstanceOf[Iterator[InternalRow]]
      }
    }
  }
}

/**
 * Spark's vectorized ORC reader whose ORC record reader reads stripe footers and index
 * streams through [[raptorx.cache.OrcStripeCache]]. `initialize` makes the record reader
 * as Spark's does (the file's tail given, ORC's options from the Hadoop settings and the
 * split's range, the search argument by the file's field names) with one more option: a
 * [[raptorx.cache.StripeCachingDataReader]] in front of ORC's own data reader, made as
 * ORC makes its default. Spark's batch reader keeps the record reader in a private field,
 * set here by reflection ([[raptorx.NativeCompatibility.OrcReader]] checks it exists); the
 * batches are Spark's.
 */
private[raptorx] final class StripeCachingOrcReader(capacity: Int, mode: MemoryMode,
    cache: OrcStripeCache, fileKey: String, counts: TaskCounts)
    extends OrcColumnarBatchReader(capacity, mode) {

  override def initialize(split: InputSplit, context: TaskAttemptContext, tail: OrcTail,
                          sarg: SearchArgument): Unit = {
    val fileSplit = split.asInstanceOf[FileSplit]
    val conf = context.getConfiguration
    val path = fileSplit.getPath
    val fs: FileSystem = path.getFileSystem(conf)
    val reader = OrcFile.createReader(path, OrcFile.readerOptions(conf)
      .maxLength(OrcConf.MAX_FILE_LENGTH.getLong(conf)).filesystem(fs).orcTail(tail))
    try {
      val options = OrcInputFormat.buildOptions(conf, reader, fileSplit.getStart,
        fileSplit.getLength)
      if (sarg != null) {
        options.searchArgument(sarg, reader.getSchema.getFieldNames.toArray(new Array[String](0)))
      }
      val zeroCopy = Option(options.getUseZeroCopy).map(_.booleanValue)
        .getOrElse(OrcConf.USE_ZEROCOPY.getBoolean(conf))
      val inner = RecordReaderUtils.createDefaultDataReader(DataReaderProperties.builder()
        .withCompression(InStream.options()
          .withCodec(OrcCodecPool.getCodec(reader.getCompressionKind))
          .withBufferSize(reader.getCompressionSize))
        .withFileSystem(fs)
        .withPath(path)
        .withMaxDiskRangeChunkLimit(OrcConf.ORC_MAX_DISK_RANGE_CHUNK_LIMIT.getInt(conf))
        .withZeroCopy(zeroCopy)
        .withMinSeekSize(options.minSeekSize())
        .withMinSeekSizeTolerance(options.minSeekSizeTolerance())
        .build())
      // ORC's record reader reads through a clone of the data reader it is given; this one,
      // never opened, only gives its codec back to ORC's pool when closed.
      val template = new StripeCachingDataReader(inner, cache, fileKey, counts)
      options.dataReader(template)
      val rows = try reader.rows(options) finally template.close()
      NativeCompatibility.OrcReader.recordReader.set(this, rows)
    } finally reader.close()
  }
}
