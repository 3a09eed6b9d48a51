"""Load TPC-H into a warehouse and register it: ``raptorx tpch load --scale S --warehouse URL``.

``load_tpch`` generates the data locally (``generate.generate_tpch``, cached), copies each
table's Hive-layout directory to ``<warehouse>/<database>.db/<table>/`` through
``raptorx_py.storage.fs.filesystem_for`` (``file://`` or ``s3://``), and registers every table
as EXTERNAL in the metastore named by the settings.

The copy is skipped when the warehouse already holds this very generation: a hidden marker,
``<warehouse>/<database>.db/_tpch_load.json``, written after the last file, records the
generation and every file with its size, and the copy is redone unless every file is there
with that size. A copy replaces the table directories: whatever was under
``<warehouse>/<database>.db/<table>/`` before is deleted first, so no stale file of another
scale can remain.

``load_tpch_managed`` instead writes every table as a MANAGED table through the Spark write
path (``df.write.format("tiered_hive").mode("overwrite")``): insert-only ACID directories,
write ids, statistics from the written files (``raptorx tpch load --managed``). The
benchmark uses the external load.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from raptorx_py.config.paths import default_tpch_work_dir
from raptorx_py.config.settings import Settings
from raptorx_py.errors import AlreadyExistsError, MetastoreNotFoundError, translate_storage_error
from raptorx_py.hive.model import EXTERNAL_TABLE
from raptorx_py.hive.storage_formats import ORC, PARQUET
from raptorx_py.metastore import open_metastore
from raptorx_py.metastore.configured import open_catalog
from raptorx_py.storage.fs import as_url, filesystem_for, split_url
from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tpch.generate import (
    TpchGenerationError,
    format_scale,
    generate_tpch,
    read_marker,
)
from raptorx_py.tpch.orc_copy import orc_copy
from raptorx_py.tpch.queries import PARTITION_COLUMNS, TABLES, parquet_reader

LOAD_MARKER = "_tpch_load.json"
COPY_THREADS = 8


def load_tpch(
    scale: float,
    warehouse_url: str,
    settings: Settings,
    *,
    database: str = "tpch",
    work_dir: str | None = None,
    progress: bool = True,
    seal: bool = True,
    only_own_tables: bool = False,
    storage_format: str = PARQUET,
) -> dict[str, str]:
    """Generate TPC-H at ``scale``, copy it under ``warehouse_url``, register it; table -> URL.

    - ``storage_format``: ``PARQUET``, or ``ORC`` (the generation rewritten as ORC files in
      the same layout, ``orc_copy``, beside it in ``<work_dir>/sf<scale>-orc``).

    - ``work_dir``: where to generate (``<work_dir>/sf<scale>``); default
      ``config.paths.default_tpch_work_dir()``. A complete generation already there is reused.
    - ``warehouse_url``: ``file:///...``, a local path, or ``s3://bucket/prefix``. Tables land in
      ``<warehouse_url>/<database>.db/<table>/`` (Hive layout, see ``generate``).
    - Every table is registered with ``register_external_table(..., replace=True)`` as
      ``<database>.<table>`` after ``create_database(database)``.
    - ``seal``: register every partition (and every unpartitioned table) sealed
      (``sealed=true``): generated TPC-H data never changes, so every month is closed and
      the file-listing cache may keep the listings.
    - ``progress``: show a ``rich`` progress bar (bytes copied) and step messages.
    - ``only_own_tables``: replace only TPC-H tables an earlier load into this very warehouse
      registered (a table of a TPC-H name whose location is ``<warehouse>/<database>.db/<t>``);
      any other table of such a name fails the load with ``AlreadyExistsError`` before a
      file is copied. Tables of other names are never touched either way.

    Storage failures raise ``raptorx_py.errors.StorageError`` naming the URL; generation
    failures ``generate.TpchGenerationError``.
    """

    say = _printer(progress)
    local_root = Path(work_dir or default_tpch_work_dir()).expanduser() / f"sf{format_scale(scale)}"
    generate_tpch(scale, str(local_root), progress=say)
    generation = read_marker(str(local_root))
    if generation is None:
        raise TpchGenerationError(f"the generation in {local_root} left no readable marker")

    db_url = f"{as_url(warehouse_url)}/{database}.db"
    if only_own_tables:
        check_own_tables(settings, database, db_url)
    fs, db_path = filesystem_for(db_url, settings)
    described = {k: generation[k] for k in ("scale", "layout_version", "generator")}
    suffix = ".parquet"
    if storage_format == ORC:
        orc_root = local_root.with_name(f"{local_root.name}-orc")
        orc_copy(str(local_root), str(orc_root), described, progress=say)
        local_root, suffix = orc_root, ".orc"
        described = {**described, "format": ORC}
    local_files = sorted(p for t in TABLES for p in (local_root / t).rglob(f"*{suffix}"))
    files = {p.relative_to(local_root).as_posix(): p.stat().st_size for p in local_files}
    wanted = {"generation": described, "files": files}

    if _already_loaded(fs, db_path, db_url, wanted):
        say(f"TPC-H SF {format_scale(scale)} already in {db_url}; not copying")
    else:
        _copy(fs, db_path, db_url, local_root, files, progress)
        _write_json(fs, f"{db_path}/{LOAD_MARKER}", db_url, wanted)

    urls = {t: f"{db_url}/{t}" for t in TABLES}
    with open_catalog(settings.metastore_connection, create=True) as metastore:
        metastore.create_database(database, location=db_url)
        for table in TABLES:
            say(f"registering {database}.{table} at {urls[table]}")
            register_external_table(
                metastore, settings, f"{database}.{table}", urls[table], replace=True, sealed=seal
            )
    return urls


def check_own_tables(settings: Settings, database: str, db_url: str) -> None:
    """Fail (``AlreadyExistsError``) when ``<database>`` holds a table of a TPC-H name that a
    load into ``db_url`` did not register: its location is elsewhere, so it is someone
    else's table and a load must not replace it."""

    try:
        metastore = open_catalog(settings.metastore_connection)
    except MetastoreNotFoundError:
        return  # no metastore yet, so no one's table to replace; the load creates it
    with metastore:
        if database not in metastore.list_databases():
            return
        existing = set(metastore.list_tables(database))
        for table in TABLES:
            if table not in existing:
                continue
            found = metastore.get_table(database, table)
            if found.location.rstrip("/") != f"{db_url}/{table}":
                raise AlreadyExistsError(
                    f"table {database}.{table} already exists at {found.location} "
                    f"({found.table_type}), which a TPC-H load into {db_url} did not create; "
                    f"it is left alone (drop it, or load into another database)"
                )


