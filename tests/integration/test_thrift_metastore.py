"""The Thrift metastore backend (``hive.metastore.uri``) against a real Hive Metastore 2.3.10
(``tests/support/hms_fixtures.py``: one server per session, with the test notification listener).

Counted, never timed: every Thrift call is one ``metastore.round_trips``. Every test uses its
own database names (the server is shared by the session).
"""

from __future__ import annotations

import itertools
import logging
from datetime import date
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.config import load_settings
from raptorx_py.errors import MetastoreError, NoSuchObjectError
from raptorx_py.hive.model import (
    EXTERNAL_TABLE,
    MANAGED_TABLE,
    Column,
    ColumnStats,
    Partition,
    Table,
)
from raptorx_py.hive.storage_formats import hive_classes
from raptorx_py.metastore.cached_store import CachedMetastore, close_cached_metastores
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.metastore.thrift_store import ThriftMetastore, parse_thrift_uris
from tests.support.counter_deltas import CounterDeltas

# The server without a listener (the last test's) starts in the background from the first
# test on, not in that test's set-up.
pytestmark = pytest.mark.usefixtures(
    "hms_server_without_listener_launched", "no_background_metastore_refresh"
)


@pytest.fixture(scope="module")
def no_background_metastore_refresh():
    """Stop the refresh threads that earlier modules' queries left in this process's registry
    of metastore caches: one polling the shared server would apply this module's events too,
    and the counters below are process-wide."""
    close_cached_metastores()
    yield


_names = itertools.count(1)
COLUMNS = (Column("id", "bigint"), Column("price", "decimal(15,2)"), Column("day", "date"))
KEYS = (Column("k", "int"),)
TRIPS = "metastore.round_trips"


def unique_db() -> str:
    return f"thr{next(_names)}"


def settings_for(uri: str, **extra: str):
    return load_settings(
        overrides={
            "hive.metastore.uri": uri,
            "hive.metastore-cache-ttl": "1h",
            "hive.metastore-refresh-interval": "1h",
            # Embedded Derby takes seconds for a batch of partition statistics.
            "hive.metastore-timeout": "120s",
            **extra,
        }
    )


def external(db: str, name: str, tmp_path, keys=KEYS) -> Table:
    return Table(db, name, EXTERNAL_TABLE, f"file://{tmp_path}/{name}", COLUMNS, keys)


def partitions(table: Table, n: int, start: int = 0) -> list[Partition]:
    return [
        Partition(
            (str(k),),
            f"{table.location}/k={k}",
            {"numRows": "3"},
            {
                "id": ColumnStats(0, k * 10, k * 10 + 2),
                "price": ColumnStats(1, Decimal("1.50"), Decimal("99.25")),
                "day": ColumnStats(0, date(2024, 1, 1), date(2024, 1, 31)),
            },
        )
        for k in range(start, start + n)
    ]


@pytest.fixture
def ms(hms_uri):
    with open_catalog(settings_for(hms_uri).metastore_connection) as ms:
        assert isinstance(ms, ThriftMetastore)
        yield ms


def test_uri_list_is_parsed_in_order_and_a_bad_one_is_named():
    assert parse_thrift_uris("thrift://a:1, thrift://b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(MetastoreError, match="'http://a:1' is not thrift://host:port"):
        parse_thrift_uris("thrift://b:2,http://a:1")


def test_a_dead_uri_fails_over_to_the_next(hms_server, free_port):
    """The first URI refuses the connection; the call is retried on the second."""
    slept: list[float] = []
    ms = ThriftMetastore(
        f"thrift://127.0.0.1:{free_port},{hms_server.uri}", min_backoff=0.5, sleep=slept.append
    )
    with ms, CounterDeltas() as c:
        assert "default" in ms.list_databases()
    assert slept == [0.5] and c[TRIPS] == 2


def test_every_uri_dead_is_an_error_naming_them(free_port):
    ms = ThriftMetastore(f"thrift://127.0.0.1:{free_port}", max_retries=2, sleep=lambda s: None)
    with pytest.raises(MetastoreError, match=rf"127.0.0.1:{free_port} did not answer.*3 attempt"):
        ms.list_databases()


def test_an_unreachable_uri_logs_none_of_the_thrift_librarys_lines(free_port, caplog):
    """The Thrift library printed `Could not connect to any of [...]` once per attempt
    before our one-line error, which keeps what it said."""
    ms = ThriftMetastore(f"thrift://127.0.0.1:{free_port}", max_retries=1, sleep=lambda s: None)
    with caplog.at_level(logging.DEBUG, logger="thrift"):
        with pytest.raises(MetastoreError, match=r"did not answer \(Could not connect to any of"):
            ms.list_databases()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("thrift")] == []


