import dataclasses
import datetime as dt
from decimal import Decimal

import pytest

from raptorx_py.errors import AlreadyExistsError, MetastoreError, NoSuchObjectError
from raptorx_py.hive.model import EXTERNAL_TABLE, Column, ColumnStats, Partition, Table
from raptorx_py.metastore import Metastore
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.metastore.store import SqliteBackend, backend_for_url
from tests.support.counter_deltas import CounterDeltas


@pytest.fixture
def ms(metastore_url):
    """A fresh metastore, once on SQLite and once on PostgreSQL (see metastore_fixtures)."""
    with Metastore(backend_for_url(metastore_url)) as m:
        yield m


@pytest.fixture
def catalog(catalog_settings):
    """A fresh catalogue on every backend: SQLite, PostgreSQL and a Hive Metastore (Thrift)."""
    with open_catalog(catalog_settings.metastore_connection, create=True) as m:
        yield m


def _table_names(ms) -> set[str]:
    """The tables in the metastore's database, upper-case (PostgreSQL folds to lower)."""
    if isinstance(ms.backend, SqliteBackend):
        sql = "SELECT name FROM sqlite_master WHERE type='table'"
    else:
        sql = (
            "SELECT upper(table_name) FROM information_schema.tables "
            "WHERE table_schema = current_schema()"
        )
    return {r[0] for r in ms.sql.execute(sql)}


def _table(db="db", name="t", keys=(Column("m", "string"),)):
    return Table(
        db,
        name,
        EXTERNAL_TABLE,
        "file:///x",
        (Column("id", "bigint"), Column("d", "date"), Column("p", "decimal(15,2)")),
        tuple(keys),
        {"EXTERNAL": "TRUE"},
    )


def _partition(m, lo=1, hi=9):
    return Partition(
        (m,),
        f"file:///x/m={m}",
        {"numRows": "10"},
        {
            "id": ColumnStats(0, lo, hi),
            "d": ColumnStats(1, dt.date(2024, 1, 1), dt.date(2024, 1, 31)),
            "p": ColumnStats(0, Decimal("0.05"), Decimal("10.00")),
        },
    )


HMS_TABLES = {
    "DBS",
    "TBLS",
    "COLUMNS_V2",
    "PARTITION_KEYS",
    "PARTITIONS",
    "PARTITION_KEY_VALS",
    "PARTITION_PARAMS",
    "TABLE_PARAMS",
    "PART_COL_STATS",
    "TAB_COL_STATS",
    "VERSION",
}


def test_created_on_first_use_with_hms_tables(ms):
    assert HMS_TABLES <= _table_names(ms)


