"""The PostgreSQL metastore backend: URLs, placeholder translation, errors, and write
serialisation on the real server of ``tests/support/postgres_fixtures.py``. The Metastore's own
behaviour on PostgreSQL is covered by test_metastore.py, which runs on both backends."""

import threading
import time
from urllib.parse import quote

import psycopg
import pytest

from raptorx_py.errors import MetastoreError
from raptorx_py.hive.model import EXTERNAL_TABLE, Column, Table
from raptorx_py.metastore import Metastore
from raptorx_py.metastore.postgres import (
    WRITE_LOCK_KEY,
    PostgresBackend,
    PostgresConnection,
    translate_placeholders,
)
from raptorx_py.metastore.store import backend_for_url
from tests.support.postgres_fixtures import PASSWORD, find_bindir

# -- URLs ------------------------------------------------------------------------------


def test_url_fields_are_parsed_and_percent_decoded():
    b = backend_for_url(
        "postgresql://meta%40user:pa%3Ass%2Fw@db.example:6543/hive_ms?sslmode=require"
    )
    assert isinstance(b, PostgresBackend)
    assert (b.host, b.port, b.dbname, b.user, b.password) == (
        "db.example",
        6543,
        "hive_ms",
        "meta@user",
        "pa:ss/w",
    )
    assert b.options == {"sslmode": "require"}


def test_postgres_scheme_and_default_port_are_accepted():
    b = backend_for_url("postgres://u@h/d")
    assert (b.host, b.port, b.dbname, b.user, b.password) == ("h", 5432, "d", "u", None)


def test_describe_masks_the_password():
    b = backend_for_url("postgresql://u:topsecret@h:5433/d")
    assert b.describe() == "postgresql://u:***@h:5433/d"
    assert "topsecret" not in b.describe()


@pytest.mark.parametrize(
    "url, why",
    [
        ("postgresql://u:topsecret@/d", "no host"),
        ("postgresql://u:topsecret@h:5432", "exactly one database name"),
        ("postgresql://u:topsecret@h:5432/", "exactly one database name"),
        ("postgresql://u:topsecret@h:5432/a/b", "exactly one database name"),
        ("postgresql://u:topsecret@h:port/d", "port is not a number"),
        ("postgresql://u:topsecret@h:99999/d", "port is not a number"),
        ("postgresql://u:topsecret@h:0/d", "port 0"),
        ("postgresql://u@h/d?password=topsecret", "password in the user:password@ part"),
        ("postgresql://u:topsecret@h/d?host=other", "host must be given in the URL itself"),
        ("postgresql://u:top#secret@h/d", "fragment"),
    ],
)
def test_bad_urls_say_what_is_wrong_without_the_password(url, why):
    with pytest.raises(MetastoreError, match="bad PostgreSQL metastore URL") as info:
        backend_for_url(url)
    message = str(info.value)
    assert why in message
    assert "expected postgresql://user:password@host:port/dbname" in message
    assert "secret" not in message.replace("password", "")


def test_unencoded_at_in_password_is_masked_whole():
    with pytest.raises(MetastoreError) as info:
        backend_for_url("postgresql://u:to@psecret@h:0/d")
    assert "psecret" not in str(info.value) and "to@" not in str(info.value)


# -- placeholders ----------------------------------------------------------------------


def test_placeholders_become_psycopg_ones_and_quoted_text_is_kept():
    assert translate_placeholders(
        "SELECT a FROM t WHERE x = ? AND y = 'it''s' AND \"Col\" = ? -- done"
    ) == ("SELECT a FROM t WHERE x = %s AND y = 'it''s' AND \"Col\" = %s -- done")


def test_translation_is_cached_per_sql_string():
    sql = "SELECT 1 WHERE ? = ? -- cache probe"
    translate_placeholders(sql)
    hits = translate_placeholders.cache_info().hits
    assert translate_placeholders(sql) == "SELECT 1 WHERE %s = %s -- cache probe"
    assert translate_placeholders.cache_info().hits == hits + 1


@pytest.mark.parametrize(
    "sql, why",
    [
        ("SELECT '?' WHERE a = ?", "inside the quoted text"),
        ('SELECT "a?" FROM t', "inside the quoted text"),
        ("SELECT a FROM t -- why?\nWHERE b = ?", "inside the quoted text or comment"),
        ("SELECT a FROM t /* ? */", "inside the quoted text or comment"),
        ("SELECT a FROM t WHERE b LIKE 'x%'", "inside the quoted text"),
        ("SELECT a % 2 FROM t", "'%'"),
        ("SELECT $1", "'$'"),
        ("SELECT $$?$$", "'$'"),
        ("SELECT E'\\'?' FROM t", "'\\'"),
        ("SELECT 'open FROM t WHERE a = ?", "unterminated '"),
    ],
)
def test_sql_that_cannot_be_translated_safely_is_refused(sql, why):
    with pytest.raises(MetastoreError, match="cannot translate SQL for PostgreSQL") as info:
        translate_placeholders(sql)
    assert why in str(info.value)


# -- connecting ------------------------------------------------------------------------


