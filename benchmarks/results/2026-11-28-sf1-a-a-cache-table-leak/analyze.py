import json, math, statistics as st, sys
r = json.load(open(sys.argv[1]))
Q = [q for q in r['queries'] if all(r['queries'][q]['configs'][c]['runs'] for c in r['queries'][q]['configs'])]
gm = lambda a: math.exp(sum(map(math.log, a)) / len(a))
def med(q, c): return st.median(x['seconds'] for x in r['queries'][q]['configs'][c]['runs'])
def paired(q, c, b):
    a = r['queries'][q]['configs'][c]['runs']; bb = r['queries'][q]['configs'][b]['runs']
    return st.median(x['seconds'] / y['seconds'] for x, y in zip(a, bb))
pairs = [('spark-parquet-local-again', 'spark-parquet-local'), ('tiered-hive-s3', 'spark-parquet-s3'),
         ('tiered-hive-s3-cold', 'spark-parquet-s3'), ('tiered-hive-s3-warm', 'spark-parquet-local'),
         ('tiered-hive-s3-warm-fragments', 'spark-parquet-local'), ('spark-cache-table', 'spark-parquet-local'),
         ('tiered-hive-s3-warm-fragments', 'spark-cache-table'), ('tiered-hive-s3-warm-fragments', 'spark-parquet-s3'),
         ('spark-parquet-s3', 'spark-parquet-local'), ('tiered-hive-s3', 'tiered-hive-s3-warm-fragments')]
print(len(Q), 'queries')
for c, b in pairs:
    rs = {q: med(q, c) / med(q, b) for q in Q}
    ps = {q: paired(q, c, b) for q in Q}
    hi = sorted(rs.items(), key=lambda x: -x[1])
    print(f"{c} / {b}: geomean {gm(rs.values()):.2f}x (paired {gm(ps.values()):.2f}x); >1.0: {sum(v>1.0 for v in rs.values())}, >1.2: {sum(v>1.2 for v in rs.values())}; highest "
          + ', '.join(f"Q{q} {v:.2f}x (paired {ps[q]:.2f}x)" for q, v in hi[:4]) + f"; lowest Q{hi[-1][0]} {hi[-1][1]:.2f}x")
print()
print('query ' + ' '.join(f"{c[:22]:>22}" for c, b in pairs[:6]))
for q in Q:
    print(f"Q{q:<5}" + ' '.join(f"{med(q,c)/med(q,b):22.2f}" for c, b in pairs[:6]))

print()
print("A/A band by statistic (farthest from 1.0x, and how many queries beyond 1.1x either way):")
a, b = 'spark-parquet-local-again', 'spark-parquet-local'
def stat(q, c, f): return f([x['seconds'] for x in r['queries'][q]['configs'][c]['runs']])
for name, f in [('median', st.median), ('fastest', min), ('mean', st.mean)]:
    rs = [stat(q, a, f) / stat(q, b, f) for q in Q]
    far = max(max(rs), 1 / min(rs))
    print(f"  {name:8s} geomean {gm(rs):.3f}x, band {1/far:.2f}x-{far:.2f}x, beyond 1.1x: {sum(1 for x in rs if x > 1.1 or x < 1/1.1)}")
for c, base in pairs[1:6]:
    for name, f in [('median', st.median), ('fastest', min)]:
        rs = {q: stat(q, c, f) / stat(q, base, f) for q in Q}
        hi = sorted(rs.items(), key=lambda x: -x[1])[:3]
        print(f"  {c} / {base} by {name}: geomean {gm(rs.values()):.2f}x, >1.0 {sum(v>1 for v in rs.values())}, >1.2 {sum(v>1.2 for v in rs.values())}; " + ', '.join(f"Q{q} {v:.2f}x" for q, v in hi))
