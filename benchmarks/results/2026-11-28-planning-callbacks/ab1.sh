set -e
RT=/work/main/benchmarks/results/2026-11-28-warm-planning-profile/rule_times.py
run() { # $1 tree, $2 label
  cd $1 && PYTHONPATH=$1 /work/main/.venv/bin/python $RT --scale 1 --queries 2,3,11,16 --configs tiered-hive-s3-warm --repetitions 8 --warmup 1 --no-publish --work-dir /work/main/work-data --out /tmp/prof/out-$2 > /tmp/prof/rt-$2.txt 2>&1
}
run /work/main after1
run /tmp/base before
run /work/main after2
echo done