def load_tpch_managed(
    spark,
    scale: float,
    settings: Settings,
    *,
    database: str = "tpch_managed",
    warehouse_url: str | None = None,
    work_dir: str | None = None,
    progress: bool = True,
    source: str = "tiered_hive",
) -> dict[str, str]:
    """Generate TPC-H at ``scale`` and write each table into the MANAGED table
    ``<database>.<table>`` through ``spark`` (tiered_hive registered on it, as ``source``);
    returns table -> location.

    Each write is an overwrite: a rerun replaces the rows under a new ``base_<wid>/``. The
    partitioned tables keep the generation's keys (``PARTITION_COLUMNS``). A table of that
    name that is EXTERNAL is dropped from the metastore first (its files are left alone).
    The database is created at ``<warehouse_url>/<database>.db`` when given and missing,
    else tables go under its location or ``hive.metastore.warehouse.dir``. Use a database
    of its own: an external load's files in the same directories would only be hidden.
    """

    say = _printer(progress)
    local_root = Path(work_dir or default_tpch_work_dir()).expanduser() / f"sf{format_scale(scale)}"
    generate_tpch(scale, str(local_root), progress=say)
    with open_metastore(settings.metastore_connection, create=True) as ms:
        if warehouse_url is not None and database not in ms.list_databases():
            ms.create_database(database, location=f"{as_url(warehouse_url)}/{database}.db")
        existing = ms.list_tables(database) if database in ms.list_databases() else []
        for table in TABLES:
            if table in existing and ms.get_table(database, table).table_type == EXTERNAL_TABLE:
                say(f"dropping the EXTERNAL table {database}.{table} (files kept)")
                ms.drop_table(database, table)
    read = parquet_reader(spark, str(local_root))
    for table in TABLES:
        say(f"writing {database}.{table} (MANAGED)")
        writer = read(table).write.format(source).mode("overwrite")
        if table in PARTITION_COLUMNS:
            writer = writer.option("partition_by", PARTITION_COLUMNS[table])
        writer.save(f"{database}.{table}")
    with open_metastore(settings.metastore_connection) as ms:
        return {t: ms.get_table(database, t).location for t in TABLES}