def test_connection_refused_names_host_port_and_database_not_password(free_port):
    backend = PostgresBackend.from_url(f"postgresql://u:topsecret@127.0.0.1:{free_port}/meta")
    with pytest.raises(
        MetastoreError,
        match=rf"cannot connect to the PostgreSQL metastore at "
        rf"127\.0\.0\.1:{free_port}/meta as user 'u'",
    ) as e:
        backend.connect()
    assert "topsecret" not in str(e.value)
    assert isinstance(e.value.__cause__, psycopg.OperationalError)


def test_wrong_password_is_a_clear_error_without_the_password(postgres_server):
    wrong = "not-" + PASSWORD
    with pytest.raises(MetastoreError, match="password authentication failed") as e:
        Metastore(backend_for_url(postgres_server.url("postgres", password=wrong)))
    assert wrong not in str(e.value) and quote(wrong, safe="") not in str(e.value)


def test_the_suite_really_runs_on_a_postgresql_server(postgres_database_url):
    with Metastore(backend_for_url(postgres_database_url)) as ms:
        assert isinstance(ms.sql._conn, PostgresConnection)
        assert "PostgreSQL" in ms.sql.execute("SELECT version()").fetchone()[0]
        # The schema landed in this database, through the translated, parameterised path.
        assert (
            ms.sql.execute(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = ?", ("tbls",)
            ).fetchone()[0]
            == 1
        )


def test_missing_server_binaries_say_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_config, no initdb
    with pytest.raises(FileNotFoundError, match="make postgres"):
        find_bindir(debian_bindirs=str(tmp_path / "none" / "*" / "bin"))


# -- write serialisation ---------------------------------------------------------------


def _table(name: str) -> Table:
    return Table(
        "shared", name, EXTERNAL_TABLE, f"file:///x/{name}", (Column("id", "bigint"),), (), {}
    )


def test_concurrent_writers_serialise_without_errors_or_duplicate_ids(postgres_database_url):
    """Two metastores race, round after round, to create the same database (read-then-insert)
    and their own tables; every write must succeed and every id be distinct."""
    rounds = 15
    metastores = [Metastore(backend_for_url(postgres_database_url)) for _ in range(2)]
    barrier = threading.Barrier(2, timeout=60)
    results: dict[int, list] = {0: [], 1: []}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        ms = metastores[i]
        try:
            for r in range(rounds):
                barrier.wait()
                db = ms.create_database("shared" if r == 0 else f"db{r}", if_not_exists=True)
                table = ms.create_table(_table(f"t{i}_{r}")) if r == 0 else None
                results[i].append((db.id, table.id if table else None))
        except BaseException as e:  # reported by the assertion below, with its traceback
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        # Both saw the same database in every round: exactly one of them created it.
        assert [db for db, _ in results[0]] == [db for db, _ in results[1]]
        assert len({db for db, _ in results[0]}) == rounds
        table_ids = [results[i][0][1] for i in range(2)]
        assert len(set(table_ids)) == 2
        assert metastores[0].list_tables("shared") == ["t0_0", "t1_0"]
        assert len(metastores[0].list_databases()) == rounds
    finally:
        for ms in metastores:
            ms.close()


def _waiting_for_write_lock(conn: psycopg.Connection) -> int:
    # pg_locks shows a bigint advisory key as two 32-bit halves.
    return conn.execute(
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid = %s AND objid = %s",
        (WRITE_LOCK_KEY >> 32, WRITE_LOCK_KEY & 0xFFFFFFFF),
    ).fetchone()[0]


def test_a_writer_waits_for_the_write_lock(postgres_server, postgres_database_url):
    dbname = postgres_database_url.rsplit("/", 1)[1]
    ms = Metastore(backend_for_url(postgres_database_url))
    holder = psycopg.connect(postgres_server.dsn(dbname), autocommit=True)
    observer = psycopg.connect(postgres_server.dsn(dbname), autocommit=True)
    try:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        writer = threading.Thread(target=ms.create_database, args=("late",))
        writer.start()
        deadline = time.monotonic() + 30
        while _waiting_for_write_lock(observer) == 0:  # health-check poll, bounded
            assert time.monotonic() < deadline, "the writer never queued on the write lock"
            time.sleep(0.02)
        assert writer.is_alive()
        assert observer.execute("SELECT COUNT(*) FROM dbs WHERE name = 'late'").fetchone()[0] == 0
        holder.execute("COMMIT")
        writer.join(timeout=30)
        assert not writer.is_alive()
        assert "late" in ms.list_databases()
    finally:
        holder.close()
        observer.close()
        ms.close()


def test_lock_timeout_is_an_error_and_leaves_the_connection_usable(
    postgres_server, postgres_database_url
):
    impatient = postgres_database_url + "?options=" + quote("-c lock_timeout=1", safe="")
    dbname = postgres_database_url.rsplit("/", 1)[1]
    ms = Metastore(backend_for_url(impatient))
    holder = psycopg.connect(postgres_server.dsn(dbname), autocommit=True)
    try:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        with pytest.raises(MetastoreError, match="lock timeout") as e:
            ms.create_database("blocked")
        assert "***@" in str(e.value) and PASSWORD not in str(e.value)
        holder.execute("COMMIT")
        # The failed BEGIN was rolled back: the same connection writes and reads normally.
        ms.create_database("after")
        assert ms.list_databases() == ["after"]
    finally:
        holder.close()
        ms.close()
