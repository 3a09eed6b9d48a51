"""tiered_hive tables by name in Spark SQL: the catalog ``raptorx`` (``TieredHiveCatalog``,
registered by ``tiered_session()``/``register``) over the session's metastore.

- The 22 TPC-H queries written against catalog names (``raptorx.tpch_catalog.lineitem``)
  equal DuckDB's on the same SF 0.01 files (``tests.support.tpch_fixtures.DEFAULT_QUERIES`` by
  default, every table; all 22 under ``make stress``), and a scan through the catalog reads
  exactly what the same scan through ``load()`` reads (counted: columns, partitions, row
  groups, rows).
- ``INSERT INTO`` and ``INSERT OVERWRITE`` through the catalog, read back equal to what was
  written (managed tables, partitioned and not); an EXTERNAL table is refused by the writer.
- ``SHOW NAMESPACES``, ``SHOW TABLES``, ``DESCRIBE`` outputs; unknown namespaces and tables
  are Spark's own exceptions naming what exists; a session without raptorx_py's Python
  source is refused with an error saying why.
"""

from __future__ import annotations

import re

import pytest
from pyspark.errors import AnalysisException

from raptorx_py import native
from raptorx_py.session import register
from raptorx_py.tpch import oracle, queries
from tests.support.tpch_fixtures import tpch_query_params
from tests.support.tpch_loading import load_cached_tpch

pytestmark = pytest.mark.spark

TPCH = "tpch_catalog"
WRITES = "catalog_writes"
CATALOG = native.DEFAULT_CATALOG_NAME


@pytest.fixture(scope="module")
def catalog_tpch(request, spark, env, tpch_sf001_dir, tpch_scale, tmp_path_factory):
    """SF 0.01 registered as EXTERNAL tables ``tpch_catalog.*`` of the session's metastore.
    Temp views other modules named after the TPC-H tables are dropped, so an unqualified name
    left in a query would fail rather than read another module's view."""
    warehouse = str(tmp_path_factory.mktemp("catalog-wh"))
    load_cached_tpch(request, tpch_scale, warehouse, env.settings(), database=TPCH)
    for table in queries.TABLES:
        spark.catalog.dropTempView(table)
    return f"{CATALOG}.{TPCH}"


def test_register_sets_the_catalog(spark):
    assert spark.conf.get(f"spark.sql.catalog.{CATALOG}") == native.CATALOG_CLASS


@pytest.mark.parametrize("n", tpch_query_params())
def test_tpch_query_by_catalog_names_matches_duckdb(
    n, spark, catalog_tpch, duckdb_expected, tpch_scale, counted
):
    text = queries.with_qualified_tables(queries.query_text(n, tpch_scale, "spark"), catalog_tpch)
    assert f"{catalog_tpch}." in text
    with counted() as c:
        actual = oracle.spark_rows(spark.sql(text))
    diff = oracle.compare_results(
        duckdb_expected[n], actual, ordered=queries.ordered(n), sort_key=queries.ORDER_BY_COLUMNS[n]
    )
    assert diff is None, f"Q{n} by catalog names: {diff}"
    assert len(actual) > 0
    # Planned by the driver's planner, as load() is: no planning Python worker.
    assert c["planning.scans"] > 0
    assert c["planning.worker_calls"] == 0


def test_a_catalog_scan_reads_what_the_same_load_scan_reads(spark, catalog_tpch, counted):
    """Same pushdown, pruning and columns as ``load()``: a filter on the partition key and on
    a data column, counted at the planner and the reader."""
    where = "l_shipmonth = '1995-03' and l_quantity > 45"
    read = [
        "planner.partitions_total",
        "planner.partitions_pruned",
        "planner.files_listed",
        "reader.row_groups_read",
        "reader.rows_read",
        "reader.rows_out",
        f"scan.column.{TPCH}.lineitem.l_quantity",
        f"scan.column.{TPCH}.lineitem.l_extendedprice",
        f"scan.column.{TPCH}.lineitem.l_comment",
    ]
    with counted() as by_name:
        named = spark.sql(
            f"select sum(l_extendedprice) from {catalog_tpch}.lineitem where {where}"
        ).collect()
    with counted() as by_load:
        loaded = (
            spark.read.format("tiered_hive")
            .load(f"{TPCH}.lineitem")
            .where(where)
            .selectExpr("sum(l_extendedprice)")
            .collect()
        )
    assert named == loaded
    assert {k: by_name[k] for k in read} == {k: by_load[k] for k in read}
    assert by_name["planner.partitions_pruned"] > 0
    assert by_name[f"scan.column.{TPCH}.lineitem.l_comment"] == 0
    assert by_name["planning.worker_calls"] == 0


