"""``raptorx tpch load``: generate TPC-H, copy it to a warehouse and register its tables."""

from __future__ import annotations

import sys

from raptorx_py.cli.common import command, command_group, settings_from_args


def add_parser(sub) -> None:
    """``raptorx tpch load --scale S --warehouse URL [--database D] [--work-dir DIR]
    [--conf-dir DIR] [-p name=value]``."""
    from raptorx_py.config.paths import default_tpch_work_dir

    tsub = command_group(sub, "tpch", help="TPC-H data: generate, copy and register")
    text = (
        "generate TPC-H with tpchgen-cli, copy it to <warehouse>/<database>.db/ and register "
        "its tables as EXTERNAL"
    )
    with command(tsub, "load", cmd_tpch_load, text) as load:
        load.add_argument("--scale", type=float, required=True, help="scale factor, e.g. 0.01 or 1")
        load.add_argument(
            "--warehouse",
            required=True,
            help="warehouse URL: file:///path, a local path or s3://bucket/prefix",
        )
        load.add_argument("--database", default="tpch", help="database name (default: tpch)")
        load.add_argument(
            "--work-dir",
            help="where to generate and cache the data locally "
            f"(default: {default_tpch_work_dir()})",
        )
        load.add_argument("--no-progress", action="store_true", help="no progress bar")
        load.add_argument(
            "--no-seal",
            action="store_true",
            help="register the partitions open (not sealed): their listings are then never cached",
        )
        load.add_argument(
            "--format",
            choices=["parquet", "orc"],
            default="parquet",
            help="the files' format (default: parquet; orc rewrites the generated files as "
            "ORC in the same layout, for external tables only)",
        )
        load.add_argument(
            "--managed",
            action="store_true",
            help="write MANAGED tables through the Spark write path instead (starts "
            "a local Spark session; use a --database of their own)",
        )


def cmd_tpch_load(args) -> int:
    from raptorx_py.tpch.generate import format_scale
    from raptorx_py.tpch.load import load_tpch, load_tpch_managed
    from raptorx_py.tpch.queries import TABLES

    settings = settings_from_args(args)
    if args.managed and args.format != "parquet":
        print(
            "raptorx: error: --managed writes Parquet tables; leave out --format orc",
            file=sys.stderr,
        )
        return 2
    if args.managed:
        from raptorx_py.session import tiered_session

        spark = tiered_session(
            conf_dir=args.conf_dir, properties=settings.properties(), app_name="raptorx-tpch-load"
        )
        try:
            urls = load_tpch_managed(
                spark,
                args.scale,
                settings,
                database=args.database,
                warehouse_url=args.warehouse,
                work_dir=args.work_dir,
                progress=not args.no_progress,
            )
        finally:
            spark.stop()
    else:
        urls = load_tpch(
            args.scale,
            args.warehouse,
            settings,
            database=args.database,
            work_dir=args.work_dir,
            progress=not args.no_progress,
            seal=not args.no_seal,
            storage_format=args.format.upper(),
        )
    print(
        f"loaded TPC-H SF {format_scale(args.scale)}: "
        + ", ".join(f"{args.database}.{t}" for t in urls)
        + f" at {urls[TABLES[0]].rsplit('/', 1)[0]}"
    )
    return 0
