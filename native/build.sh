#!/usr/bin/env bash
# Builds native/target/raptorx-native.jar with the Scala compiler that ships inside pyspark's
# jars/ (no Maven, no downloads). Usage: native/build.sh [python]  (default: .venv/bin/python)
#
# Every warning is an error (-Werror, with deprecations, features, unchecked casts and the
# lints on): the sources compile clean against the pinned pyspark, so a warning means new
# code to fix, or a pyspark whose API moved (a deprecation is the first sign of a removal).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${1:-$here/../.venv/bin/python}"
{ read -r jars; read -r pyspark_version; } < <("$python" -c \
  'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars")); print(pyspark.__version__)')
scala_cp="$(ls "$jars"/scala-compiler-*.jar "$jars"/scala-library-*.jar "$jars"/scala-reflect-*.jar | paste -sd:)"
out="$here/target"
classes="$out/classes"
rm -rf "$classes" && mkdir -p "$classes"
java -cp "$scala_cp" scala.tools.nsc.Main -deprecation -feature -unchecked -Xlint -Werror \
  -classpath "$jars/*" -d "$classes" $(find "$here/src/main/scala" -name '*.scala')
cp -r "$here/src/main/resources/." "$classes/"
# The pyspark compiled against, for raptorx.NativeCompatibility's report of a mismatch.
mkdir -p "$classes/raptorx"
printf 'pyspark.version=%s\n' "$pyspark_version" > "$classes/raptorx/native-build.properties"
tmp="$out/raptorx-native.jar.tmp"
(cd "$classes" && jar cf "$tmp" .)
mv "$tmp" "$out/raptorx-native.jar"  # publish whole: a failed build never leaves a partial jar
echo "built $out/raptorx-native.jar"