def test_show_namespaces_and_tables(spark, env, catalog_tpch):
    with env.metastore() as ms:
        databases = ms.list_databases()
    shown = [r[0] for r in spark.sql(f"SHOW NAMESPACES IN {CATALOG}").collect()]
    assert sorted(shown) == sorted(databases)
    assert TPCH in shown
    tables = spark.sql(f"SHOW TABLES IN {catalog_tpch}").collect()
    assert sorted(r.tableName for r in tables) == sorted(queries.TABLES)
    assert {r.namespace for r in tables} == {TPCH}
    # A Hive database holds no namespaces.
    assert spark.sql(f"SHOW NAMESPACES IN {catalog_tpch}").collect() == []


def test_describe_shows_columns_partition_keys_and_location(spark, env, catalog_tpch):
    rows = [tuple(r) for r in spark.sql(f"DESCRIBE TABLE {catalog_tpch}.lineitem").collect()]
    loaded = spark.read.format("tiered_hive").load(f"{TPCH}.lineitem").schema
    columns = [(f.name, f.dataType.simpleString()) for f in loaded.fields]
    assert [(r[0], r[1]) for r in rows[: len(columns)]] == columns
    assert rows[-1][0] == "l_shipmonth"
    assert ("# Partition Information", "", "") in rows
    extended = {
        r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {catalog_tpch}.lineitem").collect()
    }
    with env.metastore() as ms:
        location = ms.get_table(TPCH, "lineitem").location
    assert extended["Location"] == location
    assert extended["Provider"] == "tiered_hive"
    assert (extended["Catalog"], extended["Namespace"], extended["Table"]) == (
        CATALOG,
        TPCH,
        "lineitem",
    )
    assert extended["Type"] == "EXTERNAL"
    # An unpartitioned table has no partition section.
    nation = [r[0] for r in spark.sql(f"DESCRIBE TABLE {catalog_tpch}.nation").collect()]
    assert "# Partition Information" not in nation


def _ids(spark, table: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"select * from {table}").collect())


def test_insert_into_and_overwrite_a_managed_partitioned_table(spark, env):
    target = f"{CATALOG}.{WRITES}.events"
    first = spark.createDataFrame([(1, "a", "x"), (2, "b", "y")], "id long, v string, k string")
    first.write.format("tiered_hive").mode("append").option("partition_by", "k").save(
        f"{WRITES}.events"
    )
    assert _ids(spark, target) == [(1, "a", "x"), (2, "b", "y")]

    spark.sql(f"INSERT INTO {target} SELECT 3, 'c', 'x' UNION ALL SELECT 4, 'd', 'z'")
    assert _ids(spark, target) == [(1, "a", "x"), (2, "b", "y"), (3, "c", "x"), (4, "d", "z")]
    with env.metastore() as ms:
        table = ms.get_table(WRITES, "events")
        values = sorted(p.values for p in ms.list_partitions(table))
    assert table.table_type == "MANAGED_TABLE"
    described = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {target}").collect()}
    assert described["Type"] == "MANAGED"
    assert [k.name for k in table.partition_keys] == ["k"]
    assert values == [("x",), ("y",), ("z",)]

    spark.sql(f"INSERT OVERWRITE {target} SELECT id + 10, v, k FROM {target} WHERE k = 'x'")
    assert _ids(spark, target) == [(11, "a", "x"), (13, "c", "x")]
    # The same rows through load().
    loaded = spark.read.format("tiered_hive").load(f"{WRITES}.events")
    assert sorted(tuple(r) for r in loaded.collect()) == [(11, "a", "x"), (13, "c", "x")]