def test_sqlite_file_and_its_directory_created_on_first_use(tmp_path):
    with Metastore(SqliteBackend(str(tmp_path / "sub" / "ms.db"))) as ms:
        assert (tmp_path / "sub" / "ms.db").exists()
        names = {r[0] for r in ms.sql.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert HMS_TABLES <= names


def test_round_trip_of_table_partitions_and_typed_stats(catalog):
    ms = catalog
    ms.create_database("db")
    t = ms.create_table(_table(), [_partition("2024-01"), _partition(None)])
    got = ms.get_table("db", "t")
    assert got == t and got.id is not None
    assert [c.name for c in got.all_columns] == ["id", "d", "p", "m"]
    parts = {p.values: p for p in ms.list_partitions(got)}
    assert set(parts) == {("2024-01",), (None,)}
    p = parts[("2024-01",)]
    assert p.row_count == 10
    assert p.stats["d"] == ColumnStats(1, dt.date(2024, 1, 1), dt.date(2024, 1, 31))
    assert p.stats["p"].high == Decimal("10.00") and p.stats["id"].low == 1


def test_a_table_keeps_its_file_format_on_every_backend(catalog):
    catalog.create_database("db")
    assert catalog.create_table(_table(name="p")).storage_format == "PARQUET"
    orc = dataclasses.replace(_table(name="o"), storage_format="ORC")
    catalog.create_table(orc, [_partition("2024-01")])
    got = catalog.get_table("db", "o")
    assert got.storage_format == "ORC" and got.columns == orc.columns


NESTED_COLUMNS = (
    Column("s", "struct<a:int,`b c`:array<string>,d:decimal(10,2)>"),
    Column("kv", "map<string,struct<x:timestamp,y:char(3)>>"),
    Column("arr", "array<array<bigint>>"),
)


def test_nested_column_types_round_trip_on_every_backend(catalog):
    """Hive's type strings of struct, array and map columns (a backticked field name, a
    char inside) come back as written from SQLite, PostgreSQL and a Hive Metastore."""
    catalog.create_database("db")
    nested = dataclasses.replace(_table(name="n"), columns=NESTED_COLUMNS)
    catalog.create_table(nested)
    got = catalog.get_table("db", "n")
    assert got.columns == NESTED_COLUMNS


def test_a_partition_keeps_its_own_file_format_on_every_backend(catalog, tmp_path):
    """Hive keeps a format per partition: a Parquet partition of an ORC table reads back
    as Parquet (added, listed, altered to ORC and back, and in the events), the others as
    the table's (None)."""
    catalog.create_database("db")
    root = tmp_path.as_uri()
    table = catalog.create_table(
        dataclasses.replace(_table(), location=root, storage_format="ORC"),
        [dataclasses.replace(_partition("a"), location=f"{root}/m=a", storage_format="PARQUET")],
    )
    added = catalog.add_partitions(
        table,
        [
            Partition(("b",), f"{root}/m=b", {"numRows": "1"}, storage_format="PARQUET"),
            Partition(("c",), f"{root}/m=c", {"numRows": "1"}, storage_format="ORC"),
        ],
    )
    assert [p.storage_format for p in added] == ["PARQUET", None]

    def formats():
        return {p.values: p.storage_format for p in catalog.list_partitions(table)}

    assert formats() == {("a",): "PARQUET", ("b",): "PARQUET", ("c",): None}
    catalog.alter_partition(table, Partition(("a",), f"{root}/m=a", {"numRows": "2"}))
    catalog.alter_partition(
        table, Partition(("c",), f"{root}/m=c", {"numRows": "2"}, storage_format="PARQUET")
    )
    assert formats() == {("a",): None, ("b",): "PARQUET", ("c",): "PARQUET"}
    assert table.format_of(None) == "ORC"
    assert [table.format_of(p) for p in catalog.list_partitions(table)] == [
        "ORC",
        "PARQUET",
        "PARQUET",
    ]


def test_a_table_stored_in_a_format_not_read_is_refused_naming_it(ms):
    ms.create_database("db")
    ms.create_table(_table())
    with ms.sql.transaction():
        ms.sql.execute("UPDATE TBLS SET INPUT_FORMAT = 'avro' WHERE TBL_NAME = 't'")
    with pytest.raises(
        MetastoreError, match="table db.t .* is stored as 'avro': tiered_hive reads"
    ):
        ms.get_table("db", "t")


def test_unknown_names_list_what_exists(catalog):
    ms = catalog
    ms.create_database("db")
    ms.create_table(_table(name="alpha"))
    ms.create_table(_table(name="beta"))
    with pytest.raises(
        NoSuchObjectError,
        match=r"table 'db.gamma' does not exist.*db.alpha, "
        r"db.beta",
    ):
        ms.get_table("db", "gamma")
    with pytest.raises(NoSuchObjectError, match=r"database 'nodb' does not exist.*: db"):
        ms.get_table("nodb", "alpha")
    with pytest.raises(LookupError):  # callers that know only built-ins can catch it
        ms.get_database("nodb")


def test_failed_create_leaves_metastore_unchanged(ms):
    ms.create_database("db")
    original = ms.create_table(_table(), [_partition("a")])
    bad = Partition(("x", "y"), "file:///x", {}, {})  # two values for one key
    with pytest.raises(MetastoreError, match="2 values for 1 partition keys"):
        ms.create_table(_table(), [_partition("b"), bad], replace=True)
    assert ms.get_table("db", "t") == original
    assert [p.values for p in ms.list_partitions(original)] == [("a",)]


def test_create_without_replace_refuses(catalog):
    ms = catalog
    ms.create_database("db")
    ms.create_table(_table())
    with pytest.raises(AlreadyExistsError, match="db.t"):
        ms.create_table(_table())


def test_parameters_are_merged_and_none_removes_a_key_on_every_backend(catalog, tmp_path):
    """``alter_table_parameters`` and ``set_partition_parameters`` change only the keys given:
    a value sets its key, ``None`` removes it (a key that was never set is no error), every
    other key stays (a Hive Metastore adds keys of its own, which stay too)."""
    ms = catalog
    ms.create_database("db")
    root = tmp_path.as_uri()
    spec = dataclasses.replace(
        _table(), location=root, parameters={"EXTERNAL": "TRUE", "keep": "1", "gone": "2"}
    )
    table = ms.create_table(
        spec, [Partition(("a",), f"{root}/m=a", {"numRows": "3", "sealed": "true"})]
    )
    altered = ms.alter_table_parameters("db", "t", {"gone": None, "new": "3", "never": None})
    assert (altered.parameters["keep"], altered.parameters["new"]) == ("1", "3")
    assert not {"gone", "never"} & set(altered.parameters)
    assert ms.get_table("db", "t").parameters == altered.parameters
    ms.set_partition_parameters(table, ("a",), {"sealed": None, "owner": "x", "never": None})
    [part] = ms.list_partitions(ms.get_table("db", "t"))
    assert (part.parameters["owner"], part.row_count) == ("x", 3)
    assert not {"sealed", "never"} & set(part.parameters)


def test_partitions_list_in_name_order_alter_and_drop_on_every_backend(catalog, tmp_path):
    ms = catalog
    ms.create_database("db")
    root = tmp_path.as_uri()
    table = ms.create_table(dataclasses.replace(_table(), location=root))
    added = ms.add_partitions(
        table, [Partition((v,), f"{root}/m={v}", {"numRows": "1"}) for v in ("b", "c", "a")]
    )
    assert [p.values for p in added] == [("b",), ("c",), ("a",)]  # as given
    assert [p.values for p in ms.list_partitions(table)] == [("a",), ("b",), ("c",)]
    moved = ms.alter_partition(table, Partition(("b",), f"{root}/elsewhere", {"numRows": "5"}))
    assert (moved.location, moved.row_count) == (f"{root}/elsewhere", 5)
    ms.drop_partitions(table, [("a",)])
    assert [(p.values, p.location) for p in ms.list_partitions(table)] == [
        (("b",), f"{root}/elsewhere"),
        (("c",), f"{root}/m=c"),
    ]


def test_replace_gives_a_new_table_id_and_drop_removes_everything(ms):
    ms.create_database("db")
    first = ms.create_table(_table(), [_partition("a")])
    second = ms.create_table(_table(), [_partition("b")], replace=True)
    assert second.id != first.id
    ms.drop_table("db", "t")
    assert ms.list_tables("db") == []
    assert ms.sql.execute("SELECT COUNT(*) FROM PART_COL_STATS").fetchone()[0] == 0


def test_round_trips_are_counted(ms):
    ms.create_database("db")
    t = ms.create_table(_table(), [_partition("a")])
    trips = CounterDeltas()
    ms.list_partitions(t)
    assert trips["metastore.round_trips"] == 4


def test_values_are_parameterised_not_interpolated(ms):
    # Names follow Hive's rule now (test_names.py); a location is any text.
    name = "x'); DROP TABLE TBLS; --"
    ms.create_database("db", location=name)
    assert ms.get_database("db").location == name
    assert ms.sql.execute("SELECT COUNT(*) FROM TBLS").fetchone()[0] == 0


def test_backend_url_errors():
    assert backend_for_url("sqlite:////tmp/x.db").path == "/tmp/x.db"
    with pytest.raises(MetastoreError, match="unsupported metastore URL 'mysql://h/db'"):
        backend_for_url("mysql://h/db")
    with pytest.raises(MetastoreError, match="names no file"):
        backend_for_url("sqlite:///")


def test_unopenable_file_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(MetastoreError, match="cannot open the SQLite metastore"):
        Metastore(SqliteBackend(str(blocker / "ms.db")))
