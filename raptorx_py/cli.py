"""raptorx: register and inspect metastore tables, show the configuration, load TPC-H.

    raptorx table register <db.table> <url> [--replace [--no-keep-seals]] [--seal]
                           [--partition-type k=type ...] [--no-partition-type-inference]
    raptorx table list [<db>] [--json]
    raptorx table show <db.table> [--partitions] [--json]
    raptorx table analyze <db.table> [--partition k=v[/k2=v2]]
    raptorx table repair <db.table> [--seal]
    raptorx table clean <db.table>
    raptorx config show [--sources] [--json]
    raptorx cache stats [--json]
    raptorx cache clear [--tier T ...]
    raptorx cache invalidate <db.table> [--partition k=v[/k2=v2]]
    raptorx cache warm <db.table> [--columns a,b] [--where "..."] [--no-progress]
    raptorx partition seal|unseal <db.table> <k=v[/k2=v2]>
    raptorx partition add <db.table> <k=v[/k2=v2]> [--location URL] [--seal]
    raptorx tpch load --scale S --warehouse URL
    raptorx locks show [<db>[.<table>]] [--partition k=v ...] [--extended]
    raptorx connect-server [--port N] [--host H]   (Spark Connect server with the jar)
    raptorx jar [--path | --flags]   (the native jar, and the flags that start Spark with it)
    raptorx --version   (the package, its jar's version and build, the pyspark it needs)

Every command but connect-server and jar takes ``--conf-dir DIR`` and ``-p/--property name=value``
(repeatable). An error raptorx_py raises on purpose is printed as one line naming what was
wrong, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from raptorx_py import metrics
from raptorx_py.errors import ConfigError, RaptorxError, SchemaError


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


def cmd_table_register(args) -> int:
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.tables.table_registration import register_external_table

    settings = settings_from_args(args)
    with open_catalog(settings, create=True) as ms:
        table = register_external_table(
            ms,
            settings,
            args.table,
            args.url,
            replace=args.replace,
            sealed=args.seal,
            keep_seals=args.keep_seals,
            partition_types=_partition_types(args.partition_type),
            infer_partition_types=args.partition_type_inference,
        )
        n = len(ms.list_partitions(table)) if table.is_partitioned else 0
    keys = ", ".join(f"{k.name} {k.type}" for k in table.partition_keys) or "none"
    print(
        f"registered {table.qualified_name} (EXTERNAL) at {table.location}: "
        f"{len(table.columns)} columns, partition keys: {keys}, {n} partitions"
    )
    return 0


def _partition_types(specs) -> dict[str, str]:
    """``["k=date", "n=decimal(10,2)"]`` -> ``{"k": "date", "n": "decimal(10,2)"}``."""
    out = {}
    for spec in specs or ():
        key, sep, hive_type = spec.partition("=")
        if not sep or not key or not hive_type:
            raise SchemaError(f"--partition-type '{spec}' is not of the form <key>=<type>")
        out[key] = hive_type
    return out


def cmd_table_list(args) -> int:
    from raptorx_py.metastore.configured import open_catalog

    settings = settings_from_args(args)
    with open_catalog(settings) as ms:
        databases = [args.database] if args.database else ms.list_databases()
        names = [f"{db}.{t}" for db in databases for t in ms.list_tables(db)]
    if args.json:
        print_json({"metastore": metastore_named(settings), "tables": names})
        return 0
    for name in names:
        print(name)
    if not names:
        where = f"database {args.database} of " if args.database else ""
        print(f"(no tables in {where}the metastore {metastore_named(settings)})")
    return 0


def metastore_named(settings) -> str:
    """The configured metastore: the Hive Metastore URI, or the database URL (masked)."""
    if settings.metastore_uri:
        return f"{settings.metastore_uri} (hive.metastore.uri)"
    return masked_url(settings.metastore_url)


def masked_url(url: str) -> str:
    """A metastore URL with its password replaced by ``***``."""
    from raptorx_py.config.loader import mask_url_password

    return mask_url_password(url, hidden="***")


def cmd_table_show(args) -> int:
    from raptorx_py.hive.table_parameters import NUM_ROWS_PARAM
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.names import parse_table_name

    with open_catalog(settings_from_args(args)) as ms:
        table = ms.get_table(*parse_table_name(args.table))
        parts = ms.list_partitions(table) if table.is_partitioned else []
    if args.json:
        print_json(table_record(table, parts, with_partitions=args.partitions))
        return 0
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
        print(f"{table.parameters.get(NUM_ROWS_PARAM, '?')} rows")
    return 0


def table_record(table, parts, *, with_partitions: bool) -> dict:
    """``raptorx table show --json``: what the text lists, as one JSON object."""
    from raptorx_py.hive.partition_names import partition_name
    from raptorx_py.hive.table_parameters import NUM_ROWS_PARAM

    rows = table.parameters.get(NUM_ROWS_PARAM)
    record = {
        "name": table.qualified_name,
        "type": table.table_type,
        "location": table.location,
        "columns": [{"name": c.name, "type": c.type} for c in table.columns],
        "partition_keys": [{"name": k.name, "type": k.type} for k in table.partition_keys],
        "partitions": len(parts) if table.is_partitioned else None,
        "rows": (
            sum(p.row_count or 0 for p in parts)
            if table.is_partitioned
            else (int(rows) if rows and rows.isdigit() else None)
        ),
    }
    if with_partitions:
        record["partition_list"] = [
            {
                "name": partition_name(table.partition_keys, p.values),
                "values": list(p.values),
                "rows": p.row_count,
                "location": p.location,
            }
            for p in parts
        ]
    return record


def print_json(value) -> None:
    """One JSON document on stdout (``--json``): indented, keys in the order built."""
    print(json.dumps(value, indent=2, default=str))


def cmd_table_clean(args) -> int:
    from raptorx_py.metastore import open_metastore
    from raptorx_py.names import parse_table_name
    from raptorx_py.tables.cleaner import clean_table

    settings = settings_from_args(args)
    with open_metastore(settings) as ms:
        report = clean_table(ms, settings, *parse_table_name(args.table))
    for txn in report.expired_txns:
        print(f"expired transaction {txn} (no heartbeat for {settings.txn_timeout:g}s)")
    for url in report.removed_staging:
        print(f"removed staging {url}")
    for url in report.removed_aborted:
        print(f"removed aborted {url}")
    for url in report.left_unrecorded:
        print(
            f"left {url}: no record of this metastore says one of its writes created it "
            f"(another metastore's over the same location, or written before records were kept)"
        )
    for url in report.left_foreign:
        print(f"left {url}: it holds files no write of this metastore placed")
    print(f"cleaned {report.table}: {len(report.removed)} directories removed")
    return 0


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


def add_partition_cli(sub) -> None:
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


def cmd_table_analyze(args) -> int:
    """Hive's ANALYZE TABLE ... [PARTITION (...)] COMPUTE STATISTICS."""
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.names import parse_table_name
    from raptorx_py.tables.partition_statistics import analyze_partition, analyze_table

    settings = settings_from_args(args)
    with open_catalog(settings) as ms:
        table = ms.get_table(*parse_table_name(args.table))
        if args.partition:
            values = parse_partition_spec(table, args.partition)
            p = analyze_partition(ms, settings, table.qualified_name, values)
            print(f"analyzed {table.qualified_name} partition {args.partition}: {p.row_count} rows")
            return 0
        done = analyze_table(ms, settings, table.qualified_name)
    what = f"{len(done)} partitions" if table.is_partitioned else "the table"
    print(f"analyzed {table.qualified_name}: statistics of {what} recomputed from their files")
    return 0


