"""``raptorx cache``: look at, clear, invalidate and warm this node's cache tiers."""

from __future__ import annotations

from raptorx_py import metrics
from raptorx_py.cli.common import (
    command,
    command_group,
    print_columns,
    print_json,
    settings_from_args,
)
from raptorx_py.cli.progress import ProgressBar, human_bytes


def add_parser(sub) -> None:
    """``raptorx cache`` and its commands."""
    from raptorx_py.cache_invalidations import TIERS  # light: the tiers load on use

    csub = command_group(
        sub,
        "cache",
        help="look at, clear, invalidate and warm this node's cache tiers",
        description="this node's cache tiers (" + ", ".join(TIERS) + "), whatever process "
        "filled them",
    )
    text = "each tier: location, entries, size, limit, hits / misses / evictions"
    with command(csub, "stats", cmd_cache_stats, text) as stats:
        stats.add_argument("--json", action="store_true", help="one JSON document")
    with command(csub, "clear", cmd_cache_clear, "empty every tier, or those named") as clear:
        clear.add_argument(
            "--tier", action="append", choices=TIERS, help="only this tier (repeatable)"
        )
    text = (
        "drop one table's (or partition's) entries from every tier after an out-of-band "
        "change: its metastore entries and listings, and the footer, block and fragment "
        "entries of the files it holds"
    )
    with command(csub, "invalidate", cmd_cache_invalidate, text, described=True, table=True) as inv:
        inv.add_argument("--partition", metavar="K=V[/K2=V2]", help="only these partitions")
    text = (
        "read a table's footers and column chunks into the footer and block caches, "
        "without Spark (as a query reading those columns under that filter would)"
    )
    with command(csub, "warm", cmd_cache_warm, text, described=True, table=True) as warm:
        warm.add_argument("--columns", metavar="A,B", help="only these columns (default: all)")
        warm.add_argument(
            "--where",
            metavar="CONDITIONS",
            help="conditions joined by AND, e.g. \"day >= date '2024-01-01' and qty > 45\": "
            "partitions and row groups they rule out are not read",
        )
        warm.add_argument("--no-progress", action="store_true", help="no progress bar")


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
    print_columns(lines)
    for t in tiers:
        if t.note:
            print(f"({t.note})")
    if not settings.metrics_directory:
        print("(hits, misses, evictions: set metrics.directory to collect every process's counts)")
    print("(-: held in the memory of each planning process, not countable from here)")
    return 0


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
