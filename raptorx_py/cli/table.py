"""``raptorx table``: register, list, show, analyze, repair and clean tables."""

from __future__ import annotations

from raptorx_py.cli.common import (
    command,
    command_group,
    metastore_named,
    opened_table,
    parse_partition_spec,
    print_json,
    settings_from_args,
)
from raptorx_py.errors import SchemaError


def add_parser(sub) -> None:
    """``raptorx table`` and its commands."""
    tsub = command_group(sub, "table", help="register and inspect tables")
    with command(
        tsub,
        "register",
        cmd_table_register,
        "register an existing Hive-layout directory as an EXTERNAL table",
        table=True,
    ) as reg:
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
    with command(tsub, "list", cmd_table_list, "list tables") as lst:
        lst.add_argument("database", nargs="?")
        lst.add_argument("--json", action="store_true", help="one JSON document")
    with command(tsub, "show", cmd_table_show, "describe a table") as show:
        show.add_argument("table")
        show.add_argument("--partitions", action="store_true", help="list every partition")
        show.add_argument(
            "--check",
            action="store_true",
            help="list each partition's location (one listing each) and report those absent "
            "from storage (location gone, or no data file where the metastore records some), "
            "which reads fail on; exits 1 when one is",
        )
        show.add_argument("--json", action="store_true", help="one JSON document")
    text = (
        "recompute the statistics of an EXTERNAL table, or of one partition, from the files "
        "they hold now (Hive's ANALYZE TABLE ... COMPUTE STATISTICS): statistics are used "
        "only while they describe a partition's files"
    )
    with command(tsub, "analyze", cmd_table_analyze, text, described=True, table=True) as cmd:
        cmd.add_argument("--partition", metavar="K=V[/K2=V2]", help="only this partition")
    text = (
        "register the partition directories under an EXTERNAL table's location that the "
        "metastore does not have, with statistics computed from their files (Hive's MSCK "
        "REPAIR TABLE); says what it added"
    )
    with command(tsub, "repair", cmd_table_repair, text, described=True, table=True) as cmd:
        cmd.add_argument("--seal", action="store_true", help="seal the partitions it adds")
        cmd.add_argument(
            "--drop-missing",
            action="store_true",
            help="also drop the registered partitions absent from storage (location gone, or "
            "no data file where the metastore records some), which reads fail on (Hive's "
            "SYNC PARTITIONS)",
        )
    text = (
        "remove the files of aborted writes and the staging directories of finished ones "
        "(managed tables)"
    )
    with command(tsub, "clean", cmd_table_clean, text, table=True):
        pass


def cmd_table_register(args) -> int:
    from raptorx_py.metastore.configured import open_catalog
    from raptorx_py.tables.table_registration import register_external_table

    settings = settings_from_args(args)
    with open_catalog(settings.metastore_connection, create=True) as ms:
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
        f"{table.storage_format} files, {len(table.columns)} columns, partition keys: {keys}, "
        f"{n} partitions"
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
    with open_catalog(settings.metastore_connection) as ms:
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


def cmd_table_show(args) -> int:
    from raptorx_py.hive.partition_names import partition_name
    from raptorx_py.hive.table_parameters import NUM_ROWS_PARAM
    from raptorx_py.storage.absent_partitions import check_location

    with opened_table(args) as (settings, ms, table):
        parts = ms.list_partitions(table) if table.is_partitioned else []
    absent: dict[str, str] = {}  # location -> why it is absent
    if args.check:
        places = [(p.location, p.parameters) for p in parts] or [(table.location, table.parameters)]
        for url, params in places:
            reason = check_location(settings, url, params)
            if reason is not None:
                absent[url] = reason
    if args.json:
        record = table_record(table, parts, with_partitions=args.partitions or args.check)
        if args.check:
            for p in record.get("partition_list", []):
                p["absent"] = absent.get(p["location"])
            record["absent"] = len(absent)
        print_json(record)
        return 1 if absent else 0
    others = sorted({p.storage_format for p in parts if p.storage_format})
    print(
        f"{table.qualified_name} ({table.table_type}) at {table.location}, "
        f"{table.storage_format} files"
        + (f" ({' and '.join(others)} in some partitions)" if others else "")
    )
    for c in table.columns:
        print(f"  {c.name} {c.type}")
    for k in table.partition_keys:
        print(f"  {k.name} {k.type} (partition key)")
    if table.is_partitioned:
        rows = sum(p.row_count or 0 for p in parts)
        print(f"{len(parts)} partitions, {rows} rows")
        if args.partitions:
            for p in parts:
                mark = f"  ABSENT: {absent[p.location]}" if p.location in absent else ""
                own = f"  {p.storage_format}" if p.storage_format else ""
                print(
                    f"  {'/'.join(str(v) for v in p.values)}  rows={p.row_count}  "
                    f"{p.location}{own}{mark}"
                )
    else:
        print(f"{table.parameters.get(NUM_ROWS_PARAM, '?')} rows")
    if args.check:
        for p in parts:
            if p.location in absent and not args.partitions:
                name = partition_name(table.partition_keys, p.values)
                print(f"  {name}  {p.location}  ABSENT: {absent[p.location]}")
        if not parts and absent:
            print(f"  {table.location}  ABSENT: {absent[table.location]}")
        checked = f"{len(parts)} partitions" if table.is_partitioned else "the table's location"
        print(
            f"checked {checked}: {len(absent)} absent from storage"
            + (
                " (queries fail on them: `raptorx partition drop`, `raptorx table repair "
                "--drop-missing`, or hive.ignore-absent-partitions=true)"
                if absent
                else ""
            )
        )
    return 1 if absent else 0


def table_record(table, parts, *, with_partitions: bool) -> dict:
    """``raptorx table show --json``: what the text lists, as one JSON object."""
    from raptorx_py.hive.partition_names import partition_name
    from raptorx_py.hive.table_parameters import NUM_ROWS_PARAM

    rows = table.parameters.get(NUM_ROWS_PARAM)
    record = {
        "name": table.qualified_name,
        "type": table.table_type,
        "location": table.location,
        "format": table.storage_format,
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
                "format": table.format_of(p),
            }
            for p in parts
        ]
    return record


def cmd_table_analyze(args) -> int:
    """Hive's ANALYZE TABLE ... [PARTITION (...)] COMPUTE STATISTICS."""
    from raptorx_py.tables.partition_statistics import analyze_partition, analyze_table

    with opened_table(args) as (settings, ms, table):
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
    from raptorx_py.tables.partition_statistics import repair_table

    with opened_table(args) as (settings, ms, table):
        report = repair_table(
            ms, settings, table.qualified_name, seal=args.seal, drop_missing=args.drop_missing
        )
    for name in report.added:
        print(f"added partition {name}")
    for name in report.without_files:
        if name in report.dropped:
            print(f"dropped partition {name}: absent from storage")
        else:
            print(f"partition {name} is registered but its directory holds no data file (kept)")
    dropped = f", {len(report.dropped)} dropped" if args.drop_missing else ""
    print(f"repaired {table.qualified_name}: {len(report.added)} partitions added{dropped}")
    return 0


def cmd_table_clean(args) -> int:
    from raptorx_py.metastore import open_metastore
    from raptorx_py.names import parse_table_name
    from raptorx_py.tables.cleaner import clean_table

    settings = settings_from_args(args)
    with open_metastore(settings.metastore_connection) as ms:
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
