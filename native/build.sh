#!/usr/bin/env bash
# Builds native/target/raptorx-native.jar with the Scala compiler that ships inside pyspark's
# jars/ (no Maven, no downloads). Usage: native/build.sh [python]  (default: .venv/bin/python)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${1:-$here/../.venv/bin/python}"
jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
scala_cp="$(ls "$jars"/scala-compiler-*.jar "$jars"/scala-library-*.jar "$jars"/scala-reflect-*.jar | paste -sd:)"
out="$here/target"
classes="$out/classes"
rm -rf "$classes" && mkdir -p "$classes"
java -cp "$scala_cp" scala.tools.nsc.Main -nowarn -classpath "$jars/*" -d "$classes" \
  $(find "$here/src/main/scala" -name '*.scala')
cp -r "$here/src/main/resources/." "$classes/"
tmp="$out/raptorx-native.jar.tmp"
(cd "$classes" && jar cf "$tmp" .)
mv "$tmp" "$out/raptorx-native.jar"  # publish whole: a failed build never leaves a partial jar
echo "built $out/raptorx-native.jar"
