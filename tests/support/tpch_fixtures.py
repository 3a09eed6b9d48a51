"""Pytest plugin with the TPC-H fixtures (loaded by the root conftest via ``pytest_plugins``,
or explicitly with ``-p tests.support.tpch_fixtures``).

- ``tpch_scale``: the scale factor of the test data, 0.01.
- ``tpch_sf001_dir``: TPC-H SF 0.01 in Hive layout, generated once into pytest's cache
  directory (``.pytest_cache/d/tpch/sf0.01``) and reused by later runs; a clean checkout
  regenerates it (about 2 s). ``tpch_work_dir(request)`` is its parent, usable as
  ``load_tpch(work_dir=...)``.
- ``duckdb_expected``: DuckDB's rows of the 22 queries (validation parameters) over
  ``tpch_sf001_dir``, computed once per test session for every module that compares with them.
- ``tpch_query_params()``: the 22 query numbers as pytest parameters, all but
  ``DEFAULT_QUERIES`` marked ``stress``.
- ``spark_local``: the one SparkSession of the test session: the root conftest's ``spark``
  fixture when it exists, else a plain ``local[2]`` session.
"""

from __future__ import annotations

import pytest

TPCH_TEST_SCALE = 0.01

#: The queries a module runs by default when its subject is not the queries but what is
#: around them (another metastore, catalog names, the reader without the jar, Spark's own
#: reader against DuckDB): all eight tables, aggregates pushed and not, joins of up to six
#: tables, a correlated subquery, an outer join, IN with HAVING. The other 15 run under
#: ``make stress``. test_tpch_fragment_hits.py runs all 22 by default through tiered_hive
#: against DuckDB (its first runs are the 22 through Spark's reader, its second the 22 served
#: from fragments); test_tpch_tiered.py runs these seven over S3 through Spark's reader and
#: through the Python reader (all 22 under ``make stress``).
DEFAULT_QUERIES = (1, 2, 5, 6, 9, 13, 18)


def query_difference(n: int, expected, got) -> str | None:
    """None when TPC-H query ``n``'s rows ``got`` are ``expected`` (in its ORDER BY's order
    where it has one), else what differs."""
    from raptorx_py.tpch import oracle, queries

    return oracle.compare_results(
        expected, got, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )


def tpch_query_params() -> list:
    """The 22 query numbers as pytest parameters (ids ``q01``...), those not in
    ``DEFAULT_QUERIES`` marked ``stress``."""
    from raptorx_py.tpch import queries

    return [
        pytest.param(n, id=f"q{n:02d}", marks=() if n in DEFAULT_QUERIES else pytest.mark.stress)
        for n in queries.QUERY_NUMBERS
    ]


@pytest.fixture(scope="session")
def tpch_scale() -> float:
    return TPCH_TEST_SCALE


@pytest.fixture(scope="session")
def tpch_sf001_dir(request) -> str:
    """Directory holding TPC-H SF 0.01 as ``<dir>/<table>/...`` Hive-layout Parquet."""
    from raptorx_py.tpch.generate import generate_tpch

    out_dir = tpch_work_dir(request) / "sf0.01"
    generate_tpch(TPCH_TEST_SCALE, str(out_dir))
    return str(out_dir)


@pytest.fixture(scope="session")
def duckdb_expected(tpch_sf001_dir) -> dict[int, list[tuple]]:
    """Query number -> DuckDB's rows (``oracle.duckdb_results``), every TPC-H query; read only."""
    from raptorx_py.tpch import oracle, queries

    return oracle.duckdb_results(tpch_sf001_dir, queries.QUERY_NUMBERS, TPCH_TEST_SCALE, threads=2)


def tpch_work_dir(request):
    """pytest's cache directory for TPC-H generations, laid out as ``load_tpch``'s
    ``work_dir`` (``<dir>/sf<scale>``), so loading SF 0.01 in a test reuses the fixture's data.
    With pytest's cache off (``-p no:cacheprovider``), a directory of the session's temporary
    directory instead: generated once per session."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return cache.mkdir("tpch")
    work = request.getfixturevalue("tmp_path_factory").getbasetemp() / "tpch"
    work.mkdir(exist_ok=True)
    return work


@pytest.fixture(scope="session")
def spark_local(request):
    """The test session's one SparkSession.

    Spark allows one SparkContext per process, and ``getOrCreate`` silently ignores the
    static settings of a second builder, so this reuses the ``spark`` fixture of the root
    conftest (a tiered session, ``local[2]``) when there is one, and otherwise starts a plain
    ``local[2]`` session (shuffle partitions 4, UI off, UTC), stopped at the end.
    """
    try:
        shared = request.getfixturevalue("spark")
    except pytest.FixtureLookupError:
        shared = None
    if shared is not None:
        yield shared
        return
    from pyspark.sql import SparkSession

    from tests.support.jvm_options import spark_java_options

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("raptorx-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", spark_java_options())
        .getOrCreate()
    )
    yield spark
    spark.stop()
