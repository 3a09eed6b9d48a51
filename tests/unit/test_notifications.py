"""The notification log on every metastore backend: every change appends its event in the
same transaction, in total order, without gaps; messages carry what a cache needs.

Most tests read our own log's messages (SQLite and PostgreSQL: table and partition ids,
transactions, write ids); the ones named ``on_every_backend`` go through the interface every
backend implements (``notifications_after``), a Hive Metastore over Thrift included, and
assert what its log has too: one event per change, names, order, consecutive ids, paging."""

import pytest

from raptorx_py.errors import AlreadyExistsError, MetastoreError
from raptorx_py.hive.model import EXTERNAL_TABLE, Column, Partition, Table
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.metastore.notifications import (
    EVENT_TYPES,
    append_event,
    current_notification_id,
    get_notifications,
)
from tests.support.fake_clock import FakeClock
from tests.unit.txn_helpers import managed_table, open_ms, partition


@pytest.fixture
def clock():
    return FakeClock(1_000.0)


@pytest.fixture
def ms(metastore_url, clock):
    with open_ms(metastore_url, clock=clock) as m:
        yield m


def _types(events):
    return [e.event_type for e in events]


def test_an_empty_log(ms):
    assert current_notification_id(ms) == 0
    assert get_notifications(ms) == []


def test_database_and_table_changes_append_events_in_order(ms):
    ms.create_database("db", location="file:///w")
    ms.create_database("db")  # exists already: no change, no event
    ms.alter_database("db", "file:///w2")
    old = ms.create_table(managed_table(), [partition("a"), partition("b")])
    new = ms.create_table(managed_table(), replace=True)
    ms.alter_table_parameters("db", "t", {"comment": "x"})
    ms.drop_table("db", "t")
    ms.drop_database("db")
    events = get_notifications(ms)
    assert _types(events) == [
        "CREATE_DATABASE",
        "ALTER_DATABASE",
        "CREATE_TABLE",
        "ADD_PARTITION",
        "DROP_TABLE",
        "CREATE_TABLE",
        "ALTER_TABLE",
        "DROP_TABLE",
        "DROP_DATABASE",
    ]
    assert [e.event_id for e in events] == list(range(1, 10))
    assert current_notification_id(ms) == 9
    assert events[1].message["location"] == "file:///w2"
    assert all(e.db_name == "db" for e in events)
    assert [e.table_name for e in events[2:8]] == ["t"] * 6
    # table ids tell the dropped table from the recreated one
    assert events[2].message["tableId"] == events[4].message["tableId"] == old.id
    assert events[5].message["tableId"] == events[7].message["tableId"] == new.id != old.id
    assert events[5].message["tableType"] == "MANAGED_TABLE"
    assert events[6].message["parameters"] == {"comment": "x"}
    assert [p["values"] for p in events[3].message["partitions"]] == [["a"], ["b"]]
    assert all(p["partId"] for p in events[3].message["partitions"])


def test_partition_changes_append_events(ms):
    ms.create_database("db")
    table = ms.create_table(managed_table())
    ms.add_partitions(table, [partition("a"), partition("b")])
    ms.alter_partition(
        table, Partition(("a",), "file:///elsewhere", {"numRows": "5"}, storage_format="ORC")
    )
    ms.drop_partitions(table, [("a",), ("b",)])
    events = get_notifications(ms, after_event_id=2)
    assert _types(events) == ["ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION"]
    assert "format" not in events[0].message["partitions"][0]  # the table's format
    assert events[1].message["partitions"][0]["location"] == "file:///elsewhere"
    assert events[1].message["partitions"][0]["format"] == "ORC"
    assert [p["values"] for p in events[2].message["partitions"]] == [["a"], ["b"]]
    assert ms.list_partitions(table) == []


def test_drop_database_cascade_drops_tables_with_their_events(ms):
    ms.create_database("db")
    ms.create_table(managed_table(name="t1"))
    ms.create_table(managed_table(name="t2"))
    with pytest.raises(MetastoreError, match="database 'db' is not empty .*t1, t2"):
        ms.drop_database("db")
    ms.drop_database("db", cascade=True)
    assert _types(get_notifications(ms, 3)) == ["DROP_TABLE", "DROP_TABLE", "DROP_DATABASE"]
    assert ms.list_databases() == []


def test_transaction_events_carry_txn_and_write_ids(ms):
    ms.create_database("db")
    table = ms.create_table(managed_table())
    start = current_notification_id(ms)
    txn = ms.open_transaction(user="alice", host="h")
    wid = ms.allocate_write_id(txn, "db", "t")
    ms.add_partitions(table, [partition("a")], write_id=wid)
    ms.commit_transaction(txn)
    aborted = ms.open_transaction(user="bob", host="h")
    ms.abort_transaction(aborted)
    events = get_notifications(ms, start)
    assert _types(events) == [
        "OPEN_TXN",
        "ALLOC_WRITE_ID",
        "ADD_PARTITION",
        "COMMIT_TXN",
        "OPEN_TXN",
        "ABORT_TXN",
    ]
    opened, alloc, add, commit, _, abort = events
    assert opened.txn_id == txn and opened.message == {"txnId": txn, "user": "alice", "host": "h"}
    assert (alloc.txn_id, alloc.write_id, alloc.db_name, alloc.table_name) == (txn, wid, "db", "t")
    assert alloc.message["tableId"] == table.id
    # the write is staged under its write id; the commit event makes it visible
    assert (add.txn_id, add.write_id) == (txn, wid)
    assert add.message["partitions"][0]["writeId"] == wid
    assert commit.message["writeIds"] == [{"db": "db", "table": "t", "writeId": wid}]
    assert abort.txn_id == aborted and abort.message["reason"] == "aborted by its client"


