"""Opening the metastore: a transaction's timeout is its own; an
open never takes the write lock; a reader never creates a metastore."""

from __future__ import annotations

import os
import sqlite3

import pytest

from raptorx_py.cli import main
from raptorx_py.config import load_settings
from raptorx_py.errors import MetastoreError, MetastoreNotFoundError
from raptorx_py.metastore import open_metastore
from raptorx_py.metastore.cached_store import cached_metastore_for, close_cached_metastores
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.metastore.transactions import TxnAbortedError
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock
from tests.unit.txn_helpers import managed_table, open_ms


# -- the timeout belongs to the transaction ---------------------------------------------------
def test_a_short_timeout_client_never_expires_another_clients_live_transaction(metastore_url):
    clock = FakeClock()
    with (
        open_ms(metastore_url, clock=clock, txn_timeout=300) as writer,
        open_ms(metastore_url, clock=clock, txn_timeout=2) as cleaner,
    ):
        writer.create_database("db")
        writer.create_table(managed_table())
        live = writer.open_transaction()
        writer.allocate_write_id(live, "db", "t")
        short = cleaner.open_transaction()
        for _ in range(5):  # the writer heartbeats every 100 s, well within its own 300 s
            clock.advance(100)
            assert cleaner.expire_timed_out() == ([short] if _ == 0 else [])
            writer.heartbeat(txn_id=live)
        assert writer.get_transaction(live).state == "open"
        assert writer.get_transaction(live).timeout_ms == 300_000
        assert writer.get_transaction(short).timeout_ms == 2_000
        clock.advance(301)  # now it did stop heartbeating for longer than its own timeout
        assert cleaner.expire_timed_out() == [live]
        with pytest.raises(TxnAbortedError) as e:
            writer.heartbeat(txn_id=live)
    message = str(e.value)
    assert f"transaction {live} is aborted (expired by " in message
    assert "no heartbeat for 301s, more than its own timeout of 300s" in message
    assert message.endswith("cannot heartbeat")


# -- opening reads without the write lock -----------------------------------------------------
@pytest.fixture
def held_write_lock(tmp_path):
    """A metastore with a table, and another connection holding its write transaction."""
    path = f"{tmp_path}/ms.db"
    with Metastore(SqliteBackend(path)) as ms:
        ms.create_database("db")
        ms.create_table(managed_table())
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE DBS SET DB_DESC = 'held' WHERE NAME = 'db'")
    yield path
    other.execute("ROLLBACK")
    other.close()


def test_open_and_read_succeed_while_another_connection_holds_the_write_lock(held_write_lock):
    trips = CounterDeltas()
    ms = Metastore(SqliteBackend(held_write_lock, create=False, busy_timeout=0.05))
    # The open is one SELECT of the schema version (no BEGIN, no DDL).
    assert trips["metastore.round_trips"] == 1
    with ms:
        assert ms.get_table("db", "t").name == "t"
        assert ms.get_valid_write_ids(["db.t"])["db.t"].high_watermark == 0


def test_a_write_that_waits_says_what_for(held_write_lock):
    with Metastore(SqliteBackend(held_write_lock, busy_timeout=0.05)) as ms:
        with pytest.raises(
            MetastoreError,
            match=r"waiting 0\.05s for the write lock of the "
            r"SQLite metastore .*ms\.db: another connection",
        ):
            ms.open_transaction()


def test_cli_show_while_a_writer_holds_the_database(held_write_lock, capsys):
    assert (
        main(["table", "show", "db.t", "-p", f"hive.metastore.url=sqlite:///{held_write_lock}"])
        == 0
    )
    assert "db.t" in capsys.readouterr().out


# -- a reader never creates a metastore -------------------------------------------------------
def test_a_typo_in_the_metastore_path_fails_naming_it_and_creates_nothing(tmp_path, capsys):
    typo = tmp_path / "metastor.db"
    settings = load_settings(
        overrides={"hive.metastore.url": f"sqlite:///{typo}"}, env={}, cwd=tmp_path
    )
    with pytest.raises(MetastoreNotFoundError, match=f"no SQLite metastore at {typo}"):
        open_metastore(settings.metastore_connection)
    try:
        with pytest.raises(MetastoreNotFoundError, match=str(typo)):
            # What a Spark read plans through:
            cached_metastore_for(settings.metastore_cache, start=False)
    finally:
        close_cached_metastores()
    for command in (["table", "list"], ["table", "show", "db.t"], ["locks", "show"]):
        assert main([*command, "-p", f"hive.metastore.url=sqlite:///{typo}"]) == 2
        assert f"no SQLite metastore at {typo}" in capsys.readouterr().err
    assert not typo.exists() and not os.path.exists(f"{typo}-wal")
    with open_metastore(settings.metastore_connection, create=True):  # a creating command may
        pass
    assert typo.exists()
