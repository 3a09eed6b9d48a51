"""``raptorx config show``: the files read, the metastore, and every property."""

from __future__ import annotations

import os

from raptorx_py.cli.common import (
    add_common_options,
    metastore_named,
    print_json,
    settings_from_args,
)


def add_parser(sub) -> None:
    """``raptorx config`` and its command."""
    config = sub.add_parser("config", help="inspect the configuration")
    csub = config.add_subparsers(dest="config_command", required=True)
    cshow = csub.add_parser(
        "show", help="the files read, the metastore, and every property with its value and default"
    )
    cshow.add_argument(
        "--sources", action="store_true", help="only the files read and the metastore URL"
    )
    cshow.add_argument("--json", action="store_true", help="one JSON document")
    add_common_options(cshow)
    cshow.set_defaults(func=cmd_config_show)


def cmd_config_show(args) -> int:

    from raptorx_py.config.loader import CONF_DIR_ENV, config_files, describe_settings

    settings = settings_from_args(args)
    files = config_files(args.conf_dir)
    if args.json:
        from raptorx_py.config.loader import settings_records

        record = {
            "files": [str(f) for f in files],
            "conf_dir_env": os.environ.get(CONF_DIR_ENV) if args.conf_dir is None else None,
            "overridden": [k.split("=", 1)[0] for k in args.property or ()],
            "metastore": metastore_named(settings),
        }
        if not args.sources:
            record["properties"] = settings_records(settings)
        print_json(record)
        return 0
    print(
        "files read (later ones win): "
        + (", ".join(str(f) for f in files) if files else "none, defaults only")
    )
    if args.conf_dir is None and os.environ.get(CONF_DIR_ENV):
        print(f"  ({CONF_DIR_ENV}={os.environ[CONF_DIR_ENV]})")
    if args.property:
        overridden = ", ".join(k.split("=", 1)[0] for k in args.property)
        print(f"overridden on the command line: {overridden}")
    print(f"metastore: {metastore_named(settings)}")
    if args.sources:
        return 0
    print()
    print(describe_settings(settings))
    return 0
