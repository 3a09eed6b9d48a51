"""A read's options: the read's own (the table, its columns, what the JVM provider adds) and
any property name, which overrides that property for this read only.

Any other option is an error naming it and where it came from (a read option,
``register``'s properties, a catalog's Spark conf), all of them in one error.
"""

from __future__ import annotations

from raptorx_py.config import (
    PROPERTIES_BY_NAME,
    PROPERTIES_SOURCE,
    build_settings,
    load_settings,
)
from raptorx_py.config.settings import Settings
from raptorx_py.datasource.planning.column_names import CASE_SENSITIVE_OPTION
from raptorx_py.errors import ConfigError, did_you_mean, raise_config_errors
from raptorx_py.jvm_contract.protocol import (
    CATALOG_OPTIONS_OPTION,
    CATALOG_REQUEST_OPTION,
    PARTITION_BY_OPTION,
)
from raptorx_py.native import PUBLIC_NAME
from raptorx_py.scheduling.affinity import EXECUTORS_OPTION

DATA_SOURCE_NAME = PUBLIC_NAME
# partition_by: for writes (datasource/writer.py).
# raptorx.executors: the live executors, from the JVM provider (scheduling.affinity).
# raptorx.case_sensitive: the session's spark.sql.caseSensitive (column_names.py).
# raptorx.catalog_request: a request of the Spark catalog (catalog_requests.py).
READ_OPTIONS = (
    "path",
    "table",
    "columns",
    PARTITION_BY_OPTION,
    EXECUTORS_OPTION,
    CASE_SENSITIVE_OPTION,
    CATALOG_REQUEST_OPTION,
    CATALOG_OPTIONS_OPTION,
)


#: What errors name as the source of a read option.
OPTION_SOURCE = "option"


def option_sources(options: dict[str, str]) -> dict[str, str]:
    """Where each option that is not the read's own came from: the Spark catalog's conf
    (``spark.sql.catalog.<name>.<property>``, listed by the catalog in
    ``CATALOG_OPTIONS_OPTION``), by lower-case name."""
    marked = options.get(CATALOG_OPTIONS_OPTION)
    if not marked or ":" not in marked:
        return {}
    catalog, keys = marked.split(":", 1)
    source = f"Spark conf spark.sql.catalog.{catalog}"
    return {k.strip().lower(): source for k in keys.split(",") if k.strip()}


def resolve_options(properties: dict[str, str] | None, options) -> tuple[Settings, dict]:
    """Settings for one read (carried properties + per-read property options) and the
    remaining read options. Unknown option names and bad property values fail, each named
    with where it came from (a read option, ``register``'s properties, a catalog's Spark
    conf), all of them in one error."""
    overrides, read_options = {}, {}
    options = {key.lower(): value for key, value in dict(options).items()}
    sources = option_sources(options)
    unknown: list[ConfigError] = []
    for key, value in options.items():
        if key in PROPERTIES_BY_NAME:
            overrides[key] = value
        elif key in READ_OPTIONS:
            read_options[key] = value
        else:
            close = did_you_mean(key, (*READ_OPTIONS, *PROPERTIES_BY_NAME))
            unknown.append(
                ConfigError(
                    f"unknown option for {DATA_SOURCE_NAME}; "
                    + (f"did you mean '{close}'? " if close else "")
                    + f"read options are {', '.join(READ_OPTIONS)}, or any property name",
                    source=sources.get(key, OPTION_SOURCE),
                    key=key,
                )
            )
    try:
        if properties is None:
            settings = load_settings(overrides=overrides, override_sources=sources)
        else:
            merged = {k: (v, PROPERTIES_SOURCE, None) for k, v in properties.items()}
            merged.update(
                {k: (v, sources.get(k, OPTION_SOURCE), None) for k, v in overrides.items()}
            )
            settings = build_settings(merged)
    except ConfigError as e:
        raise_config_errors([*unknown, *getattr(e, "errors", [e])])
        raise
    raise_config_errors(unknown)
    return settings, read_options
