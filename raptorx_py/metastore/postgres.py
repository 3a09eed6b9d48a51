"""The PostgreSQL metastore backend: ``postgresql://user:password@host:port/dbname``.

The Metastore's queries are written once, with SQLite's ``?`` placeholders; this backend hands
the Metastore a connection with the same small surface as ``sqlite3.Connection`` (``execute``,
``executemany``, ``close``; cursors with ``fetchone`` and iteration) and translates each SQL
string to psycopg's ``%s`` once (cached).

Write serialisation. The Metastore's write transactions read, then write (does the table
exist? then insert it). SQLite makes that safe with ``BEGIN IMMEDIATE``: one writer at a time.
Here every write transaction starts with ``pg_advisory_xact_lock(WRITE_LOCK_KEY)`` in the same
round trip as its ``BEGIN``, which gives exactly that guarantee: writers queue on the lock,
and because the isolation level is READ COMMITTED, each statement after the lock sees every
write committed before it, so the reads inside a write transaction are never stale. The lock
is released by COMMIT or ROLLBACK (and by the server if the connection dies). Readers do not
take it: they run in autocommit and see committed data only, like SQLite's WAL readers.
SERIALIZABLE with a retry loop was the alternative; it was rejected because a retry would
have to replay the Metastore's Python code between statements, which this backend cannot do,
and because the schema creation (``CREATE TABLE IF NOT EXISTS`` from two fresh processes)
races in PostgreSQL's catalogues under any isolation level, while the lock serialises it.
Advisory locks are per database, so metastores in different databases do not contend. Writers
that bypass this class (a psql session) are not serialised; the UNIQUE constraints still hold.

A lock (or any other) wait is bounded by ``lock_timeout`` (60 s, like the SQLite backend's busy
timeout); hitting it is a ``MetastoreError`` naming the database.

Limits: no connection pooling or reconnection (one connection per Metastore, like SQLite);
the password may also come from libpq's usual places (``PGPASSWORD``, ``~/.pgpass``) when the
URL has none; other libpq options can be given as URL query parameters (``?sslmode=require``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from raptorx_py.config.loader import mask_url_password
from raptorx_py.errors import MetastoreError

if TYPE_CHECKING:
    import psycopg

#: The advisory lock every metastore write transaction holds: an arbitrary constant (a bigint;
#: ``pg_locks`` shows it as classid = high 32 bits, objid = low 32 bits).
WRITE_LOCK_KEY = int.from_bytes(b"RAPTORX", "big")
LOCK_TIMEOUT_MS = 60_000
CONNECT_TIMEOUT_S = 10
SCHEMES = ("postgresql", "postgres")

# Single-quoted strings ('' escapes a quote), double-quoted identifiers, comments, then the
# characters that need a decision. Anything else is copied through.
_SQL_TOKENS = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|[?%$'"\\]""", re.S)


def _psycopg() -> ModuleType:
    """The PostgreSQL driver, imported on first use: loading it takes about a second, which
    a SQLite metastore's users (and ``import raptorx_py.metastore``) never pay."""
    import psycopg

    return psycopg


@lru_cache(maxsize=1024)
def translate_placeholders(sql: str) -> str:
    """``sql`` with each ``?`` placeholder turned into psycopg's ``%s``.

    Refuses (``MetastoreError``) what it cannot translate with certainty rather than guess:
    a ``%`` anywhere (psycopg reads it as a placeholder even inside quotes), a ``$`` (dollar
    quoting or a native ``$1`` parameter), an unterminated quote, and a ``?`` or backslash
    inside a string, identifier or comment (the backslash because an ``E'\\''`` string
    would fool the scan).
    """
    out, pos = [], 0
    for m in _SQL_TOKENS.finditer(sql):
        token = m.group()
        if token == "?":
            replacement = "%s"
        elif token in ("%", "$", "\\"):
            raise MetastoreError(
                f"cannot translate SQL for PostgreSQL: '{token}' at offset {m.start()} of: {sql}"
            )
        elif token in ("'", '"'):
            raise MetastoreError(
                f"cannot translate SQL for PostgreSQL: unterminated {token} "
                f"at offset {m.start()} of: {sql}"
            )
        elif any(c in token for c in "?%\\"):
            raise MetastoreError(
                f"cannot translate SQL for PostgreSQL: '?', '%' or '\\' "
                f"inside the quoted text or comment {token} of: {sql}"
            )
        else:
            continue  # a quoted string, identifier or comment without surprises: kept as is
        out.append(sql[pos : m.start()])
        out.append(replacement)
        pos = m.end()
    out.append(sql[pos:])
    return "".join(out)


