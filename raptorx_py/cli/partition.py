"""``raptorx partition``: add, seal, un-seal and drop one partition of a table."""

from __future__ import annotations

from raptorx_py.cli.common import command, command_group, opened_table, parse_partition_spec


def add_parser(sub) -> None:
    """``raptorx partition`` and its commands."""
    psub = command_group(sub, "partition", help="add, seal, un-seal and drop partitions")
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
        with command(psub, name, cmd_partition_seal, text, described=True, table=True) as cmd:
            cmd.add_argument("partition", help="k1=v1[/k2=v2...]")
    text = (
        "register one partition of an EXTERNAL table (Hive's ALTER TABLE ADD PARTITION); "
        "its statistics are computed from the files it holds (none: an empty partition)"
    )
    with command(psub, "add", cmd_partition_add, text, described=True, table=True) as add:
        add.add_argument("partition", help="k1=v1[/k2=v2...]")
        add.add_argument(
            "--location",
            help="its directory (default: the table's location plus k1=v1/k2=v2...)",
        )
        add.add_argument("--seal", action="store_true", help="seal it too")
    text = (
        "remove one partition of an EXTERNAL table from the metastore (Hive's ALTER TABLE "
        "DROP PARTITION); its files, if any are left, stay where they are"
    )
    with command(psub, "drop", cmd_partition_drop, text, described=True, table=True) as drop:
        drop.add_argument("partition", help="k1=v1[/k2=v2...]")


def cmd_partition_seal(args) -> int:
    """Seal (``sealed=true``) or un-seal a partition: the listing cache caches only the
    listings of sealed partitions, and either change gives the partition a new version.
    Sealing verifies the partition's statistics against its files and recomputes them when
    they describe other files."""
    from raptorx_py.tables.partition_statistics import seal_partition, unseal_partition

    with opened_table(args) as (settings, ms, table):
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
    from raptorx_py.tables.partition_statistics import add_partition

    with opened_table(args) as (settings, ms, table):
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


def cmd_partition_drop(args) -> int:
    """Hive's ALTER TABLE ... DROP PARTITION for an external table (files are not touched)."""
    from raptorx_py.tables.partition_statistics import external_table

    with opened_table(args) as (_, ms, table):
        table = external_table(ms, table.qualified_name)
        ms.drop_partitions(table, [parse_partition_spec(table, args.partition)])
    print(f"dropped {table.qualified_name} partition {args.partition} (its files, if any, stay)")
    return 0
