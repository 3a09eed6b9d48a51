package raptorx

import java.lang.invoke.{MethodHandles, MethodType}
import java.lang.reflect.{Field => JavaField}
import java.util.Properties

import scala.util.Try

/**
 * One member of Spark's internals the jar relies on: a class, a field it reads by reflection,
 * or a method or constructor it links against outside Spark's public API. `member` names it
 * as the compatibility report does; `problem` says what is wrong with it in the running
 * Spark (None: it is there, with the expected type).
 */
sealed trait SparkInternal {
  def member: String
  def problem(loader: ClassLoader): Option[String]
}

object SparkInternal {
  /** The class named `name` (as `Class.getTypeName` spells it), without initializing it. */
  def load(name: String, loader: ClassLoader): Either[String, Class[_]] =
    if (name.endsWith("[]")) load(name.dropRight(2), loader).map(_.arrayType())
    else Primitives.get(name).map(Right(_))
      .getOrElse(Try(Class.forName(name, false, loader)).toEither.left.map(_ => s"no class $name"))

  /** Each of `names`, or the first that is missing. */
  def loadAll(names: Seq[String], loader: ClassLoader): Either[String, List[Class[_]]] =
    names.foldRight[Either[String, List[Class[_]]]](Right(Nil)) { (name, rest) =>
      for (cls <- load(name, loader); others <- rest) yield cls :: others
    }

  /** `types` as the report spells a parameter list. */
  def params(types: Seq[String]): String = types.mkString("(", ", ", ")")
  def params(types: Array[Class[_]]): String = params(types.toSeq.map(_.getTypeName))

  private val Primitives: Map[String, Class[_]] = Seq[Class[_]](java.lang.Void.TYPE,
    java.lang.Boolean.TYPE, java.lang.Byte.TYPE, java.lang.Short.TYPE, java.lang.Character.TYPE,
    java.lang.Integer.TYPE, java.lang.Long.TYPE, java.lang.Float.TYPE, java.lang.Double.TYPE)
    .map(c => c.getName -> c).toMap
}

/** A class (or trait) the jar extends, mixes in or names. */
final case class SparkClass(name: String) extends SparkInternal {
  def member: String = s"class $name"
  def problem(loader: ClassLoader): Option[String] = SparkInternal.load(name, loader).left.toOption
}

/**
 * A field of one of pyspark's classes that the jar reads by reflection (a constructor
 * parameter pyspark keeps private, so its JVM name may carry the owner's mangled prefix,
 * `...$$name`). `fieldType` is the erased type, as `Class.getTypeName` spells it.
 */
final case class ReflectedField(owner: String, name: String, fieldType: String)
    extends SparkInternal {
  def member: String = s"field $owner.$name: $fieldType"

  private def find(cls: Class[_]): Option[JavaField] =
    cls.getDeclaredFields.find(f => f.getName == name || f.getName.endsWith("$$" + name))

  def problem(loader: ClassLoader): Option[String] =
    SparkInternal.load(owner, loader) match {
      case Left(missing) => Some(missing)
      case Right(cls) => find(cls) match {
        case None => Some("no such field")
        case Some(f) if f.getType.getTypeName != fieldType =>
          Some(s"its type is ${f.getType.getTypeName}")
        case Some(_) => None
      }
    }

  /** This field's value in `instance` (an instance of `owner`). */
  def get[T](instance: AnyRef): T = {
    val f = find(instance.getClass).getOrElse(throw new IllegalStateException(
      s"raptorx native: ${instance.getClass.getName} has no field '$name'; " +
        NativeCompatibility.RebuildHint))
    f.setAccessible(true)
    f.get(instance).asInstanceOf[T]
  }

  /** Set this field in `instance` (an instance of `owner`, or of a class extending it). */
  def set(instance: AnyRef, value: AnyRef): Unit = {
    val f = SparkInternal.load(owner, instance.getClass.getClassLoader).toOption.flatMap(find)
      .getOrElse(throw new IllegalStateException(s"raptorx native: $owner has no field " +
        s"'$name'; " + NativeCompatibility.RebuildHint))
    f.setAccessible(true)
    f.set(instance, value)
  }
}

/**
 * A public (in bytecode) method or constructor (`name` "<init>") of one of Spark's internal
 * classes the jar calls: the JVM links a call by owner, name, parameter types and return
 * type, so all four must match. Types are erased, as `Class.getTypeName` spells them.
 */