class PostgresConnection:
    """A psycopg connection in autocommit mode with ``sqlite3.Connection``'s calling
    convention (``?`` placeholders). The Metastore's explicit BEGIN/COMMIT/ROLLBACK are the
    only transactions."""

    def __init__(self, conn: psycopg.Connection):
        self._conn = conn

    def execute(self, sql: str, params: Sequence = ()) -> psycopg.Cursor:
        # No parameters: psycopg sends the text as is, which also lets ``begin_write`` be two
        # statements in one round trip.
        try:
            return self._conn.execute(translate_placeholders(sql), tuple(params) or None)
        except _psycopg().Error as e:
            self._end_failed_begin(sql, e)
            raise

    def _end_failed_begin(self, sql: str, error: psycopg.Error) -> None:
        """If a statement that opens a transaction failed after its BEGIN (the write lock timed
        out), roll back: the caller never saw the transaction start, so it will not (SQLite's
        BEGIN IMMEDIATE, when busy, starts no transaction either)."""
        if not sql.lstrip().upper().startswith("BEGIN"):
            return
        if self._conn.info.transaction_status != _psycopg().pq.TransactionStatus.INERROR:
            return
        try:
            self._conn.execute("ROLLBACK")
        except _psycopg().Error as rollback_error:
            error.add_note(f"the rollback after it failed too: {rollback_error}")

    def executemany(self, sql: str, rows: Iterable[Sequence]) -> psycopg.Cursor:
        cur = self._conn.cursor()
        cur.executemany(translate_placeholders(sql), [tuple(r) for r in rows])
        return cur

    def close(self) -> None:
        self._conn.close()


class PostgresBackend:
    """A PostgreSQL database named by ``postgresql://[user[:password]@]host[:port]/dbname``
    (``postgres://`` too). See the module docstring for how writers are serialised."""

    id_type = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
    #: BEGIN, then queue behind any other metastore writer (one round trip, two statements).
    begin_write = f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})"
    #: What psycopg raises (every class derives from it); the store turns it into MetastoreError.
    error_types: tuple[type[BaseException], ...]

    def __init__(
        self,
        host: str,
        port: int,
        dbname: str,
        user: str | None = None,
        password: str | None = None,
        options: dict[str, str] | None = None,
    ):
        self.error_types = (_psycopg().Error,)
        self.host, self.port, self.dbname = host, port, dbname
        self.user, self.password = user, password
        self.options = dict(options or {})

    @classmethod
    def from_url(cls, url: str) -> PostgresBackend:
        def bad(why: str) -> MetastoreError:
            return MetastoreError(
                f"bad PostgreSQL metastore URL '{_mask_url(url)}': {why}; "
                f"expected postgresql://user:password@host:port/dbname"
            )

        parts = urlsplit(url)
        if parts.scheme not in SCHEMES:
            raise bad(f"scheme '{parts.scheme}' is not one of {', '.join(SCHEMES)}")
        if parts.fragment:
            raise bad("a '#' fragment means nothing here (percent-encode a '#' in a password)")
        if not parts.hostname:
            raise bad("no host")
        try:
            port = 5432 if parts.port is None else parts.port
        except ValueError as e:
            raise bad(f"the port is not a number from 1 to 65535 ({e})") from e
        if port == 0:
            raise bad("port 0 is not a port a server listens on")
        dbname = unquote(parts.path.lstrip("/"))
        if not dbname or "/" in dbname:
            raise bad("the path must be exactly one database name")
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        if "password" in options:
            raise bad("put the password in the user:password@ part, not the query")
        clash = sorted(set(options) & {"host", "hostaddr", "port", "dbname", "user"})
        if clash:
            raise bad(f"{', '.join(clash)} must be given in the URL itself, not the query")
        return cls(
            parts.hostname,
            port,
            dbname,
            unquote(parts.username) if parts.username else None,
            unquote(parts.password) if parts.password is not None else None,
            options,
        )

    def describe(self) -> str:
        """The URL with the password masked: safe in messages and logs."""
        user = ""
        if self.user is not None:
            user = self.user + (":***" if self.password else "") + "@"
        query = "&".join(f"{k}={v}" for k, v in self.options.items())
        return f"postgresql://{user}{self.host}:{self.port}/{self.dbname}" + (
            f"?{query}" if query else ""
        )

    def connect(self) -> PostgresConnection:
        kwargs: dict[str, Any] = {
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": "raptorx_py",
            "options": f"-c lock_timeout={LOCK_TIMEOUT_MS}",
            **self.options,
        }
        try:
            conn = _psycopg().connect(
                host=self.host,
                port=self.port,
                dbname=self.dbname,
                user=self.user,
                password=self.password,
                autocommit=True,
                **kwargs,
            )
        except _psycopg().Error as e:
            reason = str(e)
            if self.password:  # libpq does not echo passwords; this is belt and braces
                reason = reason.replace(self.password, "***")
            as_user = f" as user '{self.user}'" if self.user else ""
            raise MetastoreError(
                f"cannot connect to the PostgreSQL metastore at "
                f"{self.host}:{self.port}/{self.dbname}{as_user}: "
                f"{reason}"
            ) from e
        return PostgresConnection(conn)


def _mask_url(url: str) -> str:
    """``url`` with any password replaced, for error messages about the URL itself."""
    return mask_url_password(url, hidden="***")
