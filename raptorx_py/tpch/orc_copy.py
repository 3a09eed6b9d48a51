"""TPC-H as ORC: a generation's Hive-layout Parquet (``generate``) rewritten file by file as
ORC, in the same layout (``lineitem/l_shipmonth=1992-01/part-0.orc``), for
``raptorx tpch load --format orc``.

Each Parquet file becomes one ORC file of the same rows, in the same order, with the same
Arrow types (tpchgen's integers, ``decimal(15,2)``, dates, strings), written by pyarrow's
ORC writer with ZSTD (Spark's default ORC codec) and ORC's default stripe size. A marker
(``_tpch_orc_done.json``, written last) records the Parquet generation it was made from and
every file it wrote, so a complete copy of the same generation is reused and an
interrupted one is made again.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.orc as orc
import pyarrow.parquet as pq

from raptorx_py.tpch.queries import TABLES

MARKER_NAME = "_tpch_orc_done.json"
COMPRESSION = "zstd"


def orc_copy(
    parquet_root: str,
    orc_root: str,
    generation: dict,
    progress: Callable[[str], None] | None = None,
) -> list[str]:
    """Rewrite the generation under ``parquet_root`` (whose marker is ``generation``) as ORC
    under ``orc_root``; the ORC files' paths relative to ``orc_root``, sorted. Reused when
    ``orc_root``'s marker names the same generation and its files are all there."""
    source, target = Path(parquet_root), Path(orc_root)
    marker = target / MARKER_NAME
    if marker.is_file():
        try:
            done = json.loads(marker.read_text())
        except (OSError, ValueError):
            done = None
        if (
            done
            and done.get("generation") == generation
            and all((target / f).is_file() for f in done.get("files", ()))
        ):
            return list(done["files"])
    for table in TABLES:
        shutil.rmtree(target / table, ignore_errors=True)
    marker.unlink(missing_ok=True)
    written = []
    for path in sorted(p for t in TABLES for p in (source / t).rglob("*.parquet")):
        relative = path.relative_to(source).with_suffix(".orc")
        if progress is not None:
            progress(f"writing {relative} as ORC")
        out = target / relative
        out.parent.mkdir(parents=True, exist_ok=True)
        orc.write_table(pq.read_table(path), str(out), compression=COMPRESSION)
        written.append(relative.as_posix())
    marker.write_text(json.dumps({"generation": generation, "files": written}))
    return written
