"""The table of every property raptorx_py knows, and the typed ``Settings`` it fills.

One row per property: its name (RaptorX's or Presto's where one exists), the ``Settings``
field it sets, its default (as the string a user would write), its kind (how the string is
parsed), the file it belongs in (``hive`` or ``config``) and a one-line description. The
conf files, the documentation tests and the loader are all driven from this table, so a
property cannot exist in one place and be missing in another.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from raptorx_py.config import units


@dataclass(frozen=True)
class Property:
    name: str
    field: str
    default: str
    kind: str  # "str" | "bool" | "int" | "size" | "duration"
    file: str  # "hive" -> conf/hive.properties, "config" -> conf/config.properties
    doc: str


PARSERS: dict[str, Callable[[str], Any]] = {
    "str": lambda s: s,
    "bool": units.parse_bool,
    "int": units.parse_int,
    "size": units.parse_data_size,
    "duration": units.parse_duration,
}

PROPERTIES: tuple[Property, ...] = (
    # --- metastore -------------------------------------------------------------------
    Property("hive.metastore.url", "metastore_url", "sqlite:///~/.raptorx/metastore.db", "str",
             "hive", "Metastore database: sqlite:///<path> (embedded default, created on first use)."),
    # --- object store (S3) -------------------------------------------------------------
    Property("hive.s3.endpoint", "s3_endpoint", "", "str", "hive",
             "S3 endpoint URL; empty means AWS's own endpoint."),
    Property("hive.s3.aws-access-key", "s3_access_key", "", "str", "hive",
             "S3 access key; empty means the default credential chain."),
    Property("hive.s3.aws-secret-key", "s3_secret_key", "", "str", "hive",
             "S3 secret key; empty means the default credential chain."),
    Property("hive.s3.region", "s3_region", "", "str", "hive",
             "S3 region name; empty means the SDK default."),
    Property("hive.s3.path-style-access", "s3_path_style_access", "false", "bool", "hive",
             "Address buckets as <endpoint>/<bucket> instead of <bucket>.<endpoint>."),
    Property("hive.s3.connect-timeout", "s3_connect_timeout", "5s", "duration", "hive",
             "Time allowed to open a connection to the S3 endpoint."),
    Property("hive.s3.socket-timeout", "s3_socket_timeout", "30s", "duration", "hive",
             "Time allowed for an S3 response before the request fails."),
    Property("hive.s3.max-error-retries", "s3_max_error_retries", "2", "int", "hive",
             "Retries of a failed S3 request before the query fails with the endpoint named."),
    # --- pruning -----------------------------------------------------------------------
    Property("hive.partition-statistics-based-optimization-enabled", "stats_pruning_enabled",
             "true", "bool", "hive",
             "Skip partitions and row groups whose min/max/null statistics cannot match the filter."),
    # --- engine-wide -------------------------------------------------------------------
    Property("metrics.directory", "metrics_directory", "", "str", "config",
             "Directory where every process appends its counters (tests, benchmark); empty: off."),
)

PROPERTIES_BY_NAME: dict[str, Property] = {p.name: p for p in PROPERTIES}


@dataclass(frozen=True)
class Settings:
    """Typed, validated configuration. Build with ``raptorx_py.config.load_settings``."""

    metastore_url: str
    s3_endpoint: str
    s3_access_key: str
    s3_secret_key: str
    s3_region: str
    s3_path_style_access: bool
    s3_connect_timeout: float  # seconds
    s3_socket_timeout: float  # seconds
    s3_max_error_retries: int
    stats_pruning_enabled: bool
    metrics_directory: str
    #: The property strings these settings were built from (name -> value), so that the
    #: exact configuration can be shipped to Spark's Python workers and rebuilt there.
    source: tuple[tuple[str, str], ...] = ()

    def properties(self) -> dict[str, str]:
        return dict(self.source)

    def with_overrides(self, overrides: dict[str, str], origin: str = "option") -> "Settings":
        from raptorx_py.config.loader import build_settings

        merged = self.properties()
        merged.update(overrides)
        return build_settings({k: (v, origin, None) for k, v in merged.items()})


SETTINGS_FIELDS = tuple(f.name for f in dataclasses.fields(Settings) if f.name != "source")
