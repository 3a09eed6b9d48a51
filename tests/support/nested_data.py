"""The same nested rows written as Hive-layout tables (``p=<int>/<file>``) by pyarrow and
Spark (Parquet) and by Spark and pyorc (ORC), for the differential test of ``tiered_hive``
against ``spark.read.parquet`` / ``spark.read.orc`` on the same files
(``tests/integration/test_nested_columns.py``).

Columns: structs (with decimal, timestamp, date fields; for ORC, a char field too), arrays
of scalars and of structs, maps of strings to ints and to arrays, a struct of a struct and
an array; nulls at every level: a null struct, null fields, null elements, empty arrays
and maps, null map values.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

UTC = dt.UTC

#: The partitions (``p=1``, ``p=2``) and rows in each.
PARTITIONS = (1, 2)
ROWS_PER_PARTITION = 40

_S = pa.struct(
    [
        ("a", pa.int32()),
        ("b", pa.string()),
        ("d", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
    ]
)
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", _S),
        ("arr", pa.list_(pa.int64())),
        ("arrs", pa.list_(pa.struct([("x", pa.int32()), ("y", pa.string())]))),
        ("m", pa.map_(pa.string(), pa.int32())),
        ("ma", pa.map_(pa.string(), pa.list_(pa.int32()))),
        (
            "ss",
            pa.struct([("inner", pa.struct([("v", pa.int64())])), ("tags", pa.list_(pa.string()))]),
        ),
    ]
)

#: The Hive types registration gives ``SCHEMA``'s columns (Parquet).
HIVE_TYPES = {
    "id": "bigint",
    "s": "struct<a:int,b:string,d:decimal(10,2),ts:timestamp,day:date>",
    "arr": "array<bigint>",
    "arrs": "array<struct<x:int,y:string>>",
    "m": "map<string,int>",
    "ma": "map<string,array<int>>",
    "ss": "struct<inner:struct<v:bigint>,tags:array<string>>",
    "p": "int",
}

#: The ORC files' type (pyorc): ``SCHEMA`` with a ``char(5)`` field in ``s``.
ORC_TYPE = (
    "struct<id:bigint,s:struct<a:int,b:string,d:decimal(10,2),ts:timestamp,day:date,"
    "c:char(5)>,arr:array<bigint>,arrs:array<struct<x:int,y:string>>,m:map<string,int>,"
    "ma:map<string,array<int>>,ss:struct<inner:struct<v:bigint>,tags:array<string>>>"
)


def rows(seed: int = 7) -> list[dict[str, Any]]:
    """``ROWS_PER_PARTITION`` rows per partition, keyed ``p``: the first few of each hold
    every kind of null and emptiness, the rest seeded values."""
    rng = random.Random(seed)
    out = []
    for p in PARTITIONS:
        for i in range(ROWS_PER_PARTITION):
            n = p * 1000 + i
            row: dict[str, Any] = {"p": p, "id": n}
            row["s"] = (
                None
                if i == 0
                else {
                    "a": None if i == 1 else rng.randint(-50, 50),
                    "b": None if i == 2 else f"b{rng.randint(0, 9)}",
                    "d": None if i == 3 else Decimal(rng.randint(-99999, 99999)) / 100,
                    "ts": None
                    if i == 4
                    else dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=977 * n),
                    "day": None if i == 1 else dt.date(2020, 1, 1) + dt.timedelta(days=n % 900),
                }
            )
            row["arr"] = (
                None
                if i == 1
                else []
                if i == 2
                else [None if j == 1 else rng.randint(-9, 9) for j in range(i % 4)]
            )
            row["arrs"] = (
                None
                if i == 3
                else []
                if i == 0
                else [
                    None if j == 2 else {"x": None if j == 1 else j + i, "y": f"y{j}"}
                    for j in range(i % 3 + 1)
                ]
            )
            row["m"] = (
                None
                if i == 2
                else {}
                if i == 1
                else {f"k{j}": (None if j == 1 else j * i) for j in range(i % 3 + 1)}
            )
            row["ma"] = (
                None
                if i == 4
                else {}
                if i == 0
                else {
                    "e": [],
                    "n": None,
                    **{f"q{j}": [j, None, i] for j in range(i % 2)},
                }
            )
            row["ss"] = (
                None
                if i == 5
                else {
                    "inner": None if i == 6 else {"v": None if i == 7 else n * 3},
                    "tags": None if i == 8 else [f"t{i % 5}", None][: 1 + i % 2],
                }
            )
            out.append(row)
    return out


def _partition_rows(all_rows):
    for p in PARTITIONS:
        yield p, [{k: v for k, v in r.items() if k != "p"} for r in all_rows if r["p"] == p]


def write_pyarrow(root: str, all_rows) -> None:
    """One Parquet file per partition, pyarrow's writer (small row groups)."""
    for p, part in _partition_rows(all_rows):
        d = os.path.join(root, f"p={p}")
        os.makedirs(d, exist_ok=True)
        table = pa.Table.from_pylist(part, schema=SCHEMA)
        pq.write_table(table, os.path.join(d, "part-0.parquet"), row_group_size=16)