final case class LinkedMethod(owner: String, name: String, parameterTypes: Seq[String],
    returnType: String = "void") extends SparkInternal {
  import SparkInternal.params

  def member: String =
    if (name == "<init>") s"constructor $owner${params(parameterTypes)}"
    else s"method $owner.$name${params(parameterTypes)}: $returnType"

  def problem(loader: ClassLoader): Option[String] = {
    val resolved = for {
      cls <- SparkInternal.load(owner, loader)
      result <- SparkInternal.load(returnType, loader)
      parameters <- SparkInternal.loadAll(parameterTypes, loader)
    } yield (cls, MethodType.methodType(result, parameters.toArray))
    resolved match {
      case Left(missing) => Some(missing)
      case Right((cls, methodType)) =>
        // The JVM's own resolution of a call, by descriptor: unlike `getMethods`, it does not
        // load the types of every other method of the class (some name classes, protobuf's
        // for one, that are not on a session's classpath).
        val lookup = MethodHandles.publicLookup()
        val found = Try {
          if (name == "<init>") lookup.findConstructor(cls, methodType)
          else Try(lookup.findVirtual(cls, name, methodType))
            .getOrElse(lookup.findStatic(cls, name, methodType))
        }
        if (found.isSuccess) None else Some(s"no such $kind${sameName(cls)}")
    }
  }

  private def kind: String = if (name == "<init>") "constructor" else "method"

  /** What the class has under this name instead, when Java reflection can list it. */
  private def sameName(cls: Class[_]): String = Try {
    val found =
      if (name == "<init>") cls.getConstructors.toSeq.map(c => params(c.getParameterTypes))
      else cls.getDeclaredMethods.toSeq.filter(_.getName == name)
        .map(m => s"${params(m.getParameterTypes)}: ${m.getReturnType.getTypeName}")
    if (found.isEmpty) "" else found.mkString("; found only ", ", ", "")
  }.getOrElse("")
}

/**
 * Whether the running Spark has every internal the jar uses beyond Spark's public API: the
 * fields `ArrowColumnarReader` reads by reflection (pyspark's private constructor fields of
 * `PythonPartitionReaderFactory` and `MapInBatchEvaluatorFactory`), and the `private[sql]`/
 * `private[spark]` classes, constructors and methods the provider, the columnar reader and
 * soft affinity call ([[NativeCompatibility.Expected]]; a change in native/src that uses
 * another internal adds it there).
 *
 * Why: the jar is compiled against one pyspark; run against another, a renamed field or a
 * changed signature would fail only when a query first reads (a missing field, a
 * `NoSuchMethodError` in a task). [[check]] runs when the first [[TieredHiveProvider]] is
 * made, and raptorx_py calls [[report]] when it registers the source (`tiered_session()`),
 * so a mismatch fails there, with one message naming every missing member, the pyspark found
 * and the one the jar was built against.
 *
 * Each member is looked up once per JVM (`Class.forName` without initialization and the
 * class's declared fields or public methods): milliseconds.
 */
object NativeCompatibility {
  /** What to do about a mismatch: run the pyspark the jar was built against (the one the
   * raptorx_py wheel that carries it requires), or rebuild the jar with this one. */
  def RebuildHint: String = s"install the pyspark the raptorx jar was built against " +
    s"(pip install pyspark==$builtAgainst: the version the raptorx_py wheel requires), or " +
    "rebuild the raptorx jar with this pyspark (make native, or native/build.sh), adapting " +
    "native/src where it no longer compiles; without the jar, tiered_hive still reads " +
    "(without pushdown)"

  /** Written by native/build.sh: the pyspark the jar was compiled against. */
  val BuildInfoResource = "raptorx/native-build.properties"

  private val DsPython = "org.apache.spark.sql.execution.datasources.v2.python."
  private val ExecPython = "org.apache.spark.sql.execution.python."
  private val StructType = "org.apache.spark.sql.types.StructType"
  private val StringType = "java.lang.String"
  private val OptionType = "scala.Option"
  private val SeqType = "scala.collection.immutable.Seq"
  private val MapType = "scala.collection.immutable.Map"
  private val OptionsMap = "org.apache.spark.sql.util.CaseInsensitiveStringMap"

  /** pyspark's `PythonPartitionReaderFactory`: what its row reader runs, read by reflection
   * to run the same read columnar. */
  object ReaderFactory {
    val Owner: String = DsPython + "PythonPartitionReaderFactory"
    val source: ReflectedField = ReflectedField(Owner, "source", DsPython + "UserDefinedPythonDataSource")
    val pickledReadFunc: ReflectedField = ReflectedField(Owner, "pickledReadFunc", "byte[]")
    val outputSchema: ReflectedField = ReflectedField(Owner, "outputSchema", StructType)
    val jobArtifactUUID: ReflectedField = ReflectedField(Owner, "jobArtifactUUID", OptionType)
    val sessionUUID: ReflectedField = ReflectedField(Owner, "sessionUUID", OptionType)
    val All: Seq[ReflectedField] =
      Seq(source, pickledReadFunc, outputSchema, jobArtifactUUID, sessionUUID)
  }

