"""Generate TPC-H data with ``tpchgen-cli`` and lay it out as Hive-partitioned Parquet.

Layout written under ``out_dir``::

    lineitem/l_shipmonth=1992-01/part-0.parquet   (partition column derived from l_shipdate)
    orders/o_ordermonth=1992-01/part-0.parquet    (partition column derived from o_orderdate)
    customer/part-0.parquet, nation/part-0.parquet, ... (the other six, unpartitioned)
    _tpch_done.json                               (completion marker, written last)

The partition columns are strings ``'YYYY-MM'`` and live only in the directory names, never
inside the files. Column types are tpchgen's own (int64/int32 keys, decimal128(15,2) money,
date32 dates, all non-nullable, Parquet field ids kept) except text: tpchgen writes Arrow
``string_view``, which pyarrow cannot partition (no ``take`` kernel), so text columns are
written as Arrow ``string``. In Parquet both are the same BYTE_ARRAY/UTF8 column; only the
Arrow schema hint embedded in the footer differs, and every reader sees the same values.

Files are written single-threaded with order preserved, so the same scale factor gives the
same bytes with the same pyarrow and tpchgen-cli versions. Row groups hold exactly
``ROWS_PER_GROUP`` rows (128 Ki; about 17 MB of lineitem uncompressed, 6 MB compressed) except
the last of each file, a size that suits 1 MiB block caching and min/max pruning; a file holds
at most ``MAX_ROWS_PER_FILE`` rows (4 Mi). Memory holds about one row group per partition.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from raptorx_py.errors import RaptorxError
from raptorx_py.tpch.queries import PARTITION_COLUMNS, TABLES

#: Bump when the on-disk layout changes, so that cached generations are rebuilt.
LAYOUT_VERSION = 2
MARKER_NAME = "_tpch_done.json"
LOCK_NAME = "_tpch.lock"
ROWS_PER_GROUP = 128 * 1024
MAX_ROWS_PER_FILE = 32 * ROWS_PER_GROUP
COMPRESSION = "snappy"

#: Source column of each derived partition column (formatted as 'YYYY-MM').
PARTITION_SOURCES = {"lineitem": "l_shipdate", "orders": "o_orderdate"}

_RAW_DIR = "_tpchgen_raw"

Progress = Callable[[str], None]


class TpchGenerationError(RaptorxError, RuntimeError):
    """tpchgen-cli is missing or failed, or its output is not what was expected."""


def tpchgen_executable() -> str:
    """Path of the ``tpchgen-cli`` installed next to the running Python (the venv's bin/).

    Falls back to ``tpchgen-cli`` on PATH; raises ``TpchGenerationError`` naming both places
    when neither exists.
    """
    candidate = Path(sys.executable).parent / "tpchgen-cli"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("tpchgen-cli")
    if found:
        return found
    raise TpchGenerationError(
        f"tpchgen-cli not found: looked for {candidate} and on PATH; "
        "install it with `pip install tpchgen-cli` in this environment"
    )


def tpchgen_version() -> str:
    """The ``tpchgen-cli --version`` string, e.g. ``'tpchgen-cli 4.0.0'``."""
    out = subprocess.run(
        [tpchgen_executable(), "--version"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def format_scale(scale: float) -> str:
    """Canonical text of a scale factor: ``0.01`` -> ``'0.01'``, ``1.0`` -> ``'1'``."""
    if scale <= 0:
        raise ValueError(f"TPC-H scale factor must be positive, got {scale!r}")
    text = repr(float(scale))
    return text[:-2] if text.endswith(".0") else text


def read_marker(out_dir: str) -> dict | None:
    """The completion marker of a generation in ``out_dir``, or None if there is none."""
    path = Path(out_dir) / MARKER_NAME
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _marker_matches(marker: dict | None, scale: float, out_dir: Path) -> bool:
    if not marker:
        return False
    if marker.get("scale") != format_scale(scale) or marker.get("layout_version") != LAYOUT_VERSION:
        return False
    # A marker whose files have gone (someone removed a table directory) is not complete.
    for table in TABLES:
        for rel in marker.get("tables", {}).get(table, {}).get("files", []):
            if not (out_dir / rel).is_file():
                return False
    return set(marker.get("tables", {})) == set(TABLES)


def _table_dirs(out_dir: Path) -> dict[str, str]:
    return {t: str(out_dir / t) for t in TABLES}


def generate_tpch(
    scale: float, out_dir: str, *, progress: Progress | None = None
) -> dict[str, str]:
    """Generate TPC-H at ``scale`` into ``out_dir`` in Hive layout; return table -> directory.

    If ``out_dir`` already holds a complete generation of this scale (its ``_tpch_done.json``
    marker matches the scale and layout version, and the files it lists exist), nothing is
    regenerated. Otherwise the eight table directories (and only those, plus the marker and a
    scratch directory) are removed and rebuilt, and the marker is written last, so an
    interrupted run is never mistaken for a complete one. Concurrent calls on the same
    ``out_dir`` (two test sessions) serialise on a lock file, ``_tpch.lock``.

    ``progress``, if given, is called with a short message at each step.
    Raises ``TpchGenerationError`` when tpchgen-cli is missing or fails.
    """
    say = progress or (lambda _msg: None)
    root = Path(out_dir).expanduser().resolve()
    if _marker_matches(read_marker(str(root)), scale, root):
        say(f"TPC-H SF {format_scale(scale)} already generated in {root}")
        return _table_dirs(root)
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(root / LOCK_NAME):
        # Another process may have finished the same generation while we waited.
        if _marker_matches(read_marker(str(root)), scale, root):
            say(f"TPC-H SF {format_scale(scale)} already generated in {root}")
            return _table_dirs(root)
        _generate_locked(scale, root, say)
    return _table_dirs(root)


@contextlib.contextmanager
def _exclusive_lock(path: Path):
    """Hold an exclusive advisory lock on ``path`` (POSIX flock; a no-op elsewhere)."""
    with open(path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _generate_locked(scale: float, root: Path, say: Progress) -> None:
    (root / MARKER_NAME).unlink(missing_ok=True)
    raw = root / _RAW_DIR
    for stale in [raw, *(root / t for t in TABLES)]:
        if stale.exists():
            shutil.rmtree(stale)
    raw.mkdir()

    say(f"tpchgen-cli: generating SF {format_scale(scale)}")
    cmd = [
        tpchgen_executable(),
        "parquet",
        "--scale-factor",
        format_scale(scale),
        "--output-dir",
        str(raw),
        "--compression",
        "SNAPPY",
        "--quiet",
        "--no-progress",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise TpchGenerationError(
            f"tpchgen-cli failed with exit code {proc.returncode}: {' '.join(cmd)}\n"
            f"{proc.stderr.strip()}"
        )

    tables: dict[str, dict] = {}
    for table in TABLES:
        source = raw / f"{table}.parquet"
        if not source.is_file():
            raise TpchGenerationError(
                f"tpchgen-cli did not write {source} (command: {' '.join(cmd)})"
            )
        say(f"writing {table} in Hive layout")
        rows = pq.ParquetFile(source).metadata.num_rows
        files = _write_table(table, source, root / table)
        written = sum(pq.ParquetFile(root / table / f).metadata.num_rows for f in files)
        if written != rows:
            raise TpchGenerationError(
                f"{table}: tpchgen-cli wrote {rows} rows but the Hive layout holds {written}"
            )
        tables[table] = {"rows": rows, "files": [f"{table}/{f}" for f in files]}

    shutil.rmtree(raw)
    marker = {
        "scale": format_scale(scale),
        "layout_version": LAYOUT_VERSION,
        "generator": tpchgen_version(),
        "pyarrow": pa.__version__,
        "partition_columns": dict(PARTITION_COLUMNS),
        "tables": tables,
    }
    tmp = root / (MARKER_NAME + ".tmp")
    tmp.write_text(json.dumps(marker, indent=2, sort_keys=True))
    os.replace(tmp, root / MARKER_NAME)
    say(f"TPC-H SF {format_scale(scale)} ready in {root}")


def _plain_strings(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every ``string_view`` field as ``string`` (nullability, metadata kept)."""
    return pa.schema(
        [f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f for f in schema],
        metadata=schema.metadata,
    )


class _PartitionWriter:
    """Writes the rows of one partition (or of an unpartitioned table) into
    ``part-0.parquet``, ``part-1.parquet``, ... in fixed-size row groups."""

    def __init__(self, directory: Path, schema: pa.Schema):
        self.directory = directory
        self.schema = schema
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.writer: pq.ParquetWriter | None = None
        self.file_rows = 0
        self.files: list[Path] = []

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        while self.pending_rows >= ROWS_PER_GROUP:
            self._write_group(ROWS_PER_GROUP)

    def close(self) -> None:
        if self.pending_rows or not self.files:
            self._write_group(self.pending_rows)
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def _write_group(self, rows: int) -> None:
        data = pa.Table.from_batches(self.pending, schema=self.schema)
        group, rest = data.slice(0, rows), data.slice(rows)
        self.pending = rest.to_batches()
        self.pending_rows = rest.num_rows
        if self.writer is not None and self.file_rows + rows > MAX_ROWS_PER_FILE:
            self.writer.close()
            self.writer = None
        if self.writer is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"part-{len(self.files)}.parquet"
            self.writer = pq.ParquetWriter(path, self.schema, compression=COMPRESSION)
            self.files.append(path)
            self.file_rows = 0
        self.writer.write_table(group, row_group_size=max(rows, 1))
        self.file_rows += rows


def _write_table(table: str, source: Path, dest: Path) -> list[str]:
    """Rewrite one tpchgen file into ``dest``; return the written files relative to ``dest``.

    Streams the source batch by batch (single-threaded, so the output is deterministic):
    rows keep their tpchgen order within each partition; each partition buffers at most one
    row group (``ROWS_PER_GROUP`` rows) in memory.
    """
    source_file = pq.ParquetFile(source)
    schema = _plain_strings(source_file.schema_arrow)
    part_col = PARTITION_COLUMNS.get(table)
    writers: dict[str | None, _PartitionWriter] = {}

    def writer_for(value: str | None) -> _PartitionWriter:
        if value not in writers:
            directory = dest if value is None else dest / f"{part_col}={value}"
            writers[value] = _PartitionWriter(directory, schema)
        return writers[value]

    for batch in source_file.iter_batches(batch_size=64 * 1024, use_threads=False):
        batch = pa.RecordBatch.from_arrays(
            [col.cast(field.type) for col, field in zip(batch.columns, schema)], schema=schema
        )
        if part_col is None:
            writer_for(None).add(batch)
            continue
        month = pc.strftime(batch.column(PARTITION_SOURCES[table]), format="%Y-%m")
        order = pc.sort_indices(month)  # stable: tpchgen order is kept within a month
        batch, month = batch.take(order), month.take(order)
        counts = pc.value_counts(month)
        by_value = pc.sort_indices(counts.field("values"))
        offset = 0
        for value, count in zip(
            counts.field("values").take(by_value).to_pylist(),
            counts.field("counts").take(by_value).to_pylist(),
        ):
            writer_for(value).add(batch.slice(offset, count))
            offset += count
    if not writers:
        writer_for(None)  # an empty table still gets one (empty) file
    for w in writers.values():
        w.close()
    return sorted(str(f.relative_to(dest)) for w in writers.values() for f in w.files)