def test_insert_into_an_unpartitioned_table_and_from_another_catalog_table(spark, catalog_tpch):
    target = f"{CATALOG}.{WRITES}.nations"
    spark.createDataFrame([(0, "none")], "n_nationkey long, n_name string").write.format(
        "tiered_hive"
    ).mode("append").save(f"{WRITES}.nations")
    spark.sql(
        f"INSERT INTO {target} SELECT n_nationkey, n_name FROM {catalog_tpch}.nation "
        "WHERE n_regionkey = 0"
    )
    expected = sorted(
        (r[0], r[1])
        for r in spark.sql(
            f"select n_nationkey, n_name from {catalog_tpch}.nation where n_regionkey = 0"
        ).collect()
    )
    assert len(expected) == 5
    assert _ids(spark, target) == sorted([(0, "none"), *expected])
    spark.sql(f"INSERT OVERWRITE TABLE {target} VALUES (7, 'seven')")
    assert _ids(spark, target) == [(7, "seven")]


def test_insert_into_an_external_table_is_refused_by_the_writer(spark, catalog_tpch):
    before = spark.sql(f"select count(*) from {catalog_tpch}.region").collect()[0][0]
    with pytest.raises(Exception, match=r"EXTERNAL table: tiered_hive writes MANAGED tables only"):
        spark.sql(f"INSERT INTO {catalog_tpch}.region SELECT * FROM {catalog_tpch}.region")
    assert spark.sql(f"select count(*) from {catalog_tpch}.region").collect()[0][0] == before == 5


def _java_class(e: AnalysisException) -> str:
    origin = getattr(e, "_origin", None)
    return str(origin.getClass().getName()) if origin is not None else ""


def test_unknown_namespace_is_spark_no_such_namespace_naming_what_exists(spark, catalog_tpch):
    # A misspelling: whether the metastore holds a few namespaces (all listed) or many
    # (other tests' too: the closest listed first), the one meant is named.
    typo = f"{TPCH}_typo"
    with pytest.raises(AnalysisException) as info:
        spark.sql(f"SHOW TABLES IN {CATALOG}.{typo}").collect()
    e = info.value
    assert e.getCondition() == "SCHEMA_NOT_FOUND"
    assert _java_class(e) == "org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException"
    message = str(e)
    assert f"`{CATALOG}`.`{typo}`" in message
    assert TPCH in message
    assert "Existing namespaces" in message or "namespaces exist, among them" in message
    with pytest.raises(AnalysisException) as described:
        spark.sql(f"DESCRIBE NAMESPACE {CATALOG}.{typo}").collect()
    assert described.value.getCondition() == "SCHEMA_NOT_FOUND"
    assert TPCH in str(described.value)


def test_unknown_table_is_spark_no_such_table_naming_what_exists(spark, catalog_tpch):
    """The catalog throws Spark's ``NoSuchTableException`` naming the namespace's tables; a
    query's analyzer turns it into its own ``TABLE_OR_VIEW_NOT_FOUND`` of the same class of
    error (without our listing)."""
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    catalog = spark._jsparkSession.sessionState().catalogManager().catalog(CATALOG)
    namespace = gateway.new_array(jvm.java.lang.String, 1)
    namespace[0] = TPCH
    ident = jvm.org.apache.spark.sql.connector.catalog.Identifier.of(namespace, "lineitems")
    with pytest.raises(AnalysisException) as info:  # pyspark's conversion of the JVM's
        catalog.loadTable(ident)
    e = info.value
    assert _java_class(e) == "org.apache.spark.sql.catalyst.analysis.NoSuchTableException"
    assert e.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
    message = str(e)
    assert f"`{CATALOG}`.`{TPCH}`.`lineitems`" in message
    assert "Existing tables: customer, lineitem, nation, orders, part" in message
    assert not catalog.tableExists(ident)

    with pytest.raises(AnalysisException) as query:
        spark.sql(f"select * from {catalog_tpch}.lineitems").collect()
    assert query.value.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
    assert f"`{CATALOG}`.`{TPCH}`.`lineitems`" in str(query.value)