  /** pyspark's `MapInBatchEvaluatorFactory`: the Python runner's arguments, read by
   * reflection to build the runner itself. */
  object EvaluatorFactory {
    val Owner: String = ExecPython + "MapInBatchEvaluatorFactory"
    val chainedFunc: ReflectedField = ReflectedField(Owner, "chainedFunc", SeqType)
    val pythonEvalType: ReflectedField = ReflectedField(Owner, "pythonEvalType", "int")
    val inputSchema: ReflectedField = ReflectedField(Owner, "inputSchema", StructType)
    val sessionLocalTimeZone: ReflectedField =
      ReflectedField(Owner, "sessionLocalTimeZone", StringType)
    val largeVarTypes: ReflectedField = ReflectedField(Owner, "largeVarTypes", "boolean")
    val pythonRunnerConf: ReflectedField = ReflectedField(Owner, "pythonRunnerConf", MapType)
    val jobArtifactUUID: ReflectedField = ReflectedField(Owner, "jobArtifactUUID", OptionType)
    val sessionUUID: ReflectedField = ReflectedField(Owner, "sessionUUID", OptionType)
    val All: Seq[ReflectedField] = Seq(chainedFunc, pythonEvalType, inputSchema,
      sessionLocalTimeZone, largeVarTypes, pythonRunnerConf, jobArtifactUUID, sessionUUID)
  }

  /** Spark's vectorized ORC reader, as `OrcSplitReader` builds it and
   * `StripeCachingOrcReader` extends it. */
  object OrcReader {
    private val Orc = "org.apache.spark.sql.execution.datasources.orc."
    val Owner: String = Orc + "OrcColumnarBatchReader"
    val recordReader: ReflectedField = ReflectedField(Owner, "recordReader", "org.apache.orc.RecordReader")
    private val Hadoop = "org.apache.hadoop.conf.Configuration"
    lazy val Linked: Seq[SparkInternal] = Seq(
      recordReader,
      LinkedMethod(Owner, "<init>", Seq("int", "org.apache.spark.memory.MemoryMode")),
      LinkedMethod(Owner, "initialize", Seq("org.apache.hadoop.mapreduce.InputSplit",
        "org.apache.hadoop.mapreduce.TaskAttemptContext", "org.apache.orc.impl.OrcTail",
        "org.apache.hadoop.hive.ql.io.sarg.SearchArgument")),
      LinkedMethod(Owner, "initBatch", Seq("org.apache.orc.TypeDescription",
        "org.apache.spark.sql.types.StructField[]", "int[]", "int[]",
        "org.apache.spark.sql.catalyst.InternalRow")),
      LinkedMethod(Orc + "OrcUtils$", "requestedColumnIds", Seq("boolean", StructType,
        StructType, "org.apache.orc.TypeDescription", Hadoop), OptionType),
      LinkedMethod(Orc + "OrcUtils$", "orcResultSchemaString", Seq("boolean", StructType,
        StructType, StructType, Hadoop), StringType),
      LinkedMethod(Orc + "OrcUtils$", "toCatalystSchema", Seq("org.apache.orc.TypeDescription"),
        StructType),
      LinkedMethod(Orc + "OrcFilters$", "createFilter", Seq(StructType, SeqType, OptionType),
        OptionType))
  }

  // `Linked` and `Expected` are lazy: an executor's first touch of this object may come from
  // `ReaderFactory` (the columnar reader), whose initializer reads the prefixes above and so
  // initializes this object; eager, `Expected` would read `ReaderFactory.All` while it is
  // still null (ExceptionInInitializerError in every task of a fresh executor JVM).

