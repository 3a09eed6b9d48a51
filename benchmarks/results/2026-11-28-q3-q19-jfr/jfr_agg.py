"""Aggregate JFR execution samples of executor task threads by configuration (via stage ids
recorded in results.json) and by frame."""
import json, re, subprocess, sys, collections
jfr, results = sys.argv[1], sys.argv[2]
r = json.load(open(results))
stage_cfg = {}
for q, v in r['queries'].items():
    for cfg, e in v['configs'].items():
        for run in e['runs']:
            for s in run.get('stages', []):
                stage_cfg[s['stage']] = cfg
out = subprocess.run(['jfr', 'print', '--json', '--stack-depth', '96', '--events', 'jdk.ExecutionSample', jfr],
                     capture_output=True, text=True, check=True).stdout
events = json.loads(out)['recording']['events']
pat = re.compile(r'in stage (\d+)\.')
self_ = collections.defaultdict(collections.Counter)
incl = collections.defaultdict(collections.Counter)
total = collections.Counter()
for e in events:
    th = e['values']['sampledThread']
    name = th.get('javaName') or th.get('osName') or ''
    if 'Executor task launch' not in name:
        continue
    frames = e['values']['stackTrace']['frames'] if e['values'].get('stackTrace') else []
    names = [f"{f['method']['type']['name']}.{f['method']['name']}" for f in frames]
    joined = ' '.join(names)
    if 'raptorx' in joined or 'DataSourceRDD' in joined:
        cfg = 'warm'
    elif 'FileScanRDD' in joined:
        cfg = 'local'
    else:
        cfg = 'other'
    total[cfg] += 1
    if names:
        self_[cfg][names[0]] += 1
    for n in set(names):
        incl[cfg][n] += 1
for cfg in total:
    print(f"== {cfg}: {total[cfg]} samples")
    print("  self:")
    for n, c in self_[cfg].most_common(25):
        print(f"    {c:6d} {100*c/total[cfg]:5.1f}% {n}")
    print("  inclusive (raptorx / parquet / codegen):")
    for n, c in incl[cfg].most_common(400):
        if any(k in n for k in ('raptorx', 'parquet', 'GeneratedClass', 'Predicate', 'ColumnVector', 'hadoop.fs')):
            print(f"    {c:6d} {100*c/total[cfg]:5.1f}% {n}")