def test_creating_or_dropping_is_refused_naming_the_way(spark, catalog_tpch):
    with pytest.raises(Exception, match=r"does not create tables; .*raptorx table register"):
        spark.sql(f"CREATE TABLE {CATALOG}.{TPCH}.new_t (a int)").collect()
    with pytest.raises(Exception, match=r"does not drop tables"):
        spark.sql(f"DROP TABLE {catalog_tpch}.region").collect()
    assert spark.sql(f"select count(*) from {catalog_tpch}.region").collect()[0][0] == 5


def test_another_catalog_name_and_a_name_taken(spark, env, catalog_tpch):
    register(spark, properties=env.properties, catalog_name="rx_other")
    tables = sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN rx_other.{TPCH}").collect())
    assert tables == sorted(queries.TABLES)
    spark.conf.set("spark.sql.catalog.rx_taken", "org.example.SomeCatalog")
    from raptorx_py.errors import ConfigError

    with pytest.raises(ConfigError, match=r"already has the catalog 'rx_taken'"):
        register(spark, properties=env.properties, catalog_name="rx_taken")
    with pytest.raises(ConfigError, match=r"is not a catalog name"):
        register(spark, properties=env.properties, catalog_name="raptor-x")
    spark.conf.unset("spark.sql.catalog.rx_taken")
    register(spark, properties=env.properties)  # the session as the other tests expect it


def test_a_session_without_the_python_source_is_refused_saying_why(spark):
    """A new session has none of the runtime registrations (as spark-sql has none)."""
    bare = spark.newSession()
    bare.conf.set(f"spark.sql.catalog.{CATALOG}", native.CATALOG_CLASS)
    with pytest.raises(Exception) as info:
        bare.sql(f"SHOW NAMESPACES IN {CATALOG}").collect()
    message = re.sub(r"\s+", " ", str(info.value))
    assert "tiered_hive_python, which this session has not registered" in message
    assert "raptorx_py.register(spark)" in message


def test_a_catalog_over_a_hive_metastore_by_its_options(
    spark, hms_uri, tpch_sf001_dir, catalog_tpch
):
    """A second catalog whose options name another metastore (a Hive Metastore over Thrift):
    ``spark.sql.catalog.<name>.<property>`` overrides that property for its tables only."""
    from raptorx_py.config import load_settings
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.tables.table_registration import register_external_table

    hms = {
        "hive.metastore.uri": hms_uri,
        "hive.metastore-cache-ttl": "1h",
        "hive.metastore-timeout": "120s",  # embedded Derby is slow
    }
    settings = load_settings(overrides=hms)
    with open_catalog(settings.metastore_connection) as ms:
        ms.create_database("catalog_hms")
        for table in ("nation", "region"):
            register_external_table(
                ms,
                settings,
                f"catalog_hms.{table}",
                f"file://{tpch_sf001_dir}/{table}",
                replace=True,
                sealed=True,
            )
    spark.conf.set("spark.sql.catalog.hms_rx", native.CATALOG_CLASS)
    for key, value in hms.items():
        spark.conf.set(f"spark.sql.catalog.hms_rx.{key}", value)
    namespaces = [r[0] for r in spark.sql("SHOW NAMESPACES IN hms_rx").collect()]
    assert "catalog_hms" in namespaces and "default" in namespaces
    assert sorted(
        r.tableName for r in spark.sql("SHOW TABLES IN hms_rx.catalog_hms").collect()
    ) == [
        "nation",
        "region",
    ]
    query = (
        "select r_name, count(*) from {c}.nation join {c}.region on n_regionkey = r_regionkey "
        "group by r_name order by r_name"
    )
    over_hms = spark.sql(query.format(c="hms_rx.catalog_hms")).collect()
    assert len(over_hms) == 5 and sum(r[1] for r in over_hms) == 25
    # The same files through the session's own metastore (the raptorx catalog, SQLite).
    assert over_hms == spark.sql(query.format(c=f"{CATALOG}.{TPCH}")).collect()


