"""Path-like property values made absolute where the configuration is resolved.

``register()`` resolves the configuration in the client's process and ships the property
strings to every process that reads (Spark's Python workers on the driver and executors, or
on a Spark Connect server, another machine or user). ``~`` and relative paths left in those
strings would be expanded there, against *that* process's home and working directory, so
the default ``sqlite:///~/.raptorx/metastore.db`` would name another file on a Connect
server. ``absolute_paths`` expands them once, in the client, before they travel.

Limits: URLs with a scheme other than ``file://`` (``s3://``, ``postgresql://``) are left as
they are; per-read ``.option(...)`` values never pass through the client's raptorx_py and are
used as given, so a path given there should be absolute.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from raptorx_py.config.loader import with_overrides
from raptorx_py.config.settings import Settings

SQLITE_PREFIX = "sqlite:///"


def _local_path(value: str, home: str | None, cwd: str | None) -> str:
    if value == "~" or value.startswith("~/"):
        value = (home if home is not None else os.path.expanduser("~")) + value[1:]
    else:
        value = os.path.expanduser(value)  # ~user
    if not os.path.isabs(value):
        value = os.path.join(cwd if cwd is not None else os.getcwd(), value)
    return os.path.normpath(value)


def _dir_or_file_url(value: str, home: str | None, cwd: str | None) -> str:
    """A local directory (or ``file://`` URL) made absolute; any other URL unchanged."""
    if not value:
        return value  # empty means "off" (metrics.directory)
    if value.startswith("file://"):
        return "file://" + _local_path(value[len("file://") :], home, cwd)
    if urlparse(value).scheme:
        return value
    return _local_path(value, home, cwd)


def _metastore_url(value: str, home: str | None, cwd: str | None) -> str:
    """``sqlite:///<path>``: the path made absolute (``sqlite:////abs/path``)."""
    if not value.startswith(SQLITE_PREFIX):
        return value
    return SQLITE_PREFIX + _local_path(value[len(SQLITE_PREFIX) :], home, cwd)


#: The properties whose values name local files or directories, and how each is resolved.
PATH_PROPERTIES: dict[str, Callable[[str, str | None, str | None], str]] = {
    "hive.metastore.url": _metastore_url,
    "hive.metastore.warehouse.dir": _dir_or_file_url,
    "cache.base-directory": _dir_or_file_url,
    "fragment-result-cache.base-directory": _dir_or_file_url,
    "metrics.directory": _dir_or_file_url,
    "metrics.spark-directory": _dir_or_file_url,
}


def absolute_paths(settings: Settings, home: str | None = None, cwd: str | None = None) -> Settings:
    """``settings`` with every path-like value absolute: ``~`` expanded against ``home``
    (default: this process's), a relative path joined to ``cwd`` (default: this process's).
    Returns ``settings`` itself when nothing changes."""
    current = settings.properties()
    changed = {}
    for name, resolve in PATH_PROPERTIES.items():
        value = current.get(name)
        if value is None:
            continue
        resolved = resolve(value, home, cwd)
        if resolved != value:
            changed[name] = resolved
    return with_overrides(settings, changed, origin="register()") if changed else settings


def default_tpch_work_dir() -> Path:
    """Where TPC-H generations are cached: ``$XDG_CACHE_HOME/raptorx/tpch``
    (``~/.cache/raptorx/tpch``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "raptorx" / "tpch"
