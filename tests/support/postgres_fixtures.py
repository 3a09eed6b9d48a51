"""A real PostgreSQL server for the metastore tests, started once per test session.

``postgres_server`` runs Debian's (or any) PostgreSQL binaries on a free port of 127.0.0.1 in a
temporary data directory, with password authentication over TCP so the backend's URL handling
is exercised for real. ``postgres_database_url`` gives each test a fresh, empty database.

Missing binaries FAIL the tests that need them (with the install command), rather than
skipping: a skipped backend would silently halve the metastore coverage.

PostgreSQL refuses to run as root; when the tests run as root the server runs as the
``postgres`` system user (created by Debian's package), which owns the data directory.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from urllib.parse import quote

import pytest

from devservers.ports import free_port

SUPERUSER = "raptorx"
#: Deliberately contains URL-reserved characters: the backend must percent-decode it.
PASSWORD = "s3cret:p@ss/word"
START_DEADLINE_S = 60
_INSTALL_HINT = (
    "install them with `make postgres` (Debian/Ubuntu: apt-get install postgresql), "
    "or put a PostgreSQL bin directory with initdb, pg_ctl and postgres on PATH"
)


DEBIAN_BINDIRS = "/usr/lib/postgresql/*/bin"


def _version_of(bindir: str) -> int:
    version = os.path.basename(os.path.dirname(bindir))
    return int(version) if version.isdigit() else 0


def find_bindir(debian_bindirs: str = DEBIAN_BINDIRS) -> str:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``: ``pg_config --bindir``,
    then Debian's versioned directories (newest first), then PATH."""
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob(debian_bindirs), key=_version_of, reverse=True)
    if shutil.which("initdb"):
        candidates.append(os.path.dirname(shutil.which("initdb")))
    for d in candidates:
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return d
    raise FileNotFoundError(
        f"PostgreSQL server binaries not found (looked in "
        f"{', '.join(candidates) or f'pg_config, {debian_bindirs}, PATH'})"
        f"; {_INSTALL_HINT}"
    )


class PostgresServer:
    """One ``postgres`` process on 127.0.0.1:<port>, data in a temporary directory.

    ``url(dbname)`` makes a metastore URL; ``new_database()`` creates ``test_<n>`` and returns
    its URL. ``stop()`` kills the server (immediate mode: the data is thrown away) and removes
    the directory.
    """

    def __init__(self, bindir: str, *, clock=time.monotonic):
        self.bindir = bindir
        self.clock = clock
        self._names = itertools.count(1)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.run_as = self._server_user()
        self.datadir_root = tempfile.mkdtemp(prefix="raptorx-pg-")
        self.datadir = os.path.join(self.datadir_root, "data")
        self.logfile = os.path.join(self.datadir_root, "server.log")
        self.start_seconds: float | None = None

    @staticmethod
    def _server_user() -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError(
                "tests run as root and PostgreSQL refuses root, but there is no "
                f"'postgres' system user to run it as; {_INSTALL_HINT}"
            ) from None

    def _cmd(self, binary: str, *args: str) -> list[str]:
        cmd = [os.path.join(self.bindir, binary), *args]
        if not shutil.which("setpriv"):
            if self.run_as is not None:
                raise RuntimeError(
                    "running PostgreSQL as the 'postgres' user needs setpriv (util-linux)"
                )
            return cmd
        # setpriv execs in place (unlike runuser, which forks), so Popen's pid is the server's.
        # If pytest dies without tearing down, SIGQUIT (immediate shutdown) ends the server.
        wrapper = ["setpriv", "--pdeathsig", "QUIT"]
        if self.run_as is not None:
            wrapper += [
                f"--reuid={self.run_as.pw_uid}",
                f"--regid={self.run_as.pw_gid}",
                "--init-groups",
            ]
        return [*wrapper, *cmd]

    def _chown(self, path: str) -> None:
        if self.run_as is not None:
            os.chown(path, self.run_as.pw_uid, self.run_as.pw_gid)

    def start(self) -> None:
        began = self.clock()
        self._chown(self.datadir_root)
        pwfile = os.path.join(self.datadir_root, "pwfile")
        with open(pwfile, "w") as f:
            f.write(PASSWORD + "\n")
        self._chown(pwfile)
        out = subprocess.run(
            self._cmd(
                "initdb",
                "-D",
                self.datadir,
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile}",
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ),
            capture_output=True,
            text=True,
        )
        os.unlink(pwfile)
        if out.returncode != 0:
            raise RuntimeError(f"initdb failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        # A free port can be taken between our probe and the server's bind: retry a few times.
        for _attempt in range(3):
            self.port = free_port()
            if self._launch():
                self.start_seconds = self.clock() - began
                return
        raise RuntimeError(f"PostgreSQL did not start; its log {self.logfile}:\n{self._log()}")

    def _launch(self) -> bool:
        """Start the server and wait until it accepts a login; False if it exited early."""
        import psycopg

        log = open(self.logfile, "ab")
        self.proc = subprocess.Popen(
            self._cmd(
                "postgres",
                "-D",
                self.datadir,
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={self.datadir_root}",
                # Throw-away data: durability is not what the tests check.
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "shared_buffers=32MB",
                "-c",
                "max_connections=60",
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = self.clock() + START_DEADLINE_S
        while self.clock() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)  # health-check poll interval, bounded by the deadline
        self.stop_process()
        raise RuntimeError(
            f"PostgreSQL on port {self.port} not ready after "
            f"{START_DEADLINE_S}s; log:\n{self._log()}"
        )

    def _log(self) -> str:
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()[-4000:]
        except OSError as e:
            return f"(no log: {e})"

    def dsn(self, dbname: str) -> str:
        return (
            f"host=127.0.0.1 port={self.port} dbname={dbname} user={SUPERUSER} "
            f"password='{PASSWORD}'"
        )

    def url(self, dbname: str, *, password: str = PASSWORD) -> str:
        return f"postgresql://{SUPERUSER}:{quote(password, safe='')}@127.0.0.1:{self.port}/{dbname}"

    def new_database(self) -> str:
        """Create an empty database ``test_<n>`` and return its metastore URL."""
        import psycopg

        name = f"test_{next(self._names)}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # name is ours: test_<int>
        return self.url(name)

    def stop_process(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        subprocess.run(
            self._cmd("pg_ctl", "stop", "-D", self.datadir, "-m", "immediate"), capture_output=True
        )
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        self.stop_process()
        shutil.rmtree(self.datadir_root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """The session's PostgreSQL server (see ``PostgresServer``); fails if not installed."""
    try:
        server = PostgresServer(find_bindir())
    except (FileNotFoundError, RuntimeError) as e:  # not installed, or no user to run it as
        pytest.fail(str(e), pytrace=False)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_database_url(postgres_server) -> str:
    """A fresh, empty database on the session server."""
    return postgres_server.new_database()