def test_a_failed_change_appends_nothing_and_leaves_no_gap(ms):
    ms.create_database("db")
    original = ms.create_table(managed_table(), [partition("a")])
    before = current_notification_id(ms)
    bad = Partition(("x", "y"), "file:///x")
    with pytest.raises(MetastoreError, match="2 values for 1 partition keys"):
        ms.create_table(managed_table(), [partition("b"), bad], replace=True)
    with pytest.raises(AlreadyExistsError, match="partition.*p=a of db.t already exist"):
        ms.add_partitions(original, [partition("a")])
    assert current_notification_id(ms) == before
    ms.drop_table("db", "t")
    assert [e.event_id for e in get_notifications(ms, before)] == [before + 1]


def test_paging_through_the_log(ms):
    for i in range(7):
        ms.create_database(f"db{i}")
    assert [e.event_id for e in get_notifications(ms, 0, limit=3)] == [1, 2, 3]
    assert [e.event_id for e in get_notifications(ms, 3, limit=3)] == [4, 5, 6]
    assert [e.event_id for e in get_notifications(ms, 6, limit=3)] == [7]
    assert get_notifications(ms, 7) == []
    assert get_notifications(ms, 0, limit=0) == []
    with pytest.raises(ValueError, match="negative notification limit"):
        get_notifications(ms, 0, limit=-1)


def test_event_time_comes_from_the_clock(ms, clock):
    ms.create_database("a")
    clock.advance(60)
    ms.create_database("b")
    assert [e.event_time for e in get_notifications(ms)] == [1000, 1060]


def test_external_tables_have_events_but_no_write_ids(ms):
    ms.create_database("db")
    ext = ms.create_table(Table("db", "e", EXTERNAL_TABLE, "file:///e", (Column("a", "int"),)))
    [event] = get_notifications(ms, 1)
    assert event.message["tableType"] == EXTERNAL_TABLE and event.write_id is None
    assert event.message["tableId"] == ext.id


def test_every_event_type_is_documented_and_unknown_types_are_refused(ms):
    assert {
        "CREATE_DATABASE",
        "ALTER_DATABASE",
        "DROP_DATABASE",
        "CREATE_TABLE",
        "ALTER_TABLE",
        "DROP_TABLE",
        "ADD_PARTITION",
        "ALTER_PARTITION",
        "DROP_PARTITION",
        "OPEN_TXN",
        "COMMIT_TXN",
        "ABORT_TXN",
        "ALLOC_WRITE_ID",
    } == set(EVENT_TYPES)
    with pytest.raises(ValueError, match="unknown notification event type 'NOPE'"):
        with ms.sql.transaction():
            append_event(ms, "NOPE")
    assert current_notification_id(ms) == 0


def test_setting_partition_parameters_appends_an_alter_partition_event(ms):
    ms.create_database("db")
    table = ms.create_table(managed_table(), [partition("a")])
    start = current_notification_id(ms)
    ms.set_partition_parameters(table, ("a",), {"sealed": "true"})
    ms.set_partition_parameters(table, ("a",), {"sealed": None})
    events = get_notifications(ms, start)
    assert _types(events) == ["ALTER_PARTITION", "ALTER_PARTITION"]
    assert [e.message["parameters"] for e in events] == [{"sealed": "true"}, {"sealed": None}]
    assert events[0].message["partitions"][0]["values"] == ["a"]
    assert events[0].message["tableId"] == table.id


@pytest.fixture
def catalog(catalog_settings):
    """A fresh catalogue on every backend: SQLite, PostgreSQL and a Hive Metastore (Thrift)."""
    with open_catalog(catalog_settings.metastore_connection, create=True) as m:
        yield m


def test_on_every_backend_each_catalogue_change_is_one_event_in_order(catalog, tmp_path):
    ms = catalog
    start = ms.current_notification_id()
    root = tmp_path.as_uri()
    ms.create_database("db")
    table = ms.create_table(
        Table("db", "e", EXTERNAL_TABLE, root, (Column("id", "int"),), (Column("p", "string"),))
    )
    ms.add_partitions(table, [Partition(("a",), f"{root}/p=a"), Partition(("b",), f"{root}/p=b")])
    ms.set_partition_parameters(table, ("a",), {"sealed": "true"})
    ms.alter_table_parameters("db", "e", {"comment": "x"})
    ms.drop_partitions(table, [("b",)])
    ms.drop_table("db", "e")
    events = ms.notifications_after(start)
    assert [(e.event_type, e.db_name, e.table_name) for e in events] == [
        ("CREATE_DATABASE", "db", None),
        ("CREATE_TABLE", "db", "e"),
        ("ADD_PARTITION", "db", "e"),
        ("ALTER_PARTITION", "db", "e"),
        ("ALTER_TABLE", "db", "e"),
        ("DROP_PARTITION", "db", "e"),
        ("DROP_TABLE", "db", "e"),
    ]
    assert [e.event_id for e in events] == list(range(start + 1, start + 8))
    assert ms.current_notification_id() == start + 7
    first_page = ms.notifications_after(start, limit=3)
    assert [e.event_id for e in first_page] == [start + 1, start + 2, start + 3]
    assert ms.notifications_after(start + 7) == []
