"""``raptorx config show``: the files read, the metastore, and every property."""

from __future__ import annotations

import os

from raptorx_py.cli.common import (
    command,
    command_group,
    metastore_named,
    print_json,
    settings_from_args,
)


def add_parser(sub) -> None:
    """``raptorx config`` and its command."""
    csub = command_group(sub, "config", help="inspect the configuration")
    text = "the files read, the metastore, and every property with its value and default"
    with command(csub, "show", cmd_config_show, text) as show:
        show.add_argument(
            "--sources", action="store_true", help="only the files read and the metastore URL"
        )
        show.add_argument("--json", action="store_true", help="one JSON document")


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