def test_the_cli_says_an_unreachable_metastore_in_one_line(free_port):
    """The same, as a user sees it: stderr holds our lines only (the retry's warning, then
    the error), none of the library's."""
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "raptorx_py.cli",
            "table",
            "list",
            "-p",
            f"hive.metastore.uri=thrift://127.0.0.1:{free_port}",
            "-p",
            "hive.metastore.thrift.client.max-retries=1",
            "-p",
            "hive.metastore.thrift.client.min-backoff-delay=0s",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    *retries, error = done.stderr.splitlines()
    assert error.startswith("raptorx: error: the Hive Metastore "), done.stderr
    assert "Could not connect to any of" in error  # the library's words, in ours
    assert "2 attempt(s)" in error
    assert len(retries) == 1 and retries[0].startswith("metastore call "), done.stderr


def test_tables_partitions_and_statistics_round_trip(ms, tmp_path):
    db = unique_db()
    ms.create_database(db, f"file://{tmp_path}")
    spec = external(db, "t", tmp_path)
    table = ms.create_table(spec, partitions(spec, 3))
    assert table.table_type == EXTERNAL_TABLE and table.partition_keys == KEYS
    assert table.columns == COLUMNS and table.location == f"file://{tmp_path}/t"
    got = ms.list_partitions(table)
    assert [p.values for p in got] == [("0",), ("1",), ("2",)]
    assert got[1].location == f"file://{tmp_path}/t/k=1"
    assert got[1].row_count == 3
    assert got[1].stats["id"] == ColumnStats(0, 10, 12)
    assert got[1].stats["price"] == ColumnStats(1, Decimal("1.50"), Decimal("99.25"))
    assert got[1].stats["day"] == ColumnStats(0, date(2024, 1, 1), date(2024, 1, 31))


def test_unpartitioned_table_statistics_and_parameters(ms, tmp_path):
    db = unique_db()
    ms.create_database(db)
    stats = {"id": ColumnStats(2, -5, 500)}
    t = Table(db, "u", EXTERNAL_TABLE, f"file://{tmp_path}/u", COLUMNS, (), {"a": "1"}, stats)
    created = ms.create_table(t)
    assert created.stats["id"] == ColumnStats(2, -5, 500)
    altered = ms.alter_table_parameters(db, "u", {"a": None, "b": "2"})
    assert altered.parameters.get("b") == "2" and "a" not in altered.parameters


def test_missing_objects_name_what_exists(ms):
    db = unique_db()
    ms.create_database(db)
    with pytest.raises(NoSuchObjectError, match=rf"table '{db}.nope' does not exist"):
        ms.get_table(db, "nope")
    with pytest.raises(NoSuchObjectError, match=r"database 'nodb_x' does not exist.*default"):
        ms.get_table("nodb_x", "t")


def test_many_partitions_are_read_in_batches_not_one_call_each(hms_uri, tmp_path):
    """250 partitions, batches of 100: names (1) + 3 batches x (partitions, statistics)."""
    with open_catalog(
        settings_for(
            hms_uri, **{"hive.metastore.partition-batch-size.max": "100"}
        ).metastore_connection
    ) as ms:
        db = unique_db()
        ms.create_database(db)
        table = ms.create_table(external(db, "big", tmp_path))
        # Without statistics: Derby takes ~0.2 s per partition's statistics.
        ms.add_partitions(
            table, [Partition((str(k),), f"{table.location}/k={k}") for k in range(250)]
        )
        with CounterDeltas() as c:
            got = ms.list_partitions(table)
        assert len(got) == 250 and c[TRIPS] == 1 + 3 * 2
        assert [p.values for p in got[:2]] == [("0",), ("1",)]


def test_managed_writes_are_refused_before_anything_is_written(ms, tmp_path):
    db = unique_db()
    ms.create_database(db)
    with pytest.raises(
        MetastoreError, match=r"managed table .*\.m needs write ids.*nothing was written"
    ):
        ms.create_table(Table(db, "m", MANAGED_TABLE, f"file://{tmp_path}/m", COLUMNS))
    assert ms.list_tables(db) == []
    with pytest.raises(MetastoreError, match="Hive 2.3's API.*nothing was written"):
        ms.open_transaction()


def test_the_listener_fills_hms_notification_log(ms, tmp_path):
    db = unique_db()
    before = ms.current_notification_id()
    ms.create_database(db)
    table = ms.create_table(external(db, "t", tmp_path))
    ms.add_partitions(table, partitions(table, 2))
    events = ms.notifications_after(before)
    assert [(e.event_type, e.db_name, e.table_name) for e in events] == [
        ("CREATE_DATABASE", db, None),
        ("CREATE_TABLE", db, "t"),
        ("ADD_PARTITION", db, "t"),
    ]
    assert [e.event_id for e in events] == list(range(before + 1, before + 4))
    assert ms.current_notification_id() == before + 3