  /** The internal classes, constructors and methods native/src calls. */
  lazy val Linked: Seq[SparkInternal] = {
    val v2 = DsPython + "PythonDataSourceV2"
    val created = DsPython + "PythonDataSourceCreationResult"
    val scanBuilder = DsPython + "PythonScanBuilder"
    val partition = DsPython + "PythonInputPartition"
    val udpds = DsPython + "UserDefinedPythonDataSource"
    val runner = ExecPython + "ArrowPythonRunner"
    val filters = "org.apache.spark.sql.sources.Filter[]"
    val readInfo = DsPython + "PythonDataSourceReadInfo"
    val createRunner = DsPython + "UserDefinedPythonDataSourceRunner"
    val planRunner = DsPython + "UserDefinedPythonDataSourceFilterPushdownRunner"
    val pushdown = DsPython + "PythonFilterPushdownResult"
    Seq(
      // TieredHiveProvider: a fresh pyspark source per scan, its scan and write builders
      LinkedMethod(v2, "<init>", Seq()),
      LinkedMethod(v2, "setShortName", Seq(StringType)),
      // CreatedPythonDataSource overrides it: a changed signature would stop the override
      LinkedMethod(v2, "getOrCreateDataSourceInPython", Seq(StringType, OptionsMap, OptionType),
        created),
      LinkedMethod(created, "schema", Seq(), StructType),
      LinkedMethod(scanBuilder, "<init>", Seq(v2, StringType, StructType, OptionsMap)),
      LinkedMethod(scanBuilder, "pushFilters", Seq(filters), filters),
      LinkedMethod(scanBuilder, "build", Seq(), "org.apache.spark.sql.connector.read.Scan"),
      LinkedMethod(DsPython + "PythonWriteBuilder", "<init>",
        Seq(v2, StringType, "org.apache.spark.sql.connector.write.LogicalWriteInfo")),
      // ArrowColumnarReader and Affinity: the partition, the Python runner, the metrics
      LinkedMethod(partition, "<init>", Seq("int", "byte[]")),
      LinkedMethod(partition, "index", Seq(), "int"),
      LinkedMethod(partition, "pickedPartition", Seq(), "byte[]"),
      LinkedMethod(udpds, "createMapInBatchEvaluatorFactory",
        Seq("byte[]", StringType, StructType, StructType, MapType, OptionType, OptionType),
        EvaluatorFactory.Owner),
      LinkedMethod(udpds, "createPythonTaskMetrics", Seq(MapType),
        "org.apache.spark.sql.connector.metric.CustomTaskMetric[]"),
      LinkedMethod(udpds + "$", "readInputSchema", Seq(), StructType),
      LinkedMethod(DsPython + "PythonCustomMetric$", "pythonMetrics", Seq(), MapType),
      LinkedMethod(EvaluatorFactory.Owner, "pythonMetrics", Seq(), MapType),
      LinkedMethod(runner, "<init>", Seq(SeqType, "int", "int[][]", StructType, StringType,
        "boolean", MapType, MapType, OptionType, OptionType)),
      LinkedMethod(runner, "compute", Seq("scala.collection.Iterator", "int",
        "org.apache.spark.TaskContext"), "scala.collection.Iterator"),
      SparkClass(ExecPython + "BatchedPythonArrowInput"),
      // FragmentHits: Arrow schemas as Spark types, Spark's Arrow allocator, type equality
      LinkedMethod("org.apache.spark.sql.util.ArrowUtils", "fromArrowSchema",
        Seq("org.apache.arrow.vector.types.pojo.Schema"), StructType),
      LinkedMethod("org.apache.spark.sql.util.ArrowUtils", "rootAllocator", Seq(),
        "org.apache.arrow.memory.RootAllocator"),
      // SplitServingReader: fragment entries' ZSTD-compressed Arrow buffers, read with the
      // arrow-compression and zstd-jni jars pyspark ships
      LinkedMethod("org.apache.arrow.vector.ipc.ArrowStreamReader", "<init>",
        Seq("java.io.InputStream", "org.apache.arrow.memory.BufferAllocator",
          "org.apache.arrow.vector.compression.CompressionCodec$Factory")),
      SparkClass("org.apache.arrow.compression.CommonsCompressionFactory"),
      SparkClass("org.apache.arrow.compression.ZstdCompressionCodec"),
      SparkClass("com.github.luben.zstd.Zstd"),
      LinkedMethod("org.apache.spark.sql.types.DataType$", "equalsStructurally",
        Seq("org.apache.spark.sql.types.DataType", "org.apache.spark.sql.types.DataType",
          "boolean"), "boolean"),
      LinkedMethod("org.apache.spark.SparkEnv", "blockManager", Seq(),
        "org.apache.spark.storage.BlockManager"),
      LinkedMethod("org.apache.spark.storage.BlockManager", "master", Seq(),
        "org.apache.spark.storage.BlockManagerMaster"),
      LinkedMethod("org.apache.spark.storage.BlockManagerMaster", "getMemoryStatus", Seq(),
        MapType),
      // PlannedPython: pyspark's planning protocol through the driver's planner
      LinkedMethod(v2, "source", Seq(), udpds),
      LinkedMethod(v2, "setReadInfo", Seq(readInfo)),
      LinkedMethod(udpds, "dataSourceCls", Seq(), "org.apache.spark.api.python.PythonFunction"),
      LinkedMethod(udpds, "createPythonFunction", Seq("byte[]"),
        "org.apache.spark.api.python.PythonFunction"),
      LinkedMethod(createRunner, "<init>", Seq("org.apache.spark.api.python.PythonFunction",
        StringType, OptionType, "org.apache.spark.sql.catalyst.util.CaseInsensitiveMap")),
      LinkedMethod(createRunner, "writeToPython", Seq("java.io.DataOutputStream",
        "net.razorvine.pickle.Pickler")),
      LinkedMethod(createRunner, "receiveFromPython", Seq("java.io.DataInputStream"), created),
      LinkedMethod(planRunner, "<init>", Seq("org.apache.spark.api.python.PythonFunction",
        StructType, "scala.collection.Seq")),
      LinkedMethod(planRunner, "writeToPython", Seq("java.io.DataOutputStream",
        "net.razorvine.pickle.Pickler")),
      LinkedMethod(planRunner, "receiveFromPython", Seq("java.io.DataInputStream"), pushdown),
      // PlanRequest: the runner's request and answer, without the runner
      LinkedMethod("org.apache.spark.api.python.PythonWorkerUtils$", "writePythonFunction",
        Seq("org.apache.spark.api.python.PythonFunction", "java.io.DataOutputStream")),
      LinkedMethod("org.apache.spark.api.python.PythonWorkerUtils$", "writeUTF",
        Seq(StringType, "java.io.DataOutputStream")),
      LinkedMethod(readInfo + "$", "receive", Seq("java.io.DataInputStream"), readInfo),
      LinkedMethod(pushdown, "<init>", Seq(readInfo, "scala.collection.Seq")),
      LinkedMethod("org.apache.spark.sql.catalyst.expressions.variant.VariantExpressionEvalUtils$",
        "castToVariant", Seq("java.lang.Object", "org.apache.spark.sql.types.DataType"),
        "org.apache.spark.unsafe.types.VariantVal"),
      LinkedMethod("org.apache.spark.sql.catalyst.CatalystTypeConverters$", "convertToCatalyst",
        Seq("java.lang.Object"), "java.lang.Object"),
      LinkedMethod(pushdown, "readInfo", Seq(), readInfo),
      LinkedMethod(pushdown, "isFilterPushed", Seq(), "scala.collection.Seq"),
      LinkedMethod(DsPython + "PythonScan", "<init>",
        Seq(v2, StringType, StructType, OptionsMap, filters)),
      LinkedMethod("org.apache.spark.api.python.PythonException", "<init>", Seq(StringType,
        "java.lang.Throwable", OptionType, MapType, "org.apache.spark.QueryContext[]")))
  }