def _printer(enabled: bool):
    if not enabled:
        return lambda _msg: None
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True)  # a log file gets whole lines
    return lambda msg: console.print(f"[dim]tpch:[/dim] {msg}")


def _already_loaded(fs, db_path: str, db_url: str, wanted: dict) -> bool:
    marker_path = f"{db_path}/{LOAD_MARKER}"
    try:
        if not fs.exists(marker_path):
            return False
        with fs.open(marker_path, "rb") as f:
            found = json.loads(f.read())
    except ValueError:
        return False  # an unreadable marker: copy again
    except Exception as e:  # noqa: BLE001 - translated and re-raised
        raise translate_storage_error(e, f"{db_url}/{LOAD_MARKER}") from e
    if found != wanted:
        return False
    try:
        remote = {info["name"]: info.get("size") for info in fs.find(db_path, detail=True).values()}
    except Exception as e:  # noqa: BLE001 - translated and re-raised
        raise translate_storage_error(e, db_url) from e
    prefix = db_path.rstrip("/") + "/"
    remote = {
        (k[len(prefix) :] if k.startswith(prefix) else k.lstrip("/")): v for k, v in remote.items()
    }
    return all(remote.get(rel) == size for rel, size in wanted["files"].items())


def _copy(
    fs, db_path: str, db_url: str, local_root: Path, files: dict[str, int], progress: bool
) -> None:

    is_local = split_url(db_url)[0] == "file"  # object stores need no directories
    try:
        if fs.exists(f"{db_path}/{LOAD_MARKER}"):
            fs.rm(f"{db_path}/{LOAD_MARKER}")
        for table in TABLES:
            if fs.exists(f"{db_path}/{table}"):
                fs.rm(f"{db_path}/{table}", recursive=True)
        if is_local:
            for d in sorted({os.path.dirname(f"{db_path}/{rel}") for rel in files}):
                fs.makedirs(d, exist_ok=True)
    except Exception as e:  # noqa: BLE001 - translated and re-raised
        raise translate_storage_error(e, db_url) from e

    def put(rel: str) -> int:
        try:
            fs.put_file(str(local_root / rel), f"{db_path}/{rel}")
        except Exception as e:  # noqa: BLE001 - translated and re-raised
            raise translate_storage_error(e, f"{db_url}/{rel}") from e
        return files[rel]

    total = sum(files.values())
    from rich.console import Console

    if not progress or not Console().is_terminal:  # a bar in a log file is drawn once, at the end
        with ThreadPoolExecutor(max_workers=COPY_THREADS) as pool:
            list(pool.map(put, files))
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn("[bold]copy to {task.fields[dest]}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task("copy", total=total, dest=db_url)
        with ThreadPoolExecutor(max_workers=COPY_THREADS) as pool:
            for n in pool.map(put, files):
                bar.advance(task, n)


def _write_json(fs, path: str, url: str, obj: dict) -> None:
    try:
        with fs.open(path, "wb") as f:
            f.write(json.dumps(obj, indent=2, sort_keys=True).encode())
    except Exception as e:  # noqa: BLE001 - translated and re-raised
        raise translate_storage_error(e, url) from e
