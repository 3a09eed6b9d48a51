"""The same rows written by Spark, pyarrow and DuckDB as Hive-layout tables (``pk=<int>/
pd=<date>/<file>``), and pushed-filter forms over every column, for the differential test of
``tiered_hive`` against ``spark.read.parquet`` (tests/integration/test_type_fidelity.py).

Every column type Spark's Parquet reader reads, with nulls and extremes: integers at their
limits, NaN/infinities/-0.0, unicode and empty strings, dates and timestamps at years 1 and
9999 (UTC-adjusted, naive, and INT96 with nanosecond digits), decimals of precision 9, 18
and 38 holding 38-digit values.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

UTC = dt.UTC

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("b", pa.bool_()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("s", pa.string()),
        ("bin", pa.binary()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("dec9", pa.decimal128(9, 2)),
        ("dec18", pa.decimal128(18, 4)),
        ("dec38", pa.decimal128(38, 10)),
    ]
)

#: Partition keys and their directory values (Spark infers int and date; null is the
#: default partition).
PARTITIONS = [(1, "2020-01-01"), (2, "1999-12-31"), (None, "2020-01-01")]

_FIXED = [
    dict(
        b=True,
        i8=-128,
        i16=-32768,
        i32=-(2**31),
        i64=-(2**63),
        f32=-math.inf,
        f64=-1.7976931348623157e308,
        s="",
        bin=b"",
        d=dt.date(1, 1, 1),
        ts=dt.datetime(1, 1, 1, tzinfo=UTC),
        ntz=dt.datetime(1, 1, 1),
        dec9=Decimal("-9999999.99"),
        dec18=Decimal("-99999999999999.9999"),
        dec38=Decimal("-9999999999999999999999999999.9999999999"),
    ),
    dict(
        b=False,
        i8=127,
        i16=32767,
        i32=2**31 - 1,
        i64=2**63 - 1,
        f32=math.inf,
        f64=math.nan,
        s="日本語 é 😀",
        bin=b"\x00\xff",
        d=dt.date(9999, 12, 31),
        ts=dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        ntz=dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        dec9=Decimal("9999999.99"),
        dec18=Decimal("99999999999999.9999"),
        dec38=Decimal("1234567890123456789012345678.1234567890"),
    ),
    dict(
        b=None,
        i8=None,
        i16=None,
        i32=None,
        i64=None,
        f32=None,
        f64=None,
        s=None,
        bin=None,
        d=None,
        ts=None,
        ntz=None,
        dec9=None,
        dec18=None,
        dec38=None,
    ),
    dict(
        b=True,
        i8=0,
        i16=0,
        i32=0,
        i64=0,
        f32=-0.0,
        f64=0.0,
        s="a'b%c_d\\e",
        bin=b"ab",
        d=dt.date(1582, 10, 10),
        ts=dt.datetime(1677, 9, 21, tzinfo=UTC),
        ntz=dt.datetime(2262, 4, 12),
        dec9=Decimal("0.01"),
        dec18=Decimal("0"),
        dec38=Decimal("1234567890123456789012345678.1234567891"),
    ),
    dict(
        b=False,
        i8=1,
        i16=1,
        i32=1,
        i64=1,
        f32=math.nan,
        f64=math.inf,
        s="abc",
        bin=b"abc",
        d=dt.date(2020, 1, 1),
        ts=dt.datetime(2020, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        ntz=dt.datetime(2020, 1, 1),
        dec9=Decimal("1.50"),
        dec18=Decimal("1.5"),
        dec38=Decimal("-0.0000000001"),
    ),
]


def rows(n_random: int, seed: int) -> list[dict]:
    """The fixed edge rows, then ``n_random`` seeded ordinary rows."""
    rng = random.Random(seed)
    out = [dict(r) for r in _FIXED]
    words = ["", "a", "abc", "abd", "b", "é", "日本", "x y", "Ab", "zz"]
    for _ in range(n_random):
        day = dt.date(2019, 12, 30) + dt.timedelta(days=rng.randrange(5))
        micros = rng.randrange(4) * 1_000_000 + rng.choice([0, 1, 999_999])
        moment = dt.datetime.combine(day, dt.time()) + dt.timedelta(microseconds=micros)
        null = rng.random() < 0.15
        out.append(
            dict(
                b=None if null else rng.random() < 0.5,
                i8=None if null else rng.randrange(-3, 4),
                i16=rng.randrange(-3, 4),
                i32=rng.randrange(-3, 4),
                i64=rng.randrange(-3, 4),
                f32=rng.choice([-1.5, 0.0, 1.5, 2.25]),
                f64=None if null else rng.choice([-1.5, 0.0, 1.5, 2.25, 1e300]),
                s=None if null else rng.choice(words),
                bin=rng.choice([b"", b"a", b"ab", b"b"]),
                d=None if null else day,
                ts=moment.replace(tzinfo=UTC),
                ntz=None if null else moment,
                dec9=Decimal(rng.randrange(-300, 300)) / 100,
                dec18=Decimal(rng.randrange(-300, 300)) / 100,
                dec38=None
                if null
                else rng.choice(
                    [
                        Decimal("1234567890123456789012345678.1234567890"),
                        Decimal("0"),
                        Decimal("-1.25"),
                    ]
                ),
            )
        )
    for i, r in enumerate(out):
        r["id"] = i
    return out


def _table(part_rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(part_rows, schema=SCHEMA)


def _partition_dir(root: str, pk, pd) -> str:
    pk_text = "__HIVE_DEFAULT_PARTITION__" if pk is None else str(pk)
    return os.path.join(root, f"pk={pk_text}", f"pd={pd}")


def split_rows(all_rows: list[dict]) -> list[tuple[tuple, list[dict]]]:
    """Rows per partition: round robin, so every partition holds some edge rows."""
    parts = [(p, []) for p in PARTITIONS]
    for i, r in enumerate(all_rows):
        parts[i % len(parts)][1].append(r)
    return parts


def write_pyarrow(root: str, all_rows: list[dict]) -> None:
    for (pk, pd), part in split_rows(all_rows):
        d = _partition_dir(root, pk, pd)
        os.makedirs(d, exist_ok=True)
        pq.write_table(_table(part), os.path.join(d, "part-0.parquet"), row_group_size=4)


def write_duckdb(root: str, all_rows: list[dict], scratch: str) -> None:
    """DuckDB rewrites pyarrow's files: its own encodings, TIMESTAMP for the naive column,
    TIMESTAMPTZ for the UTC-adjusted one."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        for (pk, pd), part in split_rows(all_rows):
            src = os.path.join(scratch, f"duck-src-{pk}-{pd}.parquet")
            pq.write_table(_table(part), src)
            d = _partition_dir(root, pk, pd)
            os.makedirs(d, exist_ok=True)
            con.execute(
                f"COPY (SELECT * FROM read_parquet('{src}')) TO "
                f"'{os.path.join(d, 'data_0.parquet')}' (FORMAT PARQUET, "
                f"ROW_GROUP_SIZE 4)"
            )
    finally:
        con.close()


