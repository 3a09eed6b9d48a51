"""Which table a managed write goes to: an existing MANAGED table, or the one it will create.

Decided when the write begins (``resolve_target``) and checked again at commit
(``check_columns``, ``check_location_free``): the incoming columns must match an existing
table's (any order, same Hive types), and a new table gets a location that holds no
visible files: with write ids per metastore, another table's ``base_0000001`` would read as
the new table's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raptorx_py.config.settings import Settings
from raptorx_py.errors import LocationInUseError, NoSuchObjectError, SchemaError
from raptorx_py.hive.column_types import parse_type
from raptorx_py.hive.model import EXTERNAL_TABLE, MANAGED_TABLE, Column, Table, TableShape
from raptorx_py.hive.storage_formats import ORC, PARQUET
from raptorx_py.metastore.store import Metastore
from raptorx_py.storage.fs import as_url, filesystem_for
from raptorx_py.tables.file_statistics import NO_ROWS_PARAMS

#: Parameters of a table this path creates (Hive's insert-only transactional table).
MANAGED_PARAMETERS = {"transactional": "true", "transactional_properties": "insert_only"}


@dataclass(frozen=True)
class WriteTarget(TableShape):
    """The table a write goes to, as decided when it began. ``table_id`` is None when the
    write creates the table (at commit)."""

    database: str
    name: str
    location: str
    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...]
    table_id: int | None
    #: The format its data files are written in (``hive.storage_formats``).
    storage_format: str = PARQUET

    def as_table(self) -> Table:
        empty = {} if self.partition_keys else NO_ROWS_PARAMS
        return Table(
            self.database,
            self.name,
            MANAGED_TABLE,
            self.location,
            self.columns,
            self.partition_keys,
            {**MANAGED_PARAMETERS, **empty},
            storage_format=self.storage_format,
        )


def warehouse_url(settings: Settings) -> str:
    """``hive.metastore.warehouse.dir`` as a URL (a local path becomes ``file://...``)."""
    return as_url(settings.warehouse_dir)


def parse_partition_by(text: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``"k1, k2"`` (or a sequence of names) -> ``("k1", "k2")``; nothing given -> None."""
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    keys = tuple(i.strip() for i in items if i and i.strip())
    return keys or None


def resolve_target(
    metastore: Metastore,
    settings: Settings,
    database: str,
    name: str,
    columns: Sequence[Column],
    partition_by: Sequence[str] | None,
) -> WriteTarget:
    """The table ``database.name`` as the incoming ``columns`` (name, Hive type) will be
    written to it: an existing MANAGED table whose columns they match (any order), or a new
    table with these columns, partitioned by ``partition_by`` (in that order)."""
    qualified = f"{database}.{name}"
    by_name = {c.name.lower(): c for c in columns}
    if len(by_name) != len(columns):
        raise SchemaError(
            f"the data written to {qualified} has duplicate column names: "
            f"{', '.join(c.name for c in columns)}"
        )
    try:
        table = metastore.get_table(database, name)
    except NoSuchObjectError:
        table = None
    if table is not None:
        if table.table_type == EXTERNAL_TABLE:
            raise SchemaError(
                f"{qualified} is an EXTERNAL table: tiered_hive writes MANAGED "
                f"tables only (an external table's files belong to its owner)"
            )
        check_writable(qualified, table.all_columns, table.storage_format)
        check_columns(table, columns)
        keys = tuple(k.name for k in table.partition_keys)
        if partition_by is not None and tuple(partition_by) != keys:
            raise SchemaError(
                f"{qualified} is partitioned by ({', '.join(keys) or 'nothing'}), "
                f"but the write asks for ({', '.join(partition_by)})"
            )
        return WriteTarget(
            database,
            name,
            table.location.rstrip("/"),
            table.columns,
            table.partition_keys,
            table.id,
            table.storage_format,
        )
    keys = tuple(partition_by or ())
    missing = [k for k in keys if k.lower() not in by_name]
    if missing:
        raise SchemaError(
            f"partition key(s) {', '.join(missing)} of the new table {qualified} "
            f"are not columns of the data: {', '.join(c.name for c in columns)}"
        )
    if len(keys) == len(columns) and keys:
        raise SchemaError(
            f"the new table {qualified} would have no data column: every column is a partition key"
        )
    key_set = {k.lower() for k in keys}
    data = tuple(c for c in columns if c.name.lower() not in key_set)
    key_cols = tuple(by_name[k.lower()] for k in keys)
    try:
        db_location = metastore.get_database(database).location
    except NoSuchObjectError:
        db_location = None
    base = db_location.rstrip("/") if db_location else f"{warehouse_url(settings)}/{database}.db"
    location = f"{base}/{name}"
    check_writable(qualified, columns, settings.storage_format)
    check_location_free(settings, qualified, location)
    return WriteTarget(database, name, location, data, key_cols, None, settings.storage_format)


def check_location_free(settings: Settings, qualified: str, location: str) -> None:
    """Refuse to create the MANAGED table ``qualified`` at ``location`` when the directory
    holds any visible entry (hidden ``.``/``_`` names, e.g. writes' staging, are skipped):
    a new table must never adopt another table's files or ACID directories."""
    fs, path = filesystem_for(location, settings)
    try:
        entries = fs.ls(path, detail=False)
    except FileNotFoundError:
        return
    visible = sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in entries)
    visible = [n for n in visible if n and not n.startswith((".", "_"))]
    if visible:
        shown = ", ".join(visible[:5]) + (", ..." if len(visible) > 5 else "")
        raise LocationInUseError(
            f"cannot create the MANAGED table {qualified} at {location}: the directory "
            f"already holds {shown} (the files of another table, or of a table of another "
            f"metastore); a new table never adopts existing files. Remove them, or give the "
            f"database another location"
        )


def check_writable(qualified: str, columns: Sequence[Column], storage_format: str) -> None:
    """A SchemaError for a column this write path does not write as Spark would: a
    ``char(n)`` or ``varchar(n)`` column (Spark pads a char value to ``n`` and refuses a
    longer value of either; here neither is done, so such a table is not written), and, in
    an ORC table, a ``timestamp_ntz`` one (an ORC file written here marks no timestamp as
    Spark's ``timestamp_ntz``: pyarrow's ORC writer sets no type attributes, and Spark's
    ORC reader reads an unmarked one only as ``timestamp``). Both rules look inside nested
    columns too (``struct<c:char(5)>``, ``array<timestamp_ntz>``)."""
    declared = [f"{c.name} {c.type}" for c in columns if parse_type(c.type).has_char_varchar]
    if declared:
        raise SchemaError(
            f"{qualified} has char/varchar column(s) {', '.join(declared)}: tiered_hive does "
            f"not write them (Spark pads a char value to its length and refuses a longer "
            f"value of either; this write path does neither); write to a table whose "
            f"columns are string"
        )
    if storage_format != ORC:
        return
    ntz = [c.name for c in columns if "timestamp_ntz" in parse_type(c.type).kinds()]
    if ntz:
        raise SchemaError(
            f"{qualified} is an ORC table, and tiered_hive cannot write its timestamp_ntz "
            f"column(s) {', '.join(ntz)} so that Spark's ORC reader reads them back as "
            f"timestamp_ntz: cast them to timestamp, or write the table as Parquet "
            f"(hive.storage-format=PARQUET)"
        )


def check_columns(table: Table, columns: Sequence[Column]) -> None:
    """A SchemaError unless ``columns`` are ``table``'s columns (any order, same types)."""
    have = {c.name.lower(): c for c in table.all_columns}
    got = {c.name.lower(): c for c in columns}
    if set(have) != set(got):
        raise SchemaError(
            f"the data written to {table.qualified_name} has columns "
            f"({', '.join(c.name for c in columns)}), the table has "
            f"({', '.join(c.name for c in table.all_columns)})"
        )
    for key, col in have.items():
        if _normal_type(got[key].type) != _normal_type(col.type):
            raise SchemaError(
                f"column '{col.name}' of {table.qualified_name} is {col.type}, "
                f"but the data written to it is {got[key].type}"
            )


def _normal_type(t: str) -> str:
    return t.replace(" ", "").lower().replace("integer", "int")
