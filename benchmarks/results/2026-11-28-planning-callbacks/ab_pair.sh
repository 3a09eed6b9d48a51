# ab_pair.sh BASE NEW: the suite with Spark's rule times ($QUERIES, default Q2/Q3/Q11/Q16, in
# $CONFIG, default the warm tiers, $REPS runs after 1 warm-up, default 6), from /tmp/base (a
# worktree at the commit before, its own jar) and /work/main in turn, twice:
# rule_times_<pair>_<commit>_<n>.txt
RT=/work/main/benchmarks/results/2026-11-28-warm-planning-profile/rule_times.py
run() { cd $1 && PYTHONPATH=$1 /work/main/.venv/bin/python $RT --scale 1 --queries "${QUERIES:-2,3,11,16}" --configs "${CONFIG:-tiered-hive-s3-warm}" --repetitions "${REPS:-6}" --warmup 1 --no-publish --work-dir /work/main/work-data --out /tmp/prof/out-$2 > /tmp/prof/rt-$2.txt 2>&1; }
run /tmp/base "$1"1
run /work/main "$2"1
run /tmp/base "$1"2
run /work/main "$2"2