def cmd_table_repair(args) -> int:
    """Hive's MSCK REPAIR TABLE: register the partition directories the metastore lacks."""
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.names import parse_table_name
    from raptorx_py.tables.partition_statistics import repair_table

    settings = settings_from_args(args)
    with open_catalog(settings) as ms:
        table = ms.get_table(*parse_table_name(args.table))
        report = repair_table(ms, settings, table.qualified_name, seal=args.seal)
    for name in report.added:
        print(f"added partition {name}")
    for name in report.without_files:
        print(f"partition {name} is registered but its directory holds no data file (kept)")
    print(f"repaired {table.qualified_name}: {len(report.added)} partitions added")
    return 0


def cmd_locks_show(args) -> int:
    """Hive's SHOW LOCKS: the held locks, all or on a database, table or partition."""
    from raptorx_py.metastore import open_metastore
    from raptorx_py.metastore.locks import format_ms, show_locks

    db, _, table = (args.object or "").partition(".")
    partition = "/".join(args.partition) if args.partition else None
    if partition is not None and not table:
        raise ConfigError("--partition needs a <db>.<table>", source="locks show")
    with open_metastore(settings_from_args(args)) as ms:
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
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    if not rows:
        print("(no locks)")
    return 0


def add_locks_cli(sub) -> None:
    locks = sub.add_parser("locks", help="inspect Hive locks held in the metastore")
    lsub = locks.add_subparsers(dest="locks_command", required=True)
    show = lsub.add_parser("show", help="list held locks (Hive's SHOW LOCKS)")
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
    add_common_options(show)
    show.set_defaults(func=cmd_locks_show)


