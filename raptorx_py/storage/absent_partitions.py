"""When a partition the metastore lists is absent from storage: the one rule.

A partition (or an unpartitioned table's location) whose listing holds no data file is
*absent* when the metastore records data for it (``numFiles`` or ``numRows`` above 0), or
when its location does not exist and the metastore does not record it as empty
(``numFiles=0``: an empty partition added with ``raptorx partition add``, which on an
object store has no location to exist). An absent partition fails the query
(``PartitionMissingError``), unless ``hive.ignore-absent-partitions`` says to read it as
empty. The planner applies the rule to every listing (``datasource.planning.planner``), and
``raptorx table show --partitions --check`` reports what it finds. A location that exists
and lists no file, recorded as empty or with no statistics, is an empty partition: no rows.

The other ways the store can hold less than the metastore says are a file that a plan (or
a sealed partition's cached listing) lists and the store no longer has, or has shorter:
``FileChangedError`` when it is read (docs/design/files-changing.md, "When the store holds
less than the metastore says").
"""

from __future__ import annotations

from collections.abc import Mapping

from raptorx_py.config.settings import Settings
from raptorx_py.errors import PartitionMissingError, translate_storage_error
from raptorx_py.hive.table_parameters import NUM_FILES_PARAM, NUM_ROWS_PARAM
from raptorx_py.storage.fs import filesystem_for
from raptorx_py.storage.hive_layout import list_data_files


def _count(parameters: Mapping[str, str], name: str) -> int | None:
    value = parameters.get(name)
    return int(value) if value is not None and value.isdigit() else None


def recorded_data(parameters: Mapping[str, str]) -> str | None:
    """What the metastore records a location holds (``"3 files, 7473 rows"``), or None when
    it records no file and no row."""
    files, rows = _count(parameters, NUM_FILES_PARAM), _count(parameters, NUM_ROWS_PARAM)
    said = [f"{n} {word}{'s' * (n != 1)}" for n, word in ((files, "file"), (rows, "row")) if n]
    return ", ".join(said) or None


def location_exists(fs, path: str, url: str) -> bool:
    """Whether ``path`` exists (a directory, or on an object store some object below the
    prefix). A store's error is translated, naming ``url``."""
    try:
        return bool(fs.exists(path))
    except Exception as e:  # translated: the cause is kept
        raise translate_storage_error(e, url) from e


def absent_reason(fs, path: str, url: str, parameters: Mapping[str, str]) -> str | None:
    """Why a location whose listing holds no data file is absent (the module's rule), or
    None when it is an empty partition. One ``exists`` call on the store."""
    recorded = recorded_data(parameters)
    exists = location_exists(fs, path, url)
    if recorded is not None:
        if exists:
            return f"holds no data file, but the metastore records {recorded}"
        return f"does not exist, but the metastore records {recorded}"
    if not exists and _count(parameters, NUM_FILES_PARAM) != 0:
        return "does not exist"
    return None


def absent_what(table: str, partition: str | None, url: str) -> str:
    """``partition k=v of db.t, at <url>,`` (``partition`` None: an unpartitioned table's
    location): the subject of the messages about an absent partition."""
    if partition is None:
        return f"the location {url} of table {table}"
    return f"partition {partition} of {table}, at {url},"


def missing_error(
    table: str, partition: str | None, url: str, reason: str
) -> PartitionMissingError:
    """The error of an absent partition (``partition`` None: an unpartitioned table's
    location), naming the table, the partition, the location and what to do."""
    what = absent_what(table, partition, url)
    if partition is None:
        todo = (
            f"put its files back, register the table again where they are (`raptorx table "
            f"register {table} <url> --replace`)"
        )
    else:
        todo = (
            f"put its files back; if it is gone for good, drop it from the metastore (`raptorx "
            f"partition drop {table} {partition}`, or for every such partition `raptorx table "
            f"repair {table} --drop-missing`)"
        )
    return PartitionMissingError(
        f"{what} {reason}: the store holds less than the metastore says, so the query "
        f"would read fewer rows than the table has. To fix it, {todo}; or set "
        f"hive.ignore-absent-partitions=true to read such partitions as empty, with a "
        f"warning",
        table=table,
        partition=partition or "",
        location=url,
    )


def check_location(settings: Settings, url: str, parameters: Mapping[str, str]) -> str | None:
    """Why the partition (or unpartitioned table) at ``url``, recorded with ``parameters``, is
    absent now (one listing, and one ``exists`` call when it lists no data file), or None.
    What ``raptorx table show --check`` and ``raptorx table repair --drop-missing`` ask."""
    fs, path = filesystem_for(url, settings)
    if list_data_files(fs, path, url):
        return None
    return absent_reason(fs, path, url, parameters)
