"""``raptorx partition``: add, seal and un-seal one partition of a table."""

from __future__ import annotations

from raptorx_py.cli.common import add_common_options, parse_partition_spec, settings_from_args


def add_parser(sub) -> None:
    partition = sub.add_parser("partition", help="add, seal and un-seal partitions")
    psub = partition.add_subparsers(dest="partition_command", required=True)
    for name, text in (
        (
            "seal",
            "mark a partition complete: its file listing may be cached. Its statistics are "
            "checked against the files it holds and recomputed when they describe other "
            "files (after unseal, a change, and seal)",
        ),
        (
            "unseal",
            "mark a partition open again: its listing is never cached, and its files may "
            "change (its statistics are then used only while they describe its files)",
        ),
    ):
        cmd = psub.add_parser(name, help=text, description=text)
        cmd.add_argument("table", help="<database>.<table>")
        cmd.add_argument("partition", help="k1=v1[/k2=v2...]")
        add_common_options(cmd)
        cmd.set_defaults(func=cmd_partition_seal)
    text = (
        "register one partition of an EXTERNAL table (Hive's ALTER TABLE ADD PARTITION); "
        "its statistics are computed from the files it holds (none: an empty partition)"
    )
    add = psub.add_parser("add", help=text, description=text)
    add.add_argument("table", help="<database>.<table>")
    add.add_argument("partition", help="k1=v1[/k2=v2...]")
    add.add_argument(
        "--location",
        help="its directory (default: the table's location plus k1=v1/k2=v2...)",
    )
    add.add_argument("--seal", action="store_true", help="seal it too")
    add_common_options(add)
    add.set_defaults(func=cmd_partition_add)


def cmd_partition_seal(args) -> int:
    """Seal (``sealed=true``) or un-seal a partition: the listing cache caches only the
    listings of sealed partitions, and either change gives the partition a new version.
    Sealing verifies the partition's statistics against its files and recomputes them when
    they describe other files."""
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.names import parse_table_name
    from raptorx_py.tables.partition_statistics import seal_partition, unseal_partition

    settings = settings_from_args(args)
    with open_catalog(settings) as ms:
        table = ms.get_table(*parse_table_name(args.table))
        values = parse_partition_spec(table, args.partition)
        if args.partition_command == "seal":
            outcome = seal_partition(ms, settings, table.qualified_name, values)
            how = (
                "statistics recomputed from its files"
                if outcome.recomputed
                else "statistics verified: they describe its files"
            )
            print(f"sealed {table.qualified_name} partition {args.partition} ({how})")
        else:
            unseal_partition(ms, table.qualified_name, values)
            print(f"unsealed {table.qualified_name} partition {args.partition}")
    return 0


def cmd_partition_add(args) -> int:
    """Hive's ALTER TABLE ... ADD PARTITION for an external table, with statistics."""
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.names import parse_table_name
    from raptorx_py.tables.partition_statistics import add_partition

    settings = settings_from_args(args)
    with open_catalog(settings) as ms:
        table = ms.get_table(*parse_table_name(args.table))
        values = parse_partition_spec(table, args.partition)
        added = add_partition(
            ms, settings, table.qualified_name, values, location=args.location, seal=args.seal
        )
    sealed = ", sealed" if args.seal else ""
    print(
        f"added {table.qualified_name} partition {args.partition} at {added.location}: "
        f"{added.row_count} rows, statistics computed from its files{sealed}"
    )
    return 0
