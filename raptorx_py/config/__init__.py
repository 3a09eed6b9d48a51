"""Configuration: properties files, Airlift units, and the typed Settings they build."""

from raptorx_py.config.loader import (
    PROPERTIES_SOURCE,
    build_settings,
    load_settings,
    with_overrides,
)
from raptorx_py.config.settings import (
    PROPERTIES,
    PROPERTIES_BY_NAME,
    TIERS_OFF,
    Property,
    Settings,
)

__all__ = [
    "PROPERTIES",
    "PROPERTIES_BY_NAME",
    "PROPERTIES_SOURCE",
    "Property",
    "Settings",
    "TIERS_OFF",
    "build_settings",
    "load_settings",
    "with_overrides",
]
