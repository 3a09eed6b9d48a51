"""Every error raptorx_py raises on purpose, in one place.

Each class names *what* was wrong (a table, a file, a property) in its message, and
subclasses a built-in type so callers that do not know raptorx_py can still catch it
(``except FileNotFoundError`` catches a missing table location, ``except ValueError`` a
bad property value). The original cause is always kept as ``__cause__``.

``translate_storage_error`` is the single table that turns what fsspec/s3fs/botocore
raise into these types, in the spirit of s3fs's ``errors.py``.
"""

from __future__ import annotations

import difflib
import errno
import re
from collections.abc import Iterable, Sequence


class RaptorxError(Exception):
    """Base class of every error raised on purpose by raptorx_py."""


class ConfigError(RaptorxError, ValueError):
    """A property file, property name or property value is wrong.

    ``source`` is the file (or ``"option"`` / ``"default"``), ``line`` the 1-based line
    number when known, ``key`` the property name.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ):
        where = []
        if source:
            where.append(f"{source}:{line}" if line else source)
        if key:
            where.append(f"property '{key}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.source, self.line, self.key = source, line, key


class ConfigErrors(ConfigError):
    """Several ``ConfigError`` found in one pass (every bad line of a file, every bad property
    of a configuration), so a user fixes them all at once. ``errors`` lists them; ``source``,
    ``line`` and ``key`` are the first's."""

    def __init__(self, errors: Sequence[ConfigError]):
        lines = "\n".join(f"  {e}" for e in errors)
        Exception.__init__(self, f"{len(errors)} problems in the configuration:\n{lines}")
        first = errors[0]
        self.source, self.line, self.key = first.source, first.line, first.key
        self.errors = list(errors)


def raise_config_errors(errors: Sequence[ConfigError]) -> None:
    """Raise nothing, the one error, or ``ConfigErrors`` of them all."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


#: Words that say what a name is about, each with the words that mean the same; a
#: suggestion for an unknown name prefers names about the same thing (``cache.max-size`` is
#: a size: ``cache.alluxio.max-cache-size``, not ``cache.block-size``, its nearest spelling).
MEANING_WORDS: dict[str, frozenset[str]] = {
    "size": frozenset({"size", "bytes", "capacity", "space", "limit"}),
    "ttl": frozenset({"ttl", "expire", "expiry", "expiration", "expires", "age", "lifetime"}),
    "directory": frozenset({"directory", "dir", "folder", "location", "root"}),
    "timeout": frozenset({"timeout", "timeouts"}),
    "retries": frozenset({"retries", "retry", "numretries", "attempts"}),
    "entries": frozenset({"entries", "entry", "count"}),
    "max": frozenset({"max", "maximum"}),
    "enabled": frozenset({"enabled", "enable", "on"}),
    "metadata": frozenset({"metadata", "footer", "footers"}),
}
_MEANING_OF = {w: meaning for meaning, words in MEANING_WORDS.items() for w in words}
#: The meanings that say what a value is (the others only help to rank).
_VALUE_MEANINGS = frozenset({"size", "ttl", "directory", "timeout", "retries", "entries"})
#: A spelling this close is a misspelling, whatever the words say.
_TYPO_RATIO = 0.9


def _words(name: str) -> set[str]:
    return {_MEANING_OF.get(w, w) for w in re.split(r"[^a-z0-9]+", name.lower()) if w}


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate an unknown ``name`` most likely meant, or None when none is close: a
    near spelling (a typo), else the candidate sharing what the name is about (a size, a
    TTL, a directory ...: ``MEANING_WORDS``) and most of its words (then the fewest words of
    its own), within the same prefix first; else a looser spelling match."""
    names = list(candidates)
    typo = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    ratio = difflib.SequenceMatcher(None, name, typo[0]).ratio() if typo else 0.0
    if typo and ratio >= _TYPO_RATIO:
        return typo[0]
    words = _words(name)
    meanings = words & _VALUE_MEANINGS
    if meanings:
        prefix = name.lower().split(".", 1)[0]

        def rank(candidate: str) -> tuple[int, int, int, bool, float]:
            theirs = _words(candidate)
            return (
                len(meanings & theirs),
                len(words & theirs),
                -len(theirs - words),  # of two as close, the one adding fewer words
                candidate.lower().split(".", 1)[0] == prefix,
                difflib.SequenceMatcher(None, name, candidate).ratio(),
            )

        ranked = [(rank(c), c) for c in names]
        ranked = [(r, c) for r, c in ranked if r[0] and r[1] >= 2]
        if ranked:
            return max(ranked)[1]
    return typo[0] if typo else None


class MetastoreError(RaptorxError):
    """The metastore database could not be opened or answered with an error."""


class LockError(MetastoreError):
    """A lock could not be taken or released."""


class NoSuchLockError(LockError, LookupError):
    """No lock request has that id (released, or expired)."""


