"""The library a user installs with pip. The wheel built from the checkout
(``tests/support/wheel_fixtures.py``) carries the native jar once and nothing of the tests, the
benchmarks or the build machine's paths; installed into a fresh virtualenv outside the
checkout, and run from another directory, it reads through ``tiered_hive`` with the jar's
pushdown, scan metrics, catalog and JVM fragment hits, and its ``raptorx --version`` and
``raptorx jar`` name the jar inside it. The standalone cluster's read from the installed
package is ``test_soft_affinity_cluster.py::test_fragment_hits_are_served_by_each_executors_jvm``
(on that module's cluster)."""

from __future__ import annotations

import json
import shutil
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
import pytest

from raptorx_py import native
from raptorx_py.config import TIERS_OFF
from tests.support.jvm_options import spark_jvm_conf
from tests.support.wheel_fixtures import BUILT_JAR, CHECKOUT

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(native.jar_path() is None, reason="needs the native jar (make native)"),
]

APP = Path(__file__).parents[1] / "support" / "wheel_app.py"
JAR_ENTRY = "raptorx_py/jars/raptorx-native.jar"
DAYS, ROWS = ("2021-01-01", "2021-01-02", "2021-01-03"), 100


def package_version() -> str:
    with open(CHECKOUT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def run_app(wheel_venv, work: Path, spec: dict) -> dict:
    """Run ``wheel_app.py`` (copied into ``work``, outside the checkout) with the wheel's
    interpreter, from ``work``; its JSON line."""
    app = work / APP.name
    shutil.copyfile(APP, app)
    done = wheel_venv.run(
        [
            wheel_venv.python,
            str(app),
            # C1 only and the serial collector for the application's JVM (jvm_options.py)
            json.dumps({"checkout": str(CHECKOUT), "spark_conf": spark_jvm_conf(), **spec}),
        ],
        cwd=work,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def installed_jar(wheel_venv) -> str:
    (site,) = (wheel_venv.root / "lib").glob("python3*/site-packages")
    return str(site / JAR_ENTRY)


def test_the_wheel_carries_the_jar_once_and_nothing_of_the_checkout(built_wheel):
    version = package_version()
    assert built_wheel.name == f"raptorx_py-{version}-py3-none-any.whl"
    with zipfile.ZipFile(built_wheel) as whl:
        names = whl.namelist()
        assert [n for n in names if n.endswith(".jar")] == [JAR_ENTRY]
        # Only the package and its metadata: no tests, benchmarks, dev servers or native/.
        outside = [
            n
            for n in names
            if not n.startswith(("raptorx_py/", f"raptorx_py-{version}.dist-info/"))
        ]
        assert outside == []
        assert not [n for n in names if "/tests/" in n or "/benchmarks/" in n]
        # No path of the build machine's checkout baked into any file, the jar's included.
        assert [n for n in names if str(CHECKOUT).encode() in whl.read(n)] == []
        jar_bytes = whl.read(JAR_ENTRY)
    # The jar is the one `make native` built from these sources, its version the package's.
    assert jar_bytes == BUILT_JAR.read_bytes()
    with zipfile.ZipFile(BUILT_JAR) as jar:
        manifest = jar.read("META-INF/MANIFEST.MF").decode().splitlines()
    info = native.jar_info(BUILT_JAR)
    assert f"Implementation-Version: {version}" in manifest, manifest
    assert f"Build-Id: {info.build_id}" in manifest and len(info.build_id) == 16
    assert info.version == version and info.pyspark_version == pyspark.__version__


def test_the_sdist_carries_the_jar_s_sources_and_no_built_jar(built_sdist):
    with tarfile.open(built_sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in (
        "setup.py",
        "MANIFEST.in",
        "build_support/raptorx_build_backend.py",
        "native/build.sh",
        "native/src/main/scala/raptorx/TieredHiveProvider.scala",
        "raptorx_py/native.py",
    ):
        assert needed in names, needed
    assert not [n for n in names if n.endswith(".jar")]
    assert not [
        n
        for n in names
        if n.startswith(("tests/", "benchmarks/", "devservers/", "native/src/test"))
    ]


def test_the_installed_cli_names_the_jar_inside_the_package(wheel_venv, tmp_path):
    jar = installed_jar(wheel_venv)
    version = wheel_venv.run([wheel_venv.bin("raptorx"), "--version"], cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    info = native.jar_info(BUILT_JAR)
    assert version.stdout.splitlines() == [
        f"raptorx {package_version()}",
        f"jar {info.version} (build {info.build_id}, built against pyspark "
        f"{info.pyspark_version}): {jar}",
        f"pyspark {pyspark.__version__} installed",
    ]
    shown = wheel_venv.run([wheel_venv.bin("raptorx"), "jar"], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [jar, f"--jars {jar} --driver-class-path {jar}"]
    only = wheel_venv.run([wheel_venv.bin("raptorx"), "jar", "--path"], cwd=tmp_path)
    assert only.stdout.splitlines() == [jar]
    # connect-server starts its server with the same jar.
    cmd = wheel_venv.run(
        [wheel_venv.bin("raptorx"), "connect-server", "--print-command"], cwd=tmp_path
    )
    assert cmd.returncode == 0, cmd.stderr
    assert f"--jars {jar} --driver-class-path {jar}" in cmd.stdout, cmd.stdout


def test_a_query_from_the_installed_package_uses_its_jar(wheel_venv, tmp_path):
    """A table registered with the installed ``raptorx``, read by an application of the
    installed package in local mode: the filter is pushed (EXPLAIN), the scan node has the
    tiers' metrics, the catalog name reads it, and a warm read is served by the JVM from the
    fragment result cache."""
    data = tmp_path / "data"
    for i, day in enumerate(DAYS):
        (data / f"ds={day}").mkdir(parents=True)
        xs = pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64())
        pq.write_table(pa.table({"x": xs}), data / f"ds={day}" / "part-0.parquet")
    props = {
        "hive.metastore.url": f"sqlite:///{tmp_path / 'metastore.db'}",
        "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
        "metrics.directory": str(tmp_path / "metrics"),
        "cache.base-directory": str(tmp_path / "cache"),
        **TIERS_OFF,
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
    }
    flags = [a for k, v in props.items() for a in ("-p", f"{k}={v}")]
    reg = wheel_venv.run(
        [wheel_venv.bin("raptorx"), "table", "register", "wheeldb.t", f"file://{data}", "--seal"]
        + flags,
        cwd=tmp_path,
    )
    assert reg.returncode == 0, reg.stderr
    out = run_app(
        wheel_venv,
        tmp_path,
        {"properties": props, "table": "wheeldb.t", "where": "x > 45"},
    )
    jar = installed_jar(wheel_venv)
    assert out["package"].startswith(str(wheel_venv.root)), out["package"]
    assert out["jar"] == jar and jar in out["spark_jars"].split(",")
    plan = out["plan"]
    assert "BatchScan tiered_hive wheeldb.t[" in plan, plan
    assert "x > 45" in plan.split("PushedFilters: [", 1)[1].split("]", 1)[0], plan
    expected = sum(x for x in range(len(DAYS) * ROWS) if x > 45)
    cold, warm = out["runs"]
    assert cold["result"] == warm["result"] == expected
    assert [s["name"] for s in cold["scans"]] == ["BatchScan raptorx.wheeldb.t"], cold
    cold_scan, warm_scan = cold["scans"][0]["metrics"], warm["scans"][0]["metrics"]
    assert int(cold_scan["fragment cache misses"]) == len(DAYS), cold_scan
    assert int(warm_scan["fragment cache hits"]) == len(DAYS), warm_scan
    assert int(cold_scan["partitions in the table"]) == len(DAYS), cold_scan
    assert cold["counters"]["fragment_cache.stores"] == len(DAYS), cold["counters"]
    w = warm["counters"]
    assert w["fragment_cache.jvm_hits"] == w["fragment_cache.hits"] == len(DAYS), w
    assert w.get("reader.python_tasks", 0) == 0, w
