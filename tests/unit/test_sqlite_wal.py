"""Many processes opening one fresh SQLite file at the same moment, as the Python workers of
a Spark application do with the block-cache index, the metrics file and the metastore.

Without the set-up lock about one opening in twenty failed at once with "database is
locked" (the block cache then disabled itself for the whole task), so 4 processes x 40
rounds (``make stress``) expect several failures from an unlocked set-up and must see none;
the default suite runs 12 rounds of each (48 openings: an unlocked set-up fails at least one
with probability 1 - 0.95**48, about 0.9)."""

import multiprocessing
import os
import sqlite3

import pytest

from raptorx_py.cache.block_store import BlockStore
from raptorx_py.metastore.store import Metastore, SqliteBackend
from raptorx_py.metrics import MetricsSink
from raptorx_py.sqlite_wal import LOCK_SUFFIX, connect_wal, is_damage
from tests.unit.test_cache_healing import scribble_schema

PROCESSES = 4
ROUNDS = 12
STRESS_ROUNDS = 40
#: Each race test takes the number of rounds as its parameter: ROUNDS, and STRESS_ROUNDS
#: under ``-m stress``.
rounds_param = pytest.mark.parametrize(
    "rounds", [ROUNDS, pytest.param(STRESS_ROUNDS, marks=pytest.mark.stress)]
)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY); INSERT OR IGNORE INTO t VALUES (1);"
)


def _open_wal(path, start, results):
    start.wait()
    try:
        conn = connect_wal(path, timeout=5, schema=_SCHEMA)
        results.put(conn.execute("SELECT count(*) FROM t").fetchone()[0])
        conn.close()
    except Exception as e:  # reported to the parent, which names it
        results.put(f"{type(e).__name__}: {e}")


def _open_block_store(path, start, results):
    start.wait()
    results.put(BlockStore(path, max_size=1 << 20).enabled)


def _write_metrics(path, start, results):
    start.wait()
    try:
        MetricsSink(path).write({"opened": 1})
        results.put(True)
    except Exception as e:
        results.put(f"{type(e).__name__}: {e}")


def _open_metastore(path, start, results):
    start.wait()
    try:
        store = Metastore(SqliteBackend(path))
        results.put(store.list_databases())
    except Exception as e:
        results.put(f"{type(e).__name__}: {e}")


def _race(target, make_path, rounds):
    ctx = multiprocessing.get_context("fork")
    outcomes = []
    for round_ in range(rounds):
        path = make_path(round_)
        start, results = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=target, args=(path, start, results)) for _ in range(PROCESSES)]
        for p in procs:
            p.start()
        start.set()
        outcomes += [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
    return outcomes


@rounds_param
def test_concurrent_first_opens_all_succeed(tmp_path, rounds):
    outcomes = _race(_open_wal, lambda r: str(tmp_path / f"db{r}.sqlite"), rounds)
    assert outcomes == [1] * (PROCESSES * rounds)
    assert os.path.exists(str(tmp_path / "db0.sqlite") + LOCK_SUFFIX)


@rounds_param
def test_concurrent_block_stores_on_a_fresh_directory_all_enable(tmp_path, rounds):
    outcomes = _race(_open_block_store, lambda r: str(tmp_path / f"cache{r}"), rounds)
    assert outcomes == [True] * (PROCESSES * rounds)


@rounds_param
def test_concurrent_metric_writers_on_a_fresh_file_lose_nothing(tmp_path, rounds):
    outcomes = _race(_write_metrics, lambda r: str(tmp_path / f"metrics{r}"), rounds)
    assert outcomes == [True] * (PROCESSES * rounds)
    assert MetricsSink(str(tmp_path / "metrics0")).totals() == {"opened": PROCESSES}


@rounds_param
def test_concurrent_metastores_on_a_fresh_file_all_open(tmp_path, rounds):
    outcomes = _race(_open_metastore, lambda r: str(tmp_path / f"ms{r}" / "metastore.db"), rounds)
    assert outcomes == [[]] * (PROCESSES * rounds)  # opened, schema built, no error


def test_a_directory_that_cannot_hold_the_lock_file_lets_sqlite_name_the_problem(tmp_path):
    # No lock file can be made in a missing directory; SQLite's own error is what the user
    # sees, not one about a side file they never asked for.
    with pytest.raises(sqlite3.OperationalError, match="unable to open database file"):
        connect_wal(str(tmp_path / "missing" / "x.sqlite"), timeout=1)


def test_undecodable_schema_damage_is_a_database_error(tmp_path):
    path = str(tmp_path / "a.db")
    connect_wal(path, timeout=5, schema=_SCHEMA).close()
    scribble_schema(path, "t")
    with pytest.raises(UnicodeDecodeError):  # what plain sqlite3 raises
        sqlite3.connect(path).execute("SELECT 1 FROM t")
    with pytest.raises(sqlite3.DatabaseError) as raised:
        connect_wal(path, timeout=5, schema=_SCHEMA)
    assert is_damage(raised.value)