def cmd_cache_stats(args) -> int:
    """Each tier on this node: where, how much, its bound, and its counters."""
    from raptorx_py.cache_management import cache_stats

    settings = settings_from_args(args)
    tiers = cache_stats(settings)
    if args.json:
        print_json(
            {
                "counters": "metrics sink" if settings.metrics_directory else None,
                "tiers": [t.as_dict() for t in tiers],
            }
        )
        return 0
    header = ["TIER", "ON", "ENTRIES", "SIZE", "LIMIT", "HITS", "MISSES", "EVICTIONS", "LOCATION"]
    lines = [header]
    for t in tiers:
        lines.append(
            [
                t.tier,
                "yes" if t.enabled else "no",
                "-" if t.entries is None else str(t.entries),
                "-" if t.bytes is None else human_bytes(t.bytes),
                human_bytes(t.limit) if t.limit_unit == "bytes" else f"{t.limit} {t.limit_unit}",
                *("-" if v is None else str(v) for v in (t.hits, t.misses, t.evictions)),
                t.location,
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    for t in tiers:
        if t.note:
            print(f"({t.note})")
    if not settings.metrics_directory:
        print("(hits, misses, evictions: set metrics.directory to collect every process's counts)")
    print("(-: held in the memory of each planning process, not countable from here)")
    return 0


def human_bytes(n: int | None) -> str:
    """``1536`` -> ``1.5 KiB``."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # not reached


def cmd_cache_clear(args) -> int:
    from raptorx_py.cache_invalidations import TIERS
    from raptorx_py.cache_management import clear_caches

    report = clear_caches(settings_from_args(args), args.tier or TIERS)
    for tier, n in report.removed.items():
        print(f"{tier}: {n} entries removed")
    if report.posted:
        memory = ", ".join("footer memory" if t == "footer" else t for t in report.posted)
        print(f"{memory}: cleared in every process of this node when it next plans or reads")
    return 0


def cmd_cache_invalidate(args) -> int:
    from raptorx_py.cache_management import invalidate_table

    settings = settings_from_args(args)
    report = invalidate_table(settings, args.table, args.partition)
    metrics.flush(settings.metrics_directory)
    what = f"{len(report.partitions)} partition(s)" if args.partition else "the whole table"
    print(
        f"invalidated {report.table} ({what}, {report.files} data files): "
        + ", ".join(f"{n} {tier} entries" for tier, n in report.removed.items())
        + " removed; its metastore, listing and footer-memory entries are dropped in every "
        "process of this node when it next plans or reads"
    )
    return 0


def cmd_cache_warm(args) -> int:
    from raptorx_py.cache_management import warm_table

    settings = settings_from_args(args)
    columns = [c for c in (args.columns or "").split(",") if c.strip()] or None
    with ProgressBar(f"warm {args.table}", enabled=not args.no_progress) as progress:
        report = warm_table(
            settings, args.table, columns=columns, where=args.where, progress=progress
        )
    # Its counts reach the metrics sink, as a query's do (`raptorx cache stats` shows them).
    metrics.flush(settings.metrics_directory)
    counted = report.counted
    served = counted.get("block_cache.bytes_from_cache", 0)
    footers_cached = counted.get("footer_cache.hits_memory", 0) + counted.get(
        "footer_cache.hits_disk", 0
    )
    print(
        f"warmed {report.table}: {report.files} files, {report.row_groups} row groups "
        f"({report.row_groups_pruned} pruned), {report.column_chunks} column chunks of "
        f"{human_bytes(report.bytes_read)}; {human_bytes(report.bytes_from_store)} fetched "
        f"from the store in {counted.get('block_cache.remote_requests', 0)} requests, "
        f"{human_bytes(served)} read from the block cache; footers: "
        f"{report.footers_loaded} loaded, {footers_cached} cached"
    )
    return 0


class ProgressBar:
    """A ``rich`` bar of bytes on a terminal (none when stdout is not one, or not
    ``enabled``); as a context manager, it gives ``warm_table`` its ``progress``."""

    def __init__(self, label: str, *, enabled: bool) -> None:
        self.label, self.enabled = label, enabled
        self._bar: Any = None  # a rich Progress while on a terminal
        self._task: Any = None

    def __enter__(self):
        from rich.console import Console

        if not self.enabled or not Console().is_terminal:
            return None
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

        self._bar = Progress(TextColumn(self.label), BarColumn(), DownloadColumn())
        self._bar.__enter__()
        self._task = self._bar.add_task(self.label, total=None)
        return self._advance

    def _advance(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def add_cache_cli(sub) -> None:
    from raptorx_py.cache_invalidations import TIERS  # light: the tiers load on use

    cache = sub.add_parser(
        "cache",
        help="look at, clear, invalidate and warm this node's cache tiers",
        description="this node's cache tiers (" + ", ".join(TIERS) + "), whatever process "
        "filled them",
    )
    csub = cache.add_subparsers(dest="cache_command", required=True)
    stats = csub.add_parser(
        "stats",
        help="each tier: location, entries, size, limit, hits / misses / evictions",
    )
    stats.add_argument("--json", action="store_true", help="one JSON document")
    add_common_options(stats)
    stats.set_defaults(func=cmd_cache_stats)
    clear = csub.add_parser("clear", help="empty every tier, or those named")
    clear.add_argument("--tier", action="append", choices=TIERS, help="only this tier (repeatable)")
    add_common_options(clear)
    clear.set_defaults(func=cmd_cache_clear)
    text = (
        "drop one table's (or partition's) entries from every tier after an out-of-band "
        "change: its metastore entries and listings, and the footer, block and fragment "
        "entries of the files it holds"
    )
    inv = csub.add_parser("invalidate", help=text, description=text)
    inv.add_argument("table", help="<database>.<table>")
    inv.add_argument("--partition", metavar="K=V[/K2=V2]", help="only these partitions")
    add_common_options(inv)
    inv.set_defaults(func=cmd_cache_invalidate)
    text = (
        "read a table's footers and column chunks into the footer and block caches, "
        "without Spark (as a query reading those columns under that filter would)"
    )
    warm = csub.add_parser("warm", help=text, description=text)
    warm.add_argument("table", help="<database>.<table>")
    warm.add_argument("--columns", metavar="A,B", help="only these columns (default: all)")
    warm.add_argument(
        "--where",
        metavar="CONDITIONS",
        help="conditions joined by AND, e.g. \"day >= date '2024-01-01' and qty > 45\": "
        "partitions and row groups they rule out are not read",
    )
    warm.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common_options(warm)
    warm.set_defaults(func=cmd_cache_warm)


EXAMPLES = """\
examples:
  raptorx table list                                    tables in the metastore
  raptorx table show tpch.lineitem --partitions         columns, partitions, rows
  raptorx table register sales.events s3://bucket/warehouse/events
  raptorx config show --sources                         which files and metastore are used
  raptorx config show -p cache.enabled=true             every property, with one overridden
  raptorx tpch load --scale 0.1 --warehouse ~/tpch-data
  raptorx cache stats                                   each cache tier on this node
  raptorx cache invalidate sales.events --partition day=2024-01-01

every command takes --conf-dir DIR and -p NAME=VALUE; `raptorx <command> --help` for more.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raptorx",
        description=__doc__.split("\n\n")[0],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=VersionAction,
        help="show the package's version, its jar's version and build, and the pyspark it "
        "was built against, then exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    table = sub.add_parser("table", help="register and inspect tables")
    tsub = table.add_subparsers(dest="table_command", required=True)
    reg = tsub.add_parser(
        "register", help="register an existing Hive-layout directory as an EXTERNAL table"
    )
    reg.add_argument("table", help="<database>.<table>")
    reg.add_argument("url", help="file:///path or s3://bucket/prefix")
    reg.add_argument(
        "--replace",
        action="store_true",
        help="replace an existing table (every partition's statistics are computed again; "
        "partitions sealed before stay sealed unless --no-keep-seals)",
    )
    reg.add_argument(
        "--no-keep-seals",
        dest="keep_seals",
        action="store_false",
        help="with --replace: do not keep the replaced table's seals",
    )
    reg.add_argument(
        "--seal", action="store_true", help="seal every partition (its listing may be cached)"
    )
    reg.add_argument(
        "--partition-type",
        action="append",
        metavar="KEY=TYPE",
        help="the type of a partition key (repeatable), instead of the type "
        "inferred from its directory values as Spark does",
    )
    reg.add_argument(
        "--no-partition-type-inference",
        dest="partition_type_inference",
        action="store_false",
        help="partition keys without --partition-type are strings (Spark's "
        "spark.sql.sources.partitionColumnTypeInference.enabled=false)",
    )
    add_common_options(reg)
    reg.set_defaults(func=cmd_table_register)
    lst = tsub.add_parser("list", help="list tables")
    lst.add_argument("database", nargs="?")
    lst.add_argument("--json", action="store_true", help="one JSON document")
    add_common_options(lst)
    lst.set_defaults(func=cmd_table_list)
    show = tsub.add_parser("show", help="describe a table")
    show.add_argument("table")
    show.add_argument("--partitions", action="store_true", help="list every partition")
    show.add_argument("--json", action="store_true", help="one JSON document")
    add_common_options(show)
    show.set_defaults(func=cmd_table_show)
    text = (
        "recompute the statistics of an EXTERNAL table, or of one partition, from the files "
        "they hold now (Hive's ANALYZE TABLE ... COMPUTE STATISTICS): statistics are used "
        "only while they describe a partition's files"
    )
    analyze = tsub.add_parser("analyze", help=text, description=text)
    analyze.add_argument("table", help="<database>.<table>")
    analyze.add_argument("--partition", metavar="K=V[/K2=V2]", help="only this partition")
    add_common_options(analyze)
    analyze.set_defaults(func=cmd_table_analyze)
    text = (
        "register the partition directories under an EXTERNAL table's location that the "
        "metastore does not have, with statistics computed from their files (Hive's MSCK "
        "REPAIR TABLE); says what it added"
    )
    repair = tsub.add_parser("repair", help=text, description=text)
    repair.add_argument("table", help="<database>.<table>")
    repair.add_argument("--seal", action="store_true", help="seal the partitions it adds")
    add_common_options(repair)
    repair.set_defaults(func=cmd_table_repair)
    clean = tsub.add_parser(
        "clean",
        help="remove the files of aborted writes and the staging "
        "directories of finished ones (managed tables)",
    )
    clean.add_argument("table", help="<database>.<table>")
    add_common_options(clean)
    clean.set_defaults(func=cmd_table_clean)

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

    add_partition_cli(sub)
    add_cache_cli(sub)

    add_tpch_cli(sub)
    add_locks_cli(sub)
    from raptorx_py.connect import add_cli as add_connect_cli

    add_connect_cli(sub)
    add_jar_cli(sub)
    return parser


class VersionAction(argparse.Action):
    """``--version``: ``version_text()``, computed only when asked."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())  # to stdout, as argparse's own version action does
        parser.exit()


def version_text() -> str:
    """The package's version, then the jar ``tiered_session()`` would use (its version, build
    identity, the pyspark it was compiled against, its path), then the installed pyspark."""
    from importlib.metadata import PackageNotFoundError, version

    from raptorx_py import native

    lines = [f"raptorx {package_version()}"]
    jar = native.jar_path()
    if jar is None:
        looked = ", ".join(str(p) for p in native.jar_candidates())
        lines.append(f"jar: none found (looked at {looked}); tiered_hive reads without pushdown")
    else:
        try:
            info = native.jar_info(jar)
            lines.append(
                f"jar {info.version} (build {info.build_id}, built against pyspark "
                f"{info.pyspark_version}): {jar}"
            )
        except RaptorxError as e:
            lines.append(f"jar: {e}")
    try:
        lines.append(f"pyspark {version('pyspark')} installed")
    except PackageNotFoundError:
        lines.append("pyspark: not installed")
    return "\n".join(lines)


def add_jar_cli(subparsers) -> None:
    text = (
        "print the native jar's path and the flags that start pyspark or spark-submit with "
        "it (--jars and --driver-class-path)"
    )
    cmd = subparsers.add_parser("jar", help=text, description=text)
    only = cmd.add_mutually_exclusive_group()
    only.add_argument("--path", action="store_true", help="print the jar's path only")
    only.add_argument(
        "--flags", action="store_true", help="print the --jars/--driver-class-path line only"
    )
    cmd.set_defaults(func=cmd_jar)


def cmd_jar(args) -> int:
    from raptorx_py import native
    from raptorx_py.errors import NativeJarError

    jar = native.jar_path()
    if jar is None:
        looked = ", ".join(str(p) for p in native.jar_candidates())
        raise NativeJarError(f"no raptorx jar at {looked}: {native.BUILD_HINT}")
    if not args.flags:
        print(jar)
    if not args.path:
        print(native.submit_flags(jar))
    return 0


def package_version() -> str:
    """raptorx_py's installed version (``raptorx --version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("raptorx_py")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def add_tpch_cli(subparsers) -> None:
    """Add ``tpch load --scale S --warehouse URL [--database D] [--work-dir DIR]
    [--conf-dir DIR] [-p name=value]`` to the ``raptorx`` command's subparsers."""
    from raptorx_py.config.paths import default_tpch_work_dir

    tpch = subparsers.add_parser("tpch", help="TPC-H data: generate, copy and register")
    tsub = tpch.add_subparsers(dest="tpch_command", required=True)
    load = tsub.add_parser(
        "load",
        help="generate TPC-H with tpchgen-cli, copy it to <warehouse>/<database>.db/ "
        "and register its tables as EXTERNAL",
    )
    load.add_argument("--scale", type=float, required=True, help="scale factor, e.g. 0.01 or 1")
    load.add_argument(
        "--warehouse",
        required=True,
        help="warehouse URL: file:///path, a local path or s3://bucket/prefix",
    )
    load.add_argument("--database", default="tpch", help="database name (default: tpch)")
    load.add_argument(
        "--work-dir",
        help=f"where to generate and cache the data locally (default: {default_tpch_work_dir()})",
    )
    load.add_argument("--no-progress", action="store_true", help="no progress bar")
    load.add_argument(
        "--no-seal",
        action="store_true",
        help="register the partitions open (not sealed): their listings are then never cached",
    )
    load.add_argument(
        "--managed",
        action="store_true",
        help="write MANAGED tables through the Spark write path instead (starts "
        "a local Spark session; use a --database of their own)",
    )
    add_common_options(load)
    load.set_defaults(func=cmd_tpch_load)


def cmd_tpch_load(args) -> int:
    from raptorx_py.tpch.generate import format_scale
    from raptorx_py.tpch.load import load_tpch, load_tpch_managed
    from raptorx_py.tpch.queries import TABLES

    settings = settings_from_args(args)
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
        )
    print(
        f"loaded TPC-H SF {format_scale(args.scale)}: "
        + ", ".join(f"{args.database}.{t}" for t in urls)
        + f" at {urls[TABLES[0]].rsplit('/', 1)[0]}"
    )
    return 0


#: The exit status of a command whose reader went away (128 + SIGPIPE, as a shell reports
#: ``seq 1 100000 | head``'s).
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # here, so a closed pipe is seen here and not at exit
        return status
    except RaptorxError as e:
        print(f"raptorx: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader stopped reading (``raptorx table show db.t --partitions | head``): stop
        # quietly, as Unix tools do. stdout goes to /dev/null so that Python's own flush at
        # exit does not fail on the closed pipe again.
        quiet_stdout()
        return EXIT_BROKEN_PIPE


def quiet_stdout() -> None:
    """Point stdout at /dev/null (at the file descriptor; a stdout with none is left)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture): nothing will flush to a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
