#!/usr/bin/env bash
# Builds native/target/raptorx-native.jar with the Scala compiler that ships inside pyspark's
# jars/ (no Maven, no downloads). Usage: native/build.sh [python]  (default: .venv/bin/python)
# The python is one with pyspark installed: the checkout's .venv, or the isolated environment
# `python -m build` makes for the wheel (setup.py runs this script; docs/architecture.md,
# "The jar inside the wheel").
#
# The jar records what it is, in raptorx/native-build.properties and in its manifest
# (Implementation-Version): the package version (pyproject.toml's, so the jar's version is
# the wheel's), the build identity (a digest of the sources compiled, the same for the same
# sources wherever they are built) and the pyspark compiled against.
#
# Every warning is an error (-Werror, with deprecations, features, unchecked casts and the
# lints on): the sources compile clean against the pinned pyspark, so a warning means new
# code to fix, or a pyspark whose API moved (a deprecation is the first sign of a removal).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${1:-$here/../.venv/bin/python}"
{ read -r jars; read -r pyspark_version; } < <("$python" -c \
  'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars")); print(pyspark.__version__)')
version="$("$python" -c \
  'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$here/../pyproject.toml")"
# The build identity: sha256 over the sources (relative path and content, in path order).
build_id="$(cd "$here" && find src/main build.sh -type f | LC_ALL=C sort \
  | while read -r f; do printf '%s\n' "$f"; sha256sum < "$f"; done | sha256sum | cut -c1-16)"
scala_cp="$(ls "$jars"/scala-compiler-*.jar "$jars"/scala-library-*.jar "$jars"/scala-reflect-*.jar | paste -sd:)"
out="$here/target"
classes="$out/classes"
rm -rf "$classes" && mkdir -p "$classes"
java -cp "$scala_cp" scala.tools.nsc.Main -deprecation -feature -unchecked -Xlint -Werror \
  -classpath "$jars/*" -d "$classes" $(find "$here/src/main/scala" -name '*.scala')
cp -r "$here/src/main/resources/." "$classes/"
# The pyspark compiled against, for raptorx.NativeCompatibility's report of a mismatch.
mkdir -p "$classes/raptorx"
printf 'raptorx.version=%s\nbuild.id=%s\npyspark.version=%s\n' \
  "$version" "$build_id" "$pyspark_version" > "$classes/raptorx/native-build.properties"
manifest="$out/MANIFEST.MF"
printf 'Implementation-Title: raptorx-native\nImplementation-Version: %s\nBuild-Id: %s\nBuilt-Against-PySpark: %s\n' \
  "$version" "$build_id" "$pyspark_version" > "$manifest"
tmp="$out/raptorx-native.jar.tmp"
(cd "$classes" && jar cfm "$tmp" "$manifest" .)
mv "$tmp" "$out/raptorx-native.jar"  # publish whole: a failed build never leaves a partial jar
echo "built $out/raptorx-native.jar"