def test_cache_warm_query_makes_only_the_notification_poll(hms_uri, tmp_path):
    """Cold: the poll, the table snapshot, the table (+ statistics), the partitions. Warm:
    the poll only. Another client's new partition: the next query's poll sees its event."""
    settings = settings_for(hms_uri)
    writer = open_catalog(settings.metastore_connection)
    db = unique_db()
    writer.create_database(db)
    spec = external(db, "t", tmp_path)
    table = writer.create_table(spec, partitions(spec, 2))
    name = table.qualified_name
    with CachedMetastore(
        open_catalog(settings.metastore_connection), settings.metastore_cache, owns_metastore=True
    ) as cache:

        def query() -> list[Partition]:
            snap = cache.snapshot([name])
            t = cache.get_table(db, "t", snapshot=snap)
            return cache.list_partitions(t, snapshot=snap)

        with CounterDeltas() as cold:
            assert len(query()) == 2
        assert cold[TRIPS] == 1 + 1 + 1 + 1 + 2  # poll, snapshot, table, names, batch
        with CounterDeltas() as warm:
            assert len(query()) == 2
        assert warm[TRIPS] == 1 and warm["metastore_cache.partition_hits"] == 1
        writer.add_partitions(table, partitions(table, 1, start=7))
        seen = cache.last_event_id
        with CounterDeltas() as after:
            assert [p.values for p in query()][-1] == ("7",)
        assert after["metastore_cache.events_applied"] == 1
        assert cache.last_event_id == seen + 1
        assert after["metastore_cache.partition_misses"] == 1
    writer.close()


def test_cli_registers_lists_and_shows_through_the_hive_metastore(hms_uri, tmp_path, capsys):
    from raptorx_py.cli import main

    root = tmp_path / "sales"
    for m, ids in (("2024-01", [1, 2]), ("2024-02", [3])):
        (root / f"m={m}").mkdir(parents=True)
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64())}), root / f"m={m}" / "part-0.parquet"
        )
    db = unique_db()
    args = ["-p", f"hive.metastore.uri={hms_uri}", "-p", "hive.metastore-timeout=120s"]
    assert main(["table", "register", f"{db}.sales", f"file://{root}", *args]) == 0
    assert "2 partitions" in capsys.readouterr().out
    assert main(["table", "list", db, *args]) == 0
    assert capsys.readouterr().out.split() == [f"{db}.sales"]
    assert main(["table", "show", f"{db}.sales", "--partitions", *args]) == 0
    out = capsys.readouterr().out
    assert "m string (partition key)" in out and "2 partitions, 3 rows" in out
    # What needs transactions or locks says so instead of using hive.metastore.url.
    assert main(["table", "clean", f"{db}.sales", *args]) == 2
    err = capsys.readouterr().err
    assert "Hive Metastore over Thrift" in err and "nothing was written" in err


PARQUET_CLASSES = hive_classes("PARQUET")


