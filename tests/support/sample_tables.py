"""Small tables the integration tests write and register, shared where tests need the same
rows."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_monthly_facts(root: Path, *, with_day: bool = False) -> None:
    """40 rows under ``root`` in two Hive partitions, ``m=1`` (ids 0-19) and ``m=2`` (ids
    20-39), one file each: ``id`` bigint, ``qty`` int (id % 5), ``price`` double (id * 1.5:
    multiples of 0.5, so sums are exact whatever order a join adds them in), ``name`` string
    (``n<id>``) and, ``with_day``, ``day`` date (2024-01-01 plus id days)."""
    for m, ids in (("1", range(0, 20)), ("2", range(20, 40))):
        columns = {
            "id": pa.array(ids, pa.int64()),
            "qty": pa.array([i % 5 for i in ids], pa.int32()),
            "price": pa.array([i * 1.5 for i in ids], pa.float64()),
            "name": pa.array([f"n{i}" for i in ids], pa.string()),
        }
        if with_day:
            columns["day"] = pa.array(
                [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in ids], pa.date32()
            )
        (root / f"m={m}").mkdir(parents=True)
        pq.write_table(pa.table(columns), str(root / f"m={m}" / "part-0.parquet"))