def test_flush_metadata_cache_procedure(spark, catalog_tpch, counted):
    """Trino's ``CALL <catalog>.system.flush_metadata_cache(...)``: the driver's planner
    forgets the table's cached versions, so the next query loads it from the metastore. The
    ``hms_rx`` catalog of the test above keeps its cache (1h TTL); the session's does not."""
    count = "select count(*) from hms_rx.catalog_hms.nation"
    assert spark.sql(count).collect()[0][0] == 25
    with counted() as warm:
        assert spark.sql(count).collect()[0][0] == 25
    assert warm["metastore_cache.table_misses"] == 0
    with counted() as c:
        spark.sql(
            "CALL hms_rx.system.flush_metadata_cache(schema_name => 'catalog_hms', "
            "table_name => 'nation')"
        ).collect()
        assert spark.sql(count).collect()[0][0] == 25
    assert c["metastore_cache.invalidations"] == 1
    assert c["metastore_cache.table_misses"] >= 1
    assert c["catalog.requests"] == 1
    spark.sql("CALL hms_rx.system.flush_metadata_cache()").collect()
    with pytest.raises(AnalysisException) as missing:
        spark.sql(
            "CALL hms_rx.system.flush_metadata_cache(schema_name => 'catalog_hms', "
            "table_name => 'nations')"
        ).collect()
    assert missing.value.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
    assert "Existing tables: nation, region" in str(missing.value)
    with pytest.raises(AnalysisException) as unknown:
        spark.sql(f"CALL {CATALOG}.system.flush_cache()").collect()
    assert unknown.value.getCondition() == "FAILED_TO_LOAD_ROUTINE"  # Spark's, with ours as cause
    cause = str(unknown.value._origin.getCause().getMessage())
    assert "has no procedure system.flush_cache; it has system.flush_metadata_cache" in cause


def test_use_makes_bare_names_the_catalogs(spark, catalog_tpch):
    """``USE raptorx.<db>``: unqualified names resolve in the catalog's namespace."""
    try:
        spark.sql(f"USE {catalog_tpch}")
        assert spark.sql("select count(*) from region").collect()[0][0] == 5
        assert spark.catalog.currentCatalog() == CATALOG
        with pytest.raises(AnalysisException) as missing:
            spark.sql(f"USE {CATALOG}.no_such_db")
        assert missing.value.getCondition() == "SCHEMA_NOT_FOUND"
    finally:
        spark.sql("USE spark_catalog.default")
    assert spark.catalog.currentCatalog() == "spark_catalog"


def test_a_bad_property_says_whether_it_came_from_a_catalogs_conf_or_register(spark, env):
    """Both were once reported as an "option", which did not say where to fix it."""
    from raptorx_py.errors import ConfigError

    spark.conf.set("spark.sql.catalog.rx_badconf", native.CATALOG_CLASS)
    spark.conf.set("spark.sql.catalog.rx_badconf.cache.enabled", "maybe")
    spark.conf.set("spark.sql.catalog.rx_badconf.cache.max-size", "1GB")
    try:
        with pytest.raises(Exception) as info:
            spark.sql("SHOW NAMESPACES IN rx_badconf").collect()
    finally:
        for key in ("", ".cache.enabled", ".cache.max-size"):
            spark.conf.unset(f"spark.sql.catalog.rx_badconf{key}")
    message = re.sub(r"\s+", " ", str(info.value))
    assert (
        "Spark conf spark.sql.catalog.rx_badconf, property 'cache.enabled': invalid value 'maybe'"
        in message
    )
    assert (
        "Spark conf spark.sql.catalog.rx_badconf, property 'cache.max-size': unknown option "
        "for tiered_hive; did you mean 'cache.alluxio.max-cache-size'?" in message
    )
    with pytest.raises(ConfigError, match=r"^register\(properties=\.\.\.\), property 'cache.en"):
        register(spark, properties={**env.properties, "cache.enabled": "maybe"})


def test_the_scan_node_by_sql_name_is_named_as_the_readme_says(spark, catalog_tpch):
    """The README once named only `BatchScan tiered_hive <db.table>` (a load()
    read's node); by SQL name the node is `BatchScan raptorx.<db>.<table>`."""
    by_name = spark.sql(f"select r_name from {catalog_tpch}.region")
    plan = by_name._jdf.queryExecution().executedPlan().toString()
    assert f"BatchScan {catalog_tpch}.region" in plan, plan
    by_load = spark.read.format("tiered_hive").load(f"{TPCH}.region").select("r_name")
    plan = by_load._jdf.queryExecution().executedPlan().toString()
    assert f"BatchScan tiered_hive {TPCH}.region" in plan, plan