def test_tables_tiered_hive_cannot_read_are_refused_naming_why(ms):
    """A text table, and a Spark data source table stored in Spark's own form (a placeholder
    Hive column, the schema in table properties): refused when read, saying why."""
    from thrift_files.libraries.thrift_hive_metastore_client import ttypes as t

    db = unique_db()
    ms.create_database(db)

    def raw_table(
        name, cols, input_format, params, serde=None, output_format=None, buckets=(), kind=None
    ):
        sd = t.StorageDescriptor(
            cols=[t.FieldSchema(n, ty, None) for n, ty in cols],
            location=f"file:///tmp/{db}/{name}",
            inputFormat=input_format,
            outputFormat=output_format
            or "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            numBuckets=len(buckets) or -1,
            bucketCols=list(buckets),
            serdeInfo=t.SerDeInfo(
                serializationLib=serde or "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                parameters={},
            ),
            parameters={},
        )
        return t.Table(
            tableName=name,
            dbName=db,
            sd=sd,
            partitionKeys=[],
            parameters=params,
            tableType=kind or "EXTERNAL_TABLE",
        )

    ms.backend.call(
        "create_table",
        raw_table("txt", [("a", "int")], "org.apache.hadoop.mapred.TextInputFormat", {}),
    )
    with pytest.raises(
        MetastoreError,
        match=rf"{db}.txt .* stored as .*TextInputFormat: tiered_hive reads "
        "PARQUET and ORC tables only",
    ):
        ms.get_table(db, "txt")
    ms.backend.call(
        "create_table",
        raw_table(
            "sparkonly",
            [("col", "array<string>")],
            "org.apache.hadoop.mapred.SequenceFileInputFormat",
            {"spark.sql.sources.provider": "parquet"},
        ),
    )
    with pytest.raises(MetastoreError, match=rf"{db}.sparkonly .*in a form only Spark reads"):
        ms.get_table(db, "sparkonly")
    # An ORC table as Hive creates it is read as ORC; a full-ACID one is refused, saying so.
    orc_input = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
    orc_serde = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
    orc_output = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
    ms.backend.call(
        "create_table", raw_table("o", [("a", "int")], orc_input, {}, orc_serde, orc_output)
    )
    assert ms.get_table(db, "o").storage_format == "ORC"
    # A partition whose storage descriptor names another format than its table's keeps it;
    # one in a format tiered_hive does not read is refused, naming it.
    parted = raw_table("op", [("a", "int")], orc_input, {}, orc_serde, orc_output)
    parted.partitionKeys = [t.FieldSchema("k", "string", None)]
    ms.backend.call("create_table", parted)
    part_sd = raw_table("x", [("a", "int")], PARQUET_CLASSES.input_format, {}).sd
    part_sd.serdeInfo.serializationLib = PARQUET_CLASSES.serde
    ms.backend.call(
        "add_partition", t.Partition(values=["1"], dbName=db, tableName="op", sd=part_sd)
    )
    text_sd = raw_table("y", [("a", "int")], "org.apache.hadoop.mapred.TextInputFormat", {}).sd
    ms.backend.call(
        "add_partition", t.Partition(values=["2"], dbName=db, tableName="op", sd=text_sd)
    )
    op = ms.get_table(db, "op")
    got = ms.get_partitions_by_names(op, ["k=1"])
    assert [(p.values, p.storage_format) for p in got] == [(("1",), "PARQUET")]
    with pytest.raises(MetastoreError, match="partition k=2 of .*op .* stored as .*TextInput"):
        ms.list_partitions(op)
    # (Hive 2.3 takes a full-ACID table only bucketed and stored as ORC.)
    acid = {"transactional": "true"}
    ms.backend.call(
        "create_table",
        raw_table(
            "acid", [("a", "int")], orc_input, acid, orc_serde, orc_output, ["a"], "MANAGED_TABLE"
        ),
    )
    with pytest.raises(MetastoreError, match=rf"{db}.acid .* is transactional \(ACID\)"):
        ms.get_table(db, "acid")


def test_partitions_by_filter_are_hms_selection_then_batches_by_name(hms_uri, tmp_path):
    """HMS's filter language picks the partitions (one call), then they are read by name."""
    with open_catalog(
        settings_for(
            hms_uri, **{"hive.metastore.partition-batch-size.max": "2"}
        ).metastore_connection
    ) as ms:
        db = unique_db()
        ms.create_database(db)
        table = ms.create_table(
            external(db, "f", tmp_path, keys=(Column("ds", "string"),)),
        )
        ms.add_partitions(
            table,
            [
                Partition((f"2024-01-0{d}",), f"{table.location}/ds=2024-01-0{d}")
                for d in range(1, 8)
            ],
        )
        with CounterDeltas() as c:
            got = ms.get_partitions_by_filter(table, 'ds >= "2024-01-05"')
        assert [p.values for p in got] == [("2024-01-05",), ("2024-01-06",), ("2024-01-07",)]
        assert c[TRIPS] == 1 + 2 * 2  # the filter, then 2 batches x (partitions, statistics)


def test_a_server_without_listener_is_said_once_and_falls_back_to_the_ttl(
    hms_server_without_listener, tmp_path, caplog
):
    """Last in the module: the second server, launched by its first test
    (``pytestmark``), starts while the others run."""
    uri = hms_server_without_listener.uri
    settings = settings_for(uri)
    with open_catalog(settings.metastore_connection) as writer:
        db = unique_db()
        writer.create_database(db)
        writer.create_table(external(db, "t", tmp_path))
        assert writer.current_notification_id() == 0
    with caplog.at_level(logging.WARNING, logger="raptorx_py.metastore.cached_store"):
        with CounterDeltas() as c:
            cache = CachedMetastore(
                open_catalog(settings.metastore_connection),
                settings.metastore_cache,
                owns_metastore=True,
            )
            cache.close()
    assert not cache.log_filled and c["metastore_cache.empty_notification_log"] == 1
    warnings = [r.getMessage() for r in caplog.records if "notification log" in r.getMessage()]
    assert len(warnings) == 1 and "hive.metastore-cache-ttl" in warnings[0]
