"""Configuration: properties files, Airlift units, and the typed Settings they build."""

from raptorx_py.config.loader import build_settings, load_settings, with_overrides
from raptorx_py.config.settings import PROPERTIES, PROPERTIES_BY_NAME, Property, Settings

__all__ = [
    "PROPERTIES",
    "PROPERTIES_BY_NAME",
    "Property",
    "Settings",
    "build_settings",
    "load_settings",
    "with_overrides",
]