class LockRefusedError(LockError):
    """A lock request was refused after every retry. ``requested`` is the component that
    conflicted (``metastore.locks.LockComponent``) and ``holder`` the lock that held it
    (``metastore.locks.LockInfo``)."""

    def __init__(self, message: str, requested: object, holder: object):
        super().__init__(message)
        self.requested, self.holder = requested, holder


class MetastoreNotFoundError(MetastoreError, FileNotFoundError):
    """The metastore named by ``hive.metastore.url`` does not exist, and the caller only
    reads it (only commands that create tables create a metastore). Names the path."""


class NoSuchObjectError(MetastoreError, LookupError):
    """A database, table or partition does not exist. The message lists what does exist: all
    of it up to ``MAX_LISTED`` names, else the closest to ``name`` and the first by name, with
    how many more there are and ``hint`` (where to see them all). ``existing`` keeps all."""

    MAX_LISTED = 10

    def __init__(
        self, kind: str, name: str, existing: Iterable[str] = (), *, hint: str | None = None
    ):
        existing = sorted(existing)
        super().__init__(
            f"{kind} '{name}' does not exist. {self.listing(kind, name, existing, hint)}"
        )
        self.kind, self.name, self.existing = kind, name, existing

    @classmethod
    def listing(cls, kind: str, name: str, existing: list[str], hint: str | None) -> str:
        if len(existing) <= cls.MAX_LISTED:
            return f"Existing {kind}s: {', '.join(existing) if existing else '(none)'}"
        # The closest first (a typo is the likely cause), then the first by name.
        leaf = name.rsplit("/", 1)[-1]
        close = difflib.get_close_matches(leaf, existing, n=3, cutoff=0.5)
        shown = close + [e for e in existing if e not in close][: cls.MAX_LISTED - len(close)]
        more = f"and {len(existing) - len(shown)} more"
        return f"{len(existing)} {kind}s exist, among them {', '.join(shown)} {more}" + (
            f" ({hint})" if hint else ""
        )


class AlreadyExistsError(MetastoreError, FileExistsError):
    """A database or table of that name already exists."""


class LayoutError(RaptorxError, ValueError):
    """A table directory does not follow the Hive layout (names the offending path)."""


class EmptyTableLocationError(RaptorxError, FileNotFoundError):
    """A table location is missing or holds no data files."""


class CorruptFileError(RaptorxError, OSError):
    """A data file is not readable Parquet or ORC (bad magic, truncated, garbage). Names the
    file."""

    def __init__(self, path: str, reason: str, file_format: str = "Parquet"):
        super().__init__(f"Corrupt or truncated {file_format} file {path}: {reason}")
        self.path, self.reason = path, reason


class SchemaError(RaptorxError, ValueError):
    """A requested column, filter column or user schema does not match the table."""


class UnsupportedFormatError(RaptorxError, ValueError):
    """A read that would need the Python reader for a table whose files it does not read
    (ORC: Spark's ORC reader in the JVM reads them). Names the table and what made the read
    need the Python reader."""


class UnsupportedValueError(RaptorxError, ValueError):
    """A value in a file that tiered_hive cannot read as Spark's reader would (the message
    names the file and column)."""


class WriteError(RaptorxError, RuntimeError):
    """A write to a table was not committed (names the table and why); nothing of it is
    visible."""


class LocationInUseError(RaptorxError, FileExistsError):
    """A write would publish into a directory it did not create: a new MANAGED table's
    location already holds files, or an ACID directory of the write's id already exists
    (another table, or another metastore, uses the same directory). Names the path."""


class InvalidNameError(SchemaError):
    """A database or table name breaks the naming rule (``names.py``); names the name and
    the rule."""


class StorageError(RaptorxError, OSError):
    """The object store could not be reached or refused a request. Names the URL."""


class FileChangedError(StorageError):
    """A file's bytes changed (another ETag or size) after the query listed it."""


class PartitionMissingError(FileChangedError, FileNotFoundError):
    """A partition the metastore lists holds less on storage than the metastore says: it
    lists no data file, and its location does not exist or the metastore records files or
    rows for it. The one error for that case, whatever reads it (docs/design/storage-
    tiers.md, "When the store holds less than the metastore says"); the message names the
    table, the partition, its location and what to do. ``hive.ignore-absent-partitions``
    turns it into skipping the partition with a warning. ``table``, ``partition`` (its Hive
    name) and ``location`` keep what it names."""

    def __init__(self, message: str, *, table: str, partition: str, location: str):
        super().__init__(message)
        self.table, self.partition, self.location = table, partition, location


class StoragePermissionError(StorageError, PermissionError):
    """Access to a storage URL was denied."""


class StorageNotFoundError(StorageError, FileNotFoundError):
    """A storage URL does not exist."""


class ConnectServerError(RaptorxError, RuntimeError):
    """A Spark Connect server cannot serve ``tiered_hive`` (the raptorx jar is not on it), or
    the server ``raptorx connect-server`` started did not come up. The message names the
    server and says how to start one that works."""


