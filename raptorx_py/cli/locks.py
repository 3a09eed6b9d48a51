"""``raptorx locks show``: the Hive locks held in the metastore (Hive's SHOW LOCKS)."""

from __future__ import annotations

from raptorx_py.cli.common import command, command_group, print_columns, settings_from_args
from raptorx_py.errors import ConfigError


def add_parser(sub) -> None:
    """``raptorx locks`` and its command."""
    lsub = command_group(sub, "locks", help="inspect Hive locks held in the metastore")
    with command(lsub, "show", cmd_locks_show, "list held locks (Hive's SHOW LOCKS)") as show:
        show.add_argument("object", nargs="?", help="<db> or <db>.<table> (default: every lock)")
        show.add_argument(
            "--partition",
            action="append",
            metavar="K=V",
            help="one partition of the table (repeatable for k1=v1/k2=v2)",
        )
        show.add_argument(
            "--extended",
            action="store_true",
            help="also when, by whom and from where each lock was taken",
        )


def cmd_locks_show(args) -> int:
    """Hive's SHOW LOCKS: the held locks, all or on a database, table or partition."""
    from raptorx_py.metastore import open_metastore
    from raptorx_py.metastore.locks import format_ms, show_locks

    db, _, table = (args.object or "").partition(".")
    partition = "/".join(args.partition) if args.partition else None
    if partition is not None and not table:
        raise ConfigError("--partition needs a <db>.<table>", source="locks show")
    with open_metastore(settings_from_args(args).metastore_connection) as ms:
        rows = show_locks(ms, db or None, table or None, partition, extended=args.extended)
    header = ["LOCK_ID", "DATABASE", "TABLE", "PARTITION", "STATE", "TYPE", "TXN_ID"]
    if args.extended:
        header += ["ACQUIRED_AT", "LAST_HEARTBEAT", "USER", "HOST", "AGENT_INFO"]
    lines = [header]
    for r in rows:
        line = [
            str(r.lock_id),
            r.db,
            r.table or "",
            r.partition or "",
            r.state,
            r.lock_type.name,
            "" if r.txn_id is None else str(r.txn_id),
        ]
        if args.extended:
            line += [
                format_ms(r.acquired_at_ms),
                format_ms(r.last_heartbeat_ms),
                r.user or "",
                r.host or "",
                r.agent_info or "",
            ]
        lines.append(line)
    print_columns(lines)
    if not rows:
        print("(no locks)")
    return 0
