"""The 22 TPC-H queries, and helpers that bind the TPC-H table names in a SparkSession.

The query texts live in ``queries/qNN.sql``: Spark SQL written so that the same text runs in
DuckDB, with a placeholder for each substitution parameter (``{DATE}``, ``{REGION}``, ...;
``parameters.VALIDATION`` has the specification's validation ("qualification") values,
``parameters.parameter_set(seed)`` seeded sets drawn by its rules) and ``{q11_fraction}``
(Q11's FRACTION = 0.0001 / SF), all substituted by ``query_text``. No per-engine rewriting is
needed today; ``_ENGINE_REWRITES`` is where a small, documented substitution would go if an
engine ever needed one.

``ORDER_BY_COLUMNS`` gives, per query, the 0-based positions of the output columns its ORDER BY
sorts on (empty for the single-row queries); ``oracle.compare_results`` uses it to let rows
whose sort keys tie appear in either order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from raptorx_py.tpch.parameters import VALIDATION

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

QUERY_NUMBERS = range(1, 23)

TABLES: tuple[str, ...] = (
    "region",
    "nation",
    "supplier",
    "customer",
    "part",
    "partsupp",
    "orders",
    "lineitem",
)

#: Derived Hive partition columns ('YYYY-MM' strings); the other tables are unpartitioned.
PARTITION_COLUMNS: dict[str, str] = {"lineitem": "l_shipmonth", "orders": "o_ordermonth"}

ENGINES = ("spark", "duckdb")

#: Output-column positions of each query's ORDER BY keys (direction does not matter here).
ORDER_BY_COLUMNS: dict[int, tuple[int, ...]] = {
    1: (0, 1),
    2: (0, 2, 1, 3),
    3: (1, 2),
    4: (0,),
    5: (1,),
    6: (),
    7: (0, 1, 2),
    8: (0,),
    9: (0, 1),
    10: (2,),
    11: (1,),
    12: (0,),
    13: (1, 0),
    14: (),
    15: (0,),
    16: (3, 0, 1, 2),
    17: (),
    18: (4, 3),
    19: (),
    20: (0,),
    21: (1, 0),
    22: (0,),
}

# Per-engine textual substitutions (old, new), applied after the parameters. Empty: the
# shared text runs unchanged in Spark 4.x and DuckDB.
_ENGINE_REWRITES: dict[str, tuple[tuple[str, str], ...]] = {"spark": (), "duckdb": ()}


def _check_number(n: int) -> None:
    if n not in QUERY_NUMBERS:
        raise ValueError(f"TPC-H query number must be 1..22, got {n!r}")


@cache
def raw_query_text(n: int) -> str:
    """The text of ``queries/qNN.sql`` with its placeholders still in place."""
    _check_number(n)
    return resources.files("raptorx_py.tpch").joinpath("queries", f"q{n:02d}.sql").read_text()


def q11_fraction(scale: float) -> str:
    """Q11's FRACTION, 0.0001 / SF, as a plain decimal literal (``0.01`` at SF 0.01)."""
    if scale <= 0:
        raise ValueError(f"TPC-H scale factor must be positive, got {scale!r}")
    value = Decimal("0.0001") / Decimal(repr(float(scale)))
    return format(value.normalize(), "f")


_PLACEHOLDER = re.compile(r"\{(?P<name>[A-Za-z0-9_]+)\}")


def query_text(
    n: int, scale: float, engine: str = "spark", parameters: Mapping[str, str] | None = None
) -> str:
    """Query ``n`` (1..22) ready to run at scale factor ``scale`` on ``engine``.

    ``engine`` is ``"spark"`` or ``"duckdb"``. ``parameters``: the query's substitution
    values (``parameters.draw``), the specification's validation values when None. Raises
    ValueError for an unknown query number or engine, or a parameter set lacking a
    placeholder of the query.
    """
    _check_number(n)
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    values = {**(VALIDATION[n] if parameters is None else parameters)}
    values["q11_fraction"] = q11_fraction(scale)

    def substitute(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in values:
            raise ValueError(f"TPC-H Q{n}: no value for its parameter {name}")
        return values[name]

    text = _PLACEHOLDER.sub(substitute, raw_query_text(n))
    for old, new in _ENGINE_REWRITES[engine]:
        text = text.replace(old, new)
    return text


#: A TPC-H table name where the queries name a table: after ``from``, ``join`` or a comma of
#: a from list (not a column alias such as Q9's ``n_name as nation``); in lower case, as the
#: queries spell tables (the comments' upper-case parameter names stay).
_TABLE_REFERENCE = re.compile(
    r"(?P<before>\b(?:from|join)\s+|,\s*)(?P<table>" + "|".join(TABLES) + r")\b(?!\s*\()"
)


def with_qualified_tables(text: str, qualifier: str) -> str:
    """``text`` with every TPC-H table it reads named ``<qualifier>.<table>``, e.g.
    ``raptorx.tpch`` for the Spark catalog's tables (``from lineitem`` becomes ``from
    raptorx.tpch.lineitem``). A comma before a name outside a from list (``select a,
    nation``) would be qualified too; the 22 queries have none (checked by the tests, which
    count the references)."""
    return _TABLE_REFERENCE.sub(
        lambda m: f"{m.group('before')}{qualifier}.{m.group('table')}", text
    )


def tables_read(text: str) -> set[str]:
    """The TPC-H tables a query ``text`` reads (the names ``with_qualified_tables`` would
    qualify)."""
    return {m.group("table") for m in _TABLE_REFERENCE.finditer(text)}


def ordered(n: int) -> bool:
    """True when query ``n`` has an ORDER BY (all but the single-row queries 6, 14, 17, 19)."""
    _check_number(n)
    return bool(ORDER_BY_COLUMNS[n])


def register_views(spark: SparkSession, reader: Callable[[str], DataFrame]) -> None:
    """Register the eight TPC-H tables as temporary views named after the tables.

    ``reader(table)`` returns the DataFrame for one table; pass ``parquet_reader(spark, dir)``
    for Spark's own Parquet reader, or e.g.
    ``lambda t: spark.read.format("tiered_hive").load(f"tpch.{t}")`` for the tiered source.
    """
    for table in TABLES:
        reader(table).createOrReplaceTempView(table)


def parquet_reader(
    spark: SparkSession,
    data_dir: str,
    options: Mapping[str, str] | None = None,
    file_format: str = "parquet",
) -> Callable[[str], DataFrame]:
    """A ``reader`` for ``register_views`` over Hive-layout directories ``data_dir/<table>``.

    Partition-column type inference is turned off while each table is read (partition
    discovery happens then; the session's previous setting is restored afterwards) so that
    'YYYY-MM' partition values stay strings, and ``basePath`` makes the partition column
    appear. ``options`` are given to the reader too: an option Parquet ignores still makes
    the scan another relation to Spark's cache, which substitutes a cached DataFrame into
    any later plan that reads the same files with the same options (``CacheManager``).
    ``file_format``: Spark's reader of the files (``parquet``, or ``orc`` for the ORC copy).
    """
    key = "spark.sql.sources.partitionColumnTypeInference.enabled"
    base = str(data_dir).rstrip("/")

    def read(table: str) -> DataFrame:
        path = f"{base}/{table}"
        previous = spark.conf.get(key, None)
        spark.conf.set(key, "false")
        try:
            reader = spark.read.format(file_format).options(**(options or {}))
            return reader.option("basePath", path).load(path)
        finally:
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)

    return read