class NativeJarError(RaptorxError, RuntimeError):
    """The raptorx jar on the classpath does not match the running Spark: a member of Spark's
    internals it uses is missing or has another type (``raptorx.NativeCompatibility``). The
    message names each such member, the pyspark found and the one the jar was built against.
    Also: no jar where one is asked for (``raptorx jar``), or a file that is not a readable
    jar."""


#: Exception class names (botocore, aiohttp, fsspec) that mean the store failed, not the data.
_UNREACHABLE_NAMES = ("Endpoint", "Connect", "Timeout")


def is_storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` came from the object store (unreachable, refused, not found, a range
    past the object's end, or the object changed), as opposed to bytes that are not what
    they should be."""
    name = type(exc).__name__
    return (
        name in ("FileExpired", "ClientError")
        or any(k in name for k in _UNREACHABLE_NAMES)
        or isinstance(exc, (ConnectionError, TimeoutError))
        or _is_not_found(exc)
        or _is_range_not_satisfiable(exc)
    )


def _is_not_found(exc: BaseException) -> bool:
    """The store has no such object (s3fs turns ``NoSuchKey`` into ``FileNotFoundError``)."""
    return isinstance(exc, FileNotFoundError) or getattr(exc, "errno", None) == errno.ENOENT


#: S3's answer to a range that starts past the object's end (HTTP 416), as botocore names
#: it and as s3fs words it in the ``OSError(EINVAL)`` it raises instead.
_RANGE_CODES = ("InvalidRange", "416")
_RANGE_TEXT = "range is not satisfiable"


def _is_range_not_satisfiable(exc: BaseException) -> bool:
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:  # s3fs keeps botocore's error as the cause
        seen.add(id(e))
        code = (getattr(e, "response", None) or {}).get("Error", {}).get("Code")
        if code in _RANGE_CODES or _RANGE_TEXT in str(e).lower():
            return True
        e = e.__cause__ or e.__context__
    return False


def translate_storage_error(exc: BaseException, url: str, *, listed: bool = False) -> RaptorxError:
    """Map an exception raised by fsspec/s3fs/botocore for ``url`` to one of ours.

    The single table of translations; the cause is attached by the caller with
    ``raise translate_storage_error(e, url) from e``. ``listed``: ``url`` is a file a plan
    listed (with its size and version), so the store's "not found" and "range not
    satisfiable" (a read within the listed size, past the object's end now) mean the file
    changed after it was listed: ``FileChangedError``, not a missing or corrupt file (our
    ``StorageNotFoundError`` of such a file too).
    """
    if isinstance(exc, RaptorxError):
        if listed and isinstance(exc, StorageNotFoundError):
            return FileChangedError(
                f"{url} was listed but the store no longer has it; the file changed after "
                f"it was listed ({exc})"
            )
        return exc
    name = type(exc).__name__
    text = str(exc) or name
    if name == "FileExpired":  # fsspec: the ETag of a ranged read differs from the planned one
        return FileChangedError(
            f"{url} was overwritten after the query listed it; run the query again ({text})"
        )
    if listed and _is_not_found(exc):
        return FileChangedError(
            f"{url} was listed but the store no longer has it; the file changed after it "
            f"was listed ({text})"
        )
    if listed and _is_range_not_satisfiable(exc):
        return FileChangedError(
            f"{url} is shorter than when it was listed (the store refused a range within "
            f"the listed size); the file changed after it was listed ({text})"
        )
    if _is_not_found(exc):
        return StorageNotFoundError(f"{url} does not exist ({text})")
    if isinstance(exc, PermissionError) or getattr(exc, "errno", None) == errno.EACCES:
        return StoragePermissionError(f"access to {url} denied ({text})")
    # botocore's connection failures: EndpointConnectionError, ConnectTimeoutError,
    # ReadTimeoutError, ConnectionClosedError; aiohttp's ClientConnectorError.
    if any(k in name for k in _UNREACHABLE_NAMES) or isinstance(
        exc, (ConnectionError, TimeoutError)
    ):
        endpoint = _endpoint_of(exc)
        target = f"{endpoint} for {url}" if endpoint else url
        return StorageError(f"could not connect to {target}: {text}")
    return StorageError(f"storage request for {url} failed: {name}: {text}")


def _endpoint_of(exc: BaseException) -> str | None:
    """``scheme://host:port`` of the request a botocore connection error names, if any."""
    from urllib.parse import urlparse

    url = (getattr(exc, "kwargs", None) or {}).get("endpoint_url")
    if not url:
        return None
    parsed = urlparse(str(url))
    return f"{parsed.scheme}://{parsed.netloc}" if parsed.netloc else None


class AggregateOverflowError(RaptorxError, ArithmeticError):
    """A value of a pushed aggregation's input expression does not fit the type Spark gives
    it: Spark fails such a query (its arithmetic is ANSI there), so the read fails too,
    naming the expression, the type and the error condition Spark's own evaluation raises
    (``ARITHMETIC_OVERFLOW`` for integers, ``NUMERIC_VALUE_OUT_OF_RANGE`` for decimals)."""
