"""The ``raptorx`` command.

    raptorx table register <db.table> <url> [--replace]
    raptorx table list [<db>]
    raptorx table show <db.table> [--partitions]
    raptorx config show
    raptorx tpch load --scale S --warehouse URL

Every command takes ``--conf-dir DIR`` and ``-p/--property name=value`` (repeatable). An
error raptorx_py raises on purpose is printed as one line naming what was wrong, exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from raptorx_py.errors import ConfigError, RaptorxError


def settings_from_args(args):
    from raptorx_py.config import load_settings

    overrides = {}
    for item in args.property or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"expected name=value, got '{item}'", source="--property")
        overrides[key.strip()] = value
    return load_settings(conf_dir=args.conf_dir, overrides=overrides)


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf-dir", help="directory with config.properties / hive.properties")
    parser.add_argument("-p", "--property", action="append", metavar="NAME=VALUE",
                        help="override one property (repeatable)")


def cmd_table_register(args) -> int:
    from raptorx_py.metastore import open_metastore
    from raptorx_py.table_registration import register_external_table

    settings = settings_from_args(args)
    with open_metastore(settings) as ms:
        table = register_external_table(ms, settings, args.table, args.url, replace=args.replace)
        n = len(ms.list_partitions(table)) if table.is_partitioned else 0
    keys = ", ".join(f"{k.name} {k.type}" for k in table.partition_keys) or "none"
    print(f"registered {table.qualified_name} (EXTERNAL) at {table.location}: "
          f"{len(table.columns)} columns, partition keys: {keys}, {n} partitions")
    return 0


def cmd_table_list(args) -> int:
    from raptorx_py.metastore import open_metastore

    with open_metastore(settings_from_args(args)) as ms:
        databases = [args.database] if args.database else ms.list_databases()
        for db in databases:
            for t in ms.list_tables(db):
                print(f"{db}.{t}")
    return 0


def cmd_table_show(args) -> int:
    from raptorx_py.metastore import open_metastore
    from raptorx_py.table_registration import parse_table_name

    with open_metastore(settings_from_args(args)) as ms:
        table = ms.get_table(*parse_table_name(args.table))
        parts = ms.list_partitions(table) if table.is_partitioned else []
    print(f"{table.qualified_name} ({table.table_type}) at {table.location}")
    for c in table.columns:
        print(f"  {c.name} {c.type}")
    for k in table.partition_keys:
        print(f"  {k.name} {k.type} (partition key)")
    if table.is_partitioned:
        rows = sum(p.row_count or 0 for p in parts)
        print(f"{len(parts)} partitions, {rows} rows")
        if args.partitions:
            for p in parts:
                print(f"  {'/'.join(str(v) for v in p.values)}  rows={p.row_count}  {p.location}")
    else:
        print(f"{table.parameters.get('numRows', '?')} rows")
    return 0


def cmd_config_show(args) -> int:
    from raptorx_py.config.loader import describe_settings

    print(describe_settings(settings_from_args(args)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raptorx", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    table = sub.add_parser("table", help="register and inspect tables")
    tsub = table.add_subparsers(dest="table_command", required=True)
    reg = tsub.add_parser("register", help="register an existing Hive-layout directory "
                                           "as an EXTERNAL table")
    reg.add_argument("table", help="<database>.<table>")
    reg.add_argument("url", help="file:///path or s3://bucket/prefix")
    reg.add_argument("--replace", action="store_true", help="replace an existing table")
    add_common_options(reg)
    reg.set_defaults(func=cmd_table_register)
    lst = tsub.add_parser("list", help="list tables")
    lst.add_argument("database", nargs="?")
    add_common_options(lst)
    lst.set_defaults(func=cmd_table_list)
    show = tsub.add_parser("show", help="describe a table")
    show.add_argument("table")
    show.add_argument("--partitions", action="store_true", help="list every partition")
    add_common_options(show)
    show.set_defaults(func=cmd_table_show)

    config = sub.add_parser("config", help="inspect the configuration")
    csub = config.add_subparsers(dest="config_command", required=True)
    cshow = csub.add_parser("show", help="every property with its value and default")
    add_common_options(cshow)
    cshow.set_defaults(func=cmd_config_show)

    from raptorx_py.tpch.load import add_cli as add_tpch_cli

    add_tpch_cli(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RaptorxError as e:
        print(f"raptorx: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