def write_spark(spark, root: str, pyarrow_root: str) -> None:
    """Spark rewrites pyarrow's table: INT96 for the UTC-adjusted timestamps (Spark's
    default encoding), its own NTZ and decimal encodings, same partition directories."""
    df = spark.read.parquet(pyarrow_root)
    for (pk, pd), _ in split_rows([]):
        cond = ("pk IS NULL" if pk is None else f"pk = {pk}") + f" AND pd = DATE '{pd}'"
        (
            df.where(cond)
            .drop("pk", "pd")
            .coalesce(1)
            .write.mode("overwrite")
            .option("parquet.block.size", 2048)
            .parquet(_partition_dir(root, pk, pd))
        )


def write_int96_pyarrow(root: str) -> None:
    """INT96 as pyarrow (and Impala, Hive) write it, with no Spark metadata: one file from
    microsecond values at the limits, one from nanosecond values (Spark truncates the
    nanosecond digits)."""
    os.makedirs(root, exist_ok=True)
    micros = [
        dt.datetime(1, 1, 1),
        dt.datetime(1677, 9, 21, 0, 12, 43, 145224),
        dt.datetime(2262, 4, 11, 23, 47, 16, 854776),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        None,
    ]
    pq.write_table(
        pa.table(
            {
                "id": pa.array(range(len(micros)), pa.int64()),
                "t96": pa.array(micros, pa.timestamp("us")),
            }
        ),
        os.path.join(root, "a.parquet"),
        use_deprecated_int96_timestamps=True,
    )
    nanos = [-1, 1_577_836_800_123_456_789, 999_999_999, -999_999_999]
    pq.write_table(
        pa.table(
            {
                "id": pa.array(range(10, 10 + len(nanos)), pa.int64()),
                "t96": pa.array(nanos, pa.timestamp("ns")),
            }
        ),
        os.path.join(root, "b.parquet"),
        use_deprecated_int96_timestamps=True,
    )


