"""The jar's check of the pyspark internals it uses (``raptorx.NativeCompatibility``): it passes
against the installed pyspark, it names each member that is missing or of another type, and
``register`` (so ``tiered_session()``) fails with that report instead of a query failing later.
"""

from __future__ import annotations

import pyspark
import pytest

from raptorx_py import native, session
from raptorx_py.errors import NativeJarError

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(native.jar_path() is None, reason="needs the native jar (make native)"),
]

READER_FACTORY = "org.apache.spark.sql.execution.datasources.v2.python.PythonPartitionReaderFactory"
INPUT_PARTITION = "org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition"


@pytest.fixture
def jvm_check(spark):
    assert native.provider_loadable(spark), "the native jar must be on the test session's classpath"
    return spark.sparkContext._jvm.raptorx.NativeCompatibility


def _scala_seq(spark, items):
    jvm = spark.sparkContext._jvm
    java_list = jvm.java.util.ArrayList()
    for item in items:
        java_list.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(java_list).toList()


def test_the_jar_matches_the_installed_pyspark(spark, jvm_check):
    report = native.compatibility_report(spark)
    assert report == "", report
    jvm_check.check()  # what the provider runs before its first read: does not raise
    assert jvm_check.builtAgainst() == pyspark.__version__  # recorded by native/build.sh


def test_a_missing_field_is_named_with_both_pyspark_versions(spark, jvm_check):
    missing = spark.sparkContext._jvm.raptorx.ReflectedField(
        READER_FACTORY, "pickledReadFunction", "byte[]"
    )
    report = jvm_check.reportWith(missing)
    assert f"field {READER_FACTORY}.pickledReadFunction: byte[]: no such field" in report
    assert f"this Spark (pyspark {pyspark.__version__})" in report
    assert f"built against pyspark {pyspark.__version__}" in report
    assert "make native" in report
    # ... and the pyspark to install instead: the one the wheel carrying the jar requires
    assert f"pip install pyspark=={pyspark.__version__}: the version" in report
    assert report.count("\n  - ") == 1  # the members that are there are not listed


def test_a_field_of_another_type_is_named_with_the_type_found(spark, jvm_check):
    retyped = spark.sparkContext._jvm.raptorx.ReflectedField(
        READER_FACTORY, "pickledReadFunc", "java.lang.String"
    )
    report = jvm_check.reportWith(retyped)
    assert f"field {READER_FACTORY}.pickledReadFunc: java.lang.String: its type is byte[]" in report


def test_a_changed_constructor_and_a_missing_class_are_named(spark, jvm_check):
    jvm = spark.sparkContext._jvm
    constructor = jvm.raptorx.LinkedMethod(
        INPUT_PARTITION, "<init>", _scala_seq(spark, ["int", "byte[]", "java.lang.String"]), "void"
    )
    report = jvm_check.reportWith(constructor)
    assert (
        f"constructor {INPUT_PARTITION}(int, byte[], java.lang.String): "
        "no such constructor; found only (int, byte[])" in report
    )
    gone = jvm.raptorx.SparkClass(READER_FACTORY + "V2")
    assert f"class {READER_FACTORY}V2: no class {READER_FACTORY}V2" in jvm_check.reportWith(gone)


def test_register_fails_with_the_report(spark, env, monkeypatch):
    report = (
        "raptorx native: this Spark (pyspark 9.9.9) lacks internals the raptorx jar (built "
        f"against pyspark {pyspark.__version__}) uses:\n"
        f"  - field {READER_FACTORY}.source: x: no such field"
    )
    monkeypatch.setattr(native, "compatibility_report", lambda _spark: report)
    with pytest.raises(NativeJarError) as raised:
        session.register(spark, properties=env.properties)
    assert str(raised.value) == report


FIRST_TOUCH = """
public class FirstTouch {
    public static void main(String[] args) throws Exception {
        Object module = Class.forName(args[0]).getField("MODULE$").get(null);
        System.out.println(module == null ? "null" : "initialized");
    }
}
"""


@pytest.fixture(scope="module")
def first_touch(tmp_path_factory):
    """``FirstTouch`` compiled once for the module (it uses only ``java.lang``): each test's
    fresh JVM runs the class instead of compiling the source again."""
    import subprocess

    classes = tmp_path_factory.mktemp("first-touch")
    (classes / "FirstTouch.java").write_text(FIRST_TOUCH)
    done = subprocess.run(
        ["javac", "-d", str(classes), str(classes / "FirstTouch.java")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return classes


@pytest.mark.parametrize(
    "scala_object",
    [
        "raptorx.NativeCompatibility$",
        "raptorx.NativeCompatibility$ReaderFactory$",
        "raptorx.NativeCompatibility$EvaluatorFactory$",
    ],
)
def test_each_object_initializes_when_touched_first_in_a_fresh_jvm(first_touch, scala_object):
    """An executor's JVM may touch any of these first (the columnar reader reads
    ``ReaderFactory``'s fields before anything else runs the check): an initialization order
    that only works when the driver's check ran first failed every task on a cluster."""
    import subprocess
    from pathlib import Path

    jars = Path(pyspark.__file__).parent / "jars" / "*"
    done = subprocess.run(
        ["java", "-cp", f"{first_touch}:{native.jar_path()}:{jars}", "FirstTouch", scala_object],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "initialized", done.stderr[-3000:]