def spark_frame(spark, all_rows):
    """``all_rows`` (without ``p``) as a Spark DataFrame of the table's Spark types."""
    from raptorx_py.hive.column_types import spark_struct
    from raptorx_py.hive.model import Column

    schema = spark_struct([Column(n, t) for n, t in HIVE_TYPES.items() if n != "p"])
    names = [f.name for f in schema.fields]

    def spark_value(v):
        if isinstance(v, dict) and v and all(k in ("a", "b", "d", "ts", "day") for k in v):
            return tuple(v[k] for k in ("a", "b", "d", "ts", "day"))
        return v

    data = []
    for r in all_rows:
        row = dict(r)
        row["s"] = spark_value(row["s"])
        row["arrs"] = (
            None
            if row["arrs"] is None
            else [None if e is None else (e["x"], e["y"]) for e in row["arrs"]]
        )
        row["ss"] = (
            None
            if row["ss"] is None
            else (
                None if row["ss"]["inner"] is None else (row["ss"]["inner"]["v"],),
                row["ss"]["tags"],
            )
        )
        data.append(tuple(row[n] for n in names))
    return spark.createDataFrame(data, schema)


def write_spark(spark, root: str, all_rows, file_format: str) -> None:
    """The rows by Spark's own writer (``parquet``: INT96 timestamps, inside structs too;
    ``orc``), one directory per partition."""
    for p, part in _partition_rows(all_rows):
        d = os.path.join(root, f"p={p}")
        spark_frame(spark, part).coalesce(1).write.format(file_format).save(d)


def write_pyorc(root: str, all_rows) -> None:
    """The rows by ORC's C++ writer (pyorc), ``ORC_TYPE``: ``s.c`` a ``char(5)`` of ``s.b``."""
    import zoneinfo

    import pyorc

    for p, part in _partition_rows(all_rows):
        d = os.path.join(root, f"p={p}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "000000_0"), "wb") as f:
            with pyorc.Writer(
                f,
                ORC_TYPE,
                stripe_size=4096,
                struct_repr=pyorc.StructRepr.DICT,
                timezone=zoneinfo.ZoneInfo("UTC"),
            ) as w:
                for r in part:
                    row = dict(r)
                    if row["s"] is not None:
                        row["s"] = {**row["s"], "c": row["s"]["b"]}
                    w.write(row)


def canonical(value: Any) -> Any:
    """A collected value in a form that sorts and compares: a Row as a tuple, a map as its
    sorted items, lists element by element."""
    if isinstance(value, tuple):
        return tuple(canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((canonical(k), canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def collected(df) -> list[str]:
    """``df``'s rows, each ``canonical`` as text, sorted: two reads that give these equal
    gave the same rows."""
    return sorted(repr(canonical(r)) for r in df.collect())
