#!/usr/bin/env bash
# Builds native/target/hms-test-listener.jar: TEST code (native/src/test/java), the
# notification-log listener the tests' Hive Metastore runs with (devservers/hive_metastore.py).
# Never part of the provider jar. Compiled with the JDK's javac against pyspark's own jars.
# Usage: native/build-test-listener.sh [python]  (default: .venv/bin/python)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${1:-$here/../.venv/bin/python}"
jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
out="$here/target"
classes="$out/test-classes"
rm -rf "$classes" && mkdir -p "$classes"
javac -Xlint:all,-path,-options -Werror -proc:none -classpath "$jars/*" -d "$classes" \
  $(find "$here/src/test/java" -name '*.java')
tmp="$out/hms-test-listener.jar.tmp.$$"
(cd "$classes" && jar cf "$tmp" .)
mv "$tmp" "$out/hms-test-listener.jar"  # publish whole
echo "built $out/hms-test-listener.jar"
