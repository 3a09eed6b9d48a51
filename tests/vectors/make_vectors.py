"""Writes the shared test vectors of the cache entries both languages read: block files
(format 3, ``raptorx_py.cache.block_store``), one footer entry (``RXFOOT03``,
``raptorx_py.cache.footer_cache``) and one fragment entry (``RXF1``, format 2,
``raptorx_py.cache.fragment_cache``), each directory with a fixed secret, and what they hold
in ``expected.json``. The JVM reads them in tests/integration/test_cache_entries_jvm.py
(``raptorx.cache.BlockFiles``, ``FooterFiles``, ``FragmentHits``);
tests/unit/test_cache_vectors.py checks that Python still reads them and that regenerating
the blocks gives the same bytes, and the fragment entry the same header and rows.

Usage: ``.venv/bin/python tests/vectors/make_vectors.py [output directory]`` (default: this
file's directory). Seeded: the same code writes the same block bytes. The footer's bytes are
pyarrow's (its ``created_by`` names pyarrow's version), so they change with pyarrow; the
committed ones stay valid whatever pyarrow reads them. The fragment entry's Arrow stream is
pyarrow's too (ZSTD-compressed buffers); it never expires (expiry 0).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys

SEED = 20261127
#: (block index, payload length): a 1-byte block, a short last block, page-sized, odd-sized.
BLOCKS = ((0, 1), (1, 37), (2, 4096), (3, 10000))
KEY = "7a" * 20  # 40 hex digits, as block_cache's keys
#: The fragment entry's key: any bytes (the planner's keys are a file prefix and a digest).
FRAGMENT_KEY = bytes(range(1, 33))


def fragment_rows():
    """The fragment vector's rows: integers with a null, strings (one not ASCII, one null),
    a decimal and a date column; two batches."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("name", pa.string()),
            pa.field("price", pa.decimal128(12, 2)),
            pa.field("day", pa.date32()),
        ]
    )
    first = pa.record_batch(
        [
            pa.array([1, 2, None]),
            pa.array(["a", "\u00e9t\u00e9", None]),
            pa.array([Decimal("1.50"), None, Decimal("-3.25")], pa.decimal128(12, 2)),
            pa.array([dt.date(2024, 1, 1), dt.date(1999, 12, 31), None]),
        ],
        schema=schema,
    )
    second = pa.record_batch(
        [
            pa.array([4]),
            pa.array(["z" * 40]),
            pa.array([Decimal("9999999999.99")], pa.decimal128(12, 2)),
            pa.array([dt.date(1970, 1, 1)]),
        ],
        schema=schema,
    )
    return schema, [first, second]


def main(out: str) -> None:
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raptorx_py.cache import block_store, footer_cache, fragment_cache

    rng = random.Random(SEED)
    blocks_dir, footers_dir = os.path.join(out, "blocks"), os.path.join(out, "footers")
    for d in (blocks_dir, footers_dir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    secret = rng.randbytes(32)
    expected: dict[str, dict] = {"secret_sha256": hashlib.sha256(secret).hexdigest(), "blocks": {}}
    _write(os.path.join(blocks_dir, "cache.secret"), secret)
    for index, length in BLOCKS:
        name = block_store.block_name(KEY, index)
        payload = rng.randbytes(length)
        path = os.path.join(blocks_dir, block_store.DATA_DIR, name[:2], name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write(path, payload + block_store.encode_trailer(secret, name, payload))
        expected["blocks"][name] = {
            "length": length,
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
    _write(os.path.join(blocks_dir, "expected.json"), _json(expected))

    footer_secret = rng.randbytes(32)
    _write(os.path.join(footers_dir, "cache.secret"), footer_secret)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"x": list(range(10)), "s": [str(i) for i in range(10)]}), sink)
    data = sink.getvalue().to_pybytes()
    metadata = pq.read_metadata(pa.BufferReader(data))
    identity = footer_cache.FileIdentity("file:///vectors/t.parquet", len(data), "mtime:1.0")
    payload = footer_cache.serialize_footer(metadata)
    # The cache loads the directory's secret, written above, and publishes the entry.
    cache = footer_cache.FooterCache(footers_dir, max_bytes=1 << 20, ttl=3600)
    cache._put_disk(identity, payload)
    path = cache.path_of(identity)
    footer = {
        "url": identity.url,
        "identity": identity.encoded().decode(),
        "path": os.path.relpath(path, footers_dir),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
        "num_rows": metadata.num_rows,
    }
    _write(os.path.join(footers_dir, "expected.json"), _json(footer))

    fragments_dir = os.path.join(out, "fragments")
    shutil.rmtree(fragments_dir, ignore_errors=True)
    work = os.path.join(out, ".fragments-work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fragment_secret = rng.randbytes(32)
    _write(os.path.join(work, "cache.secret"), fragment_secret)
    schema, batches = fragment_rows()
    # The cache loads the directory's secret, written above, and publishes the entry; only
    # the secret and the entry file are kept (the index is the cache's own business).
    cache = fragment_cache.FragmentCache(
        work, max_bytes=1 << 20, max_entries=10, max_entry_bytes=1 << 20, ttl=None
    )
    if not cache.put(FRAGMENT_KEY, schema, batches):
        raise RuntimeError("the fragment vector was not stored")
    cache.close()
    entry = fragment_cache.entry_path(work, FRAGMENT_KEY)
    relative = os.path.relpath(entry, work)
    os.makedirs(os.path.join(fragments_dir, os.path.dirname(relative)))
    shutil.copy(os.path.join(work, "cache.secret"), os.path.join(fragments_dir, "cache.secret"))
    shutil.copy(entry, os.path.join(fragments_dir, relative))
    shutil.rmtree(work)
    data = open(os.path.join(fragments_dir, relative), "rb").read()
    fragment = {
        "key": FRAGMENT_KEY.hex(),
        "path": relative,
        "entry_sha256": hashlib.sha256(data).hexdigest(),
        "header_hex": data[: fragment_cache.HEADER_BYTES - fragment_cache.MAC_BYTES].hex(),
        "rows": pa.Table.from_batches(batches).num_rows,
        "schema": schema.to_string(),
    }
    _write(os.path.join(fragments_dir, "expected.json"), _json(fragment))


def _json(value) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
