"""What every ``raptorx`` command group shares: the options every command takes
(``--conf-dir``, ``-p``), the settings they give, a partition spec read against a table, and
output as JSON or as aligned columns."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from raptorx_py.errors import ConfigError


def settings_from_args(args):
    from raptorx_py.config import load_settings

    overrides = {}
    for item in args.property or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"expected name=value, got '{item}'", source="--property")
        overrides[key.strip()] = value
    return load_settings(
        conf_dir=args.conf_dir, overrides=overrides, overrides_source="-p/--property"
    )


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf-dir", help="directory with config.properties / hive.properties")
    parser.add_argument(
        "-p",
        "--property",
        action="append",
        metavar="NAME=VALUE",
        help="override one property (repeatable)",
    )


def command_group(subparsers, name: str, **kwargs: str):
    """A command group (``raptorx table``): its parser (``kwargs``: help, description), and
    the subparsers its commands are added to, one of which must be named."""
    group = subparsers.add_parser(name, **kwargs)
    return group.add_subparsers(dest=f"{name}_command", required=True)


@contextmanager
def command(
    subparsers,
    name: str,
    func,
    text: str,
    *,
    described: bool = False,
    table: bool = False,
    common: bool = True,
) -> Iterator[argparse.ArgumentParser]:
    """One command: its parser, with ``text`` as its help (and as its description when
    ``described``) and a ``table`` argument first when asked; the ``with`` block adds its own
    arguments; then the options every command takes (unless not ``common``) and ``func``,
    which runs it."""
    parser = subparsers.add_parser(name, help=text, **({"description": text} if described else {}))
    if table:
        parser.add_argument("table", help="<database>.<table>")
    yield parser
    if common:
        add_common_options(parser)
    parser.set_defaults(func=func)


@contextmanager
def opened_table(args) -> Iterator[tuple[Any, Any, Any]]:
    """For a command on ``args.table``: the settings ``args`` give, their catalog (open for
    the ``with`` block) and the table in it: ``(settings, metastore, table)``."""
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.names import parse_table_name

    settings = settings_from_args(args)
    with open_catalog(settings.metastore_connection) as ms:
        yield settings, ms, ms.get_table(*parse_table_name(args.table))


def metastore_named(settings) -> str:
    """The configured metastore: the Hive Metastore URI, or the database URL (masked)."""
    if settings.metastore_uri:
        return f"{settings.metastore_uri} (hive.metastore.uri)"
    return masked_url(settings.metastore_url)


def masked_url(url: str) -> str:
    """A metastore URL with its password replaced by ``***``."""
    from raptorx_py.config.loader import mask_url_password

    return mask_url_password(url, hidden="***")


def print_json(value) -> None:
    """One JSON document on stdout (``--json``): indented, keys in the order built."""
    print(json.dumps(value, indent=2, default=str))


def print_columns(lines: list[list[str]]) -> None:
    """Rows of cells, the first the header, each column as wide as its widest cell."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


def parse_partition_spec(table, spec: str) -> tuple[str | None, ...]:
    """``"k1=v1/k2=v2"`` (a Hive partition name, values escaped as in directory names) ->
    the partition's values in ``table``'s key order. Every key must be named exactly once."""
    from raptorx_py.errors import SchemaError
    from raptorx_py.hive.partition_names import unescape_partition_value

    given: dict[str, str | None] = {}
    for part in spec.strip("/").split("/"):
        key, sep, value = part.partition("=")
        column = unescape_partition_value(key)  # None: the null marker, not a column name
        if not sep or not key or column is None or key in given:
            raise SchemaError(
                f"partition spec '{spec}' of {table.qualified_name} is not of the "
                f"form k1=v1/k2=v2 with each key once"
            )
        given[column] = unescape_partition_value(value)
    keys = [k.name for k in table.partition_keys]
    if sorted(given) != sorted(keys):
        raise SchemaError(
            f"partition spec '{spec}' names keys {sorted(given)}, but "
            f"{table.qualified_name} is partitioned by {keys}"
        )
    return tuple(given[k] for k in keys)
