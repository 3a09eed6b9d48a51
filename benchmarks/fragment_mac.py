"""The fragment entry's MAC: keyed BLAKE2b (the entries' checksum before the JVM served
hits) against HMAC-SHA256 (now: the JVM checks it with the JDK's ``javax.crypto.Mac``), on
a realistic entry, from Python and from the JVM.

``python -m benchmarks.fragment_mac [--rows 120000] [--repetitions 9] [--out result.json]``
builds a lineitem-like Arrow table (ints, decimals, dates, short strings; about 6 MiB as an
Arrow IPC stream at the default rows), stores it through ``FragmentCache`` (so the file is
a real entry), and measures, as the median of ``--repetitions`` runs of 20 passes each:
- Python: ``hashlib.blake2b(key=..., digest_size=8)`` and ``hmac.new(..., sha256)`` over
  the entry's bytes in memory, and the cache's whole ``get`` (read, verify, decode);
- the JVM (``benchmarks/fragment_mac/FragmentMac.java``, run with the ``java`` on PATH):
  HmacSHA256 over the bytes in memory, and read + HmacSHA256 as the native reader does.
The JDK has no BLAKE2b, and pyspark's jars carry no provider of it, so BLAKE2b is not
measured on the JVM (it could not be used there without a new dependency). Figures are MiB/s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import hashlib
import hmac
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from raptorx_py.cache.fragment_cache import FragmentCache, entry_path

MIB = 1 << 20
JAVA_SOURCE = Path(__file__).with_name("fragment_mac") / "FragmentMac.java"


def lineitem_like(rows: int, seed: int = 7) -> pa.Table:
    rng = random.Random(seed)
    start = dt.date(1992, 1, 1)
    return pa.table(
        {
            "l_orderkey": pa.array([rng.randrange(6_000_000) for _ in range(rows)], pa.int64()),
            "l_quantity": pa.array(
                [decimal.Decimal(rng.randrange(1, 51)) for _ in range(rows)], pa.decimal128(15, 2)
            ),
            "l_extendedprice": pa.array(
                [decimal.Decimal(rng.randrange(100_000, 10_000_000)) / 100 for _ in range(rows)],
                pa.decimal128(15, 2),
            ),
            "l_shipdate": pa.array(
                [start + dt.timedelta(days=rng.randrange(2500)) for _ in range(rows)], pa.date32()
            ),
            "l_returnflag": pa.array([rng.choice("ANR") for _ in range(rows)]),
            "l_shipmode": pa.array(
                [rng.choice(["AIR", "MAIL", "SHIP", "RAIL"]) for _ in range(rows)]
            ),
        }
    )


def rate(fn, size: int, repetitions: int, passes: int = 20) -> float:
    fn()  # warm
    out = []
    for _ in range(repetitions):
        t0 = time.perf_counter()
        for _ in range(passes):
            fn()
        out.append(passes * size / (time.perf_counter() - t0) / MIB)
    return statistics.median(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=120_000)
    ap.add_argument("--repetitions", type=int, default=9)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    table = lineitem_like(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        cache = FragmentCache(
            os.path.join(tmp, "fragments"),
            max_bytes=2**32,
            max_entries=10,
            max_entry_bytes=2**30,
            ttl=None,
        )
        key = hashlib.sha256(b"benchmark").digest()[:20]
        assert cache.put(key, table.schema, table.to_batches())
        path = entry_path(cache.directory, key)
        data = Path(path).read_bytes()
        secret = os.urandom(32)
        size = len(data)

        def blake2b() -> None:
            hashlib.blake2b(data, key=secret, digest_size=8).digest()

        def hmac_sha256() -> None:
            hmac.new(secret, data, hashlib.sha256).digest()

        def get() -> None:
            assert cache.get(key) is not None

        result = {
            "entry_bytes": size,
            "rows": args.rows,
            "python_blake2b_keyed_mib_s": round(rate(blake2b, size, args.repetitions), 1),
            "python_hmac_sha256_mib_s": round(rate(hmac_sha256, size, args.repetitions), 1),
            "python_get_mib_s": round(rate(get, size, args.repetitions), 1),
        }
        jvm = subprocess.run(
            ["java", str(JAVA_SOURCE), path, str(args.repetitions)],
            capture_output=True,
            text=True,
            check=True,
        )
        result.update(json.loads(jvm.stdout.strip().splitlines()[-1]))
    result["machine"] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