# -- filters --------------------------------------------------------------------------------
def sql_literal(value, column: str) -> str:
    """``value`` of ``column`` as a Spark SQL literal of the column's type."""
    f = SCHEMA.field(column).type if column in SCHEMA.names else None
    if column == "pk":
        return str(value)
    if column == "pd":
        return f"DATE '{value}'"
    if pa.types.is_boolean(f):
        return "true" if value else "false"
    if pa.types.is_integer(f):
        return {"i8": "{}Y", "i16": "{}S", "i32": "{}", "i64": "{}L", "id": "{}L"}[column].format(
            value
        )
    if pa.types.is_floating(f):
        t = "FLOAT" if column == "f32" else "DOUBLE"
        return (
            f"CAST('{value!r}' AS {t})"
            if (math.isnan(value) or math.isinf(value))
            else f"CAST({value!r} AS {t})"
        )
    if pa.types.is_string(f):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if pa.types.is_binary(f):
        return f"X'{value.hex()}'"
    if pa.types.is_date(f):
        return f"DATE '{value.isoformat()}'"
    if pa.types.is_timestamp(f):
        kind = "TIMESTAMP_NTZ" if f.tz is None else "TIMESTAMP"
        text = value.replace(tzinfo=None).isoformat(sep=" ")
        return f"{kind} '{text}{'' if f.tz is None else 'Z'}'"
    if pa.types.is_decimal(f):
        return f"{value}BD"
    raise TypeError(column)


#: Literals outside what Python's datetime holds, or than any value.
EXTRA_LITERALS = {
    "d": ["DATE '+10000-01-01'", "DATE '-0001-01-01'"],
    "ts": ["TIMESTAMP '+10000-01-01 00:00:00Z'", "TIMESTAMP '9999-12-31 23:59:59.999999'"],
    "ntz": ["TIMESTAMP_NTZ '9999-12-31 23:59:59.999999'", "TIMESTAMP_NTZ '+10000-01-01 00:00:00'"],
    "dec38": [
        "1234567890123456789012345678.1234567890BD",
        "-9999999999999999999999999999.9999999999BD",
    ],
}

COLUMNS = [f.name for f in SCHEMA if f.name != "id"] + ["pk", "pd"]


def filters(all_rows: list[dict], seed: int, per_column: int) -> list[str]:
    """WHERE clauses: for every column, every pushed form with literals drawn (seeded) from
    its values, plus the extremes and unrepresentable literals; ``per_column`` literals each."""
    rng = random.Random(seed)
    out = []
    for c in COLUMNS:
        if c in ("pk", "pd"):
            values = [1, 2] if c == "pk" else ["2020-01-01", "1999-12-31"]
        else:
            values = sorted(
                {repr(r[c]): r[c] for r in all_rows if r[c] is not None}.values(), key=repr
            )
        picked = rng.sample(values, min(per_column, len(values)))
        lits = [sql_literal(v, c) for v in picked] + EXTRA_LITERALS.get(c, [])
        out += [f"{c} IS NULL", f"{c} IS NOT NULL"]
        for lit in lits:
            out += [
                f"{c} = {lit}",
                f"{c} <=> {lit}",
                f"{c} < {lit}",
                f"{c} <= {lit}",
                f"{c} > {lit}",
                f"{c} >= {lit}",
                f"NOT ({c} = {lit})",
                f"NOT ({c} <=> {lit})",
            ]
        if len(lits) >= 2:
            out += [
                f"{c} IN ({lits[0]}, {lits[1]})",
                f"{c} NOT IN ({lits[0]}, {lits[1]})",
                f"{c} = {lits[0]} OR {c} = {lits[1]}",
                f"{c} >= {lits[0]} AND {c} IS NOT NULL AND id > 2",
            ]
        if c == "s":
            for v in picked + ["日", "b", ""]:
                esc = (
                    v.replace("\\", "\\\\")
                    .replace("'", "\\'")
                    .replace("%", "\\%")
                    .replace("_", "\\_")
                )
                out += [
                    f"s LIKE '{esc}%'",
                    f"s LIKE '%{esc}'",
                    f"s LIKE '%{esc}%'",
                    f"NOT (s LIKE '{esc}%')",
                ]
    return out
