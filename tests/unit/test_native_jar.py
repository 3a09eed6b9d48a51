"""Where the native jar is found (``native.jar_path``: ``$RAPTORX_NATIVE_JAR``, the installed
package's, the checkout's), what it records about its build (``native.jar_info``), and
``raptorx jar``, which prints it and the flags that start Spark with it."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from raptorx_py import native
from raptorx_py.cli import main
from raptorx_py.errors import NativeJarError


def fake_jar(path: Path, properties: str | None) -> Path:
    """A zip with ``properties`` as the jar's build record (none when None)."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        if properties is not None:
            z.writestr(native.BUILD_INFO_ENTRY, properties)
    return path


@pytest.fixture
def no_jars(tmp_path, monkeypatch):
    """Neither a package jar nor a checkout jar; no RAPTORX_NATIVE_JAR."""
    monkeypatch.delenv(native.ENV_JAR, raising=False)
    monkeypatch.setattr(native, "PACKAGE_JAR", tmp_path / "pkg" / native.JAR_NAME)
    monkeypatch.setattr(native, "CHECKOUT_JAR", tmp_path / "checkout" / native.JAR_NAME)
    return tmp_path


def test_the_named_jar_then_the_package_s_then_the_checkout_s(no_jars, monkeypatch):
    package, checkout = native.PACKAGE_JAR, native.CHECKOUT_JAR
    assert native.jar_candidates() == [package, checkout]
    assert native.jar_path() is None
    checkout.parent.mkdir()
    fake_jar(checkout, None)
    assert native.jar_path() == checkout
    package.parent.mkdir()
    fake_jar(package, None)
    assert native.jar_path() == package  # an installed package's jar before a checkout's
    named = fake_jar(no_jars / "named.jar", None)
    monkeypatch.setenv(native.ENV_JAR, str(named))
    assert native.jar_candidates()[0] == named and native.jar_path() == named
    monkeypatch.setenv(native.ENV_JAR, str(no_jars / "missing.jar"))
    assert native.jar_path() == package  # a named jar that is not there is passed over


def test_jar_info_reads_the_build_record(tmp_path):
    jar = fake_jar(
        tmp_path / "a.jar", "raptorx.version=1.2.3\nbuild.id=0123abcd\npyspark.version=4.3.0\n"
    )
    assert native.jar_info(jar) == native.JarInfo(jar, "1.2.3", "0123abcd", "4.3.0")
    old = fake_jar(tmp_path / "old.jar", "pyspark.version=4.2.0\n")  # before versions were kept
    assert native.jar_info(old) == native.JarInfo(old, "unknown", "unknown", "4.2.0")
    bare = fake_jar(tmp_path / "bare.jar", None)
    assert native.jar_info(bare).pyspark_version == "unknown"
    not_a_jar = tmp_path / "notes.txt"
    not_a_jar.write_text("hello")
    with pytest.raises(NativeJarError, match=f"{not_a_jar} is not a readable jar"):
        native.jar_info(not_a_jar)


def test_raptorx_jar_prints_the_path_and_the_flags(no_jars, monkeypatch, capsys):
    jar = fake_jar(no_jars / "r.jar", None)
    monkeypatch.setenv(native.ENV_JAR, str(jar))
    assert main(["jar"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        str(jar),
        f"--jars {jar} --driver-class-path {jar}",
    ]
    assert main(["jar", "--path"]) == 0
    assert capsys.readouterr().out == f"{jar}\n"
    assert main(["jar", "--flags"]) == 0
    assert capsys.readouterr().out == f"--jars {jar} --driver-class-path {jar}\n"


def test_a_path_with_a_space_is_quoted_for_the_shell(tmp_path):
    jar = tmp_path / "my jars" / "r.jar"
    assert native.submit_flags(jar) == f"--jars '{jar}' --driver-class-path '{jar}'"


def test_raptorx_jar_without_a_jar_names_where_it_looked(no_jars, capsys):
    assert main(["jar"]) == 2
    err = capsys.readouterr().err
    assert f"no raptorx jar at {native.PACKAGE_JAR}, {native.CHECKOUT_JAR}" in err
    assert "make native" in err and "reinstall the wheel" in err