  /** Everything the jar expects of Spark's internals. */
  lazy val Expected: Seq[SparkInternal] =
    ReaderFactory.All ++ EvaluatorFactory.All ++ Linked ++ OrcReader.Linked

  /** The pyspark the jar was built against ("unknown" for a jar built without build.sh). */
  lazy val builtAgainst: String = Try {
    val props = new Properties()
    val in = getClass.getClassLoader.getResourceAsStream(BuildInfoResource)
    try props.load(in) finally in.close()
    props.getProperty("pyspark.version")
  }.toOption.flatMap(Option(_)).getOrElse("unknown")

  /** What is wrong with `expected` in the running Spark, one line per member; "" when
   * nothing is. */
  def reportFor(expected: Seq[SparkInternal]): String = {
    val loader = getClass.getClassLoader
    val problems = expected.flatMap(e => e.problem(loader).map(p => s"  - ${e.member}: $p"))
    if (problems.isEmpty) return ""
    val header = s"raptorx native: this Spark (pyspark ${org.apache.spark.SPARK_VERSION}) " +
      s"lacks internals the raptorx jar (built against pyspark $builtAgainst) uses:"
    (header +: problems :+ RebuildHint).mkString("\n")
  }

  private lazy val expectedReport: String = reportFor(Expected)

  /** [[reportFor]] [[Expected]], computed once per JVM; "" when the jar matches this Spark.
   * What raptorx_py calls when it registers the source. */
  def report(): String = expectedReport

  /** [[report]] with one more expected member: how a test shows what a mismatch reports. */
  def reportWith(extra: SparkInternal): String = reportFor(Expected :+ extra)

  /** Fails, with [[report]] as the message, unless the jar matches this Spark. */
  def check(): Unit = {
    val problems = report()
    if (problems.nonEmpty) throw new IllegalStateException(problems)
  }
}
