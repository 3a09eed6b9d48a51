"""The shared cache-entry vectors (tests/vectors/, written by make_vectors.py) from Python's
side: the committed block files are what the generator writes today (so the format has not
drifted from what the JVM is tested against), and a block store and a footer cache opened on
copies of them serve every entry; a fragment cache serves the fragment entry. The JVM's side:
tests/integration/test_cache_entries_jvm.py."""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import shutil

import pyarrow as pa

from raptorx_py.cache.block_store import BlockStore
from raptorx_py.cache.footer_cache import FileIdentity, FooterCache
from raptorx_py.cache.fragment_cache import FragmentCache
from tests.support.counter_deltas import CounterDeltas
from tests.vectors import make_vectors

VECTORS = os.path.join(os.path.dirname(__file__), "..", "vectors")


def test_regenerated_block_vectors_are_the_committed_bytes(tmp_path):
    make_vectors.main(str(tmp_path))
    committed = os.path.join(VECTORS, "blocks")
    expected = json.load(open(os.path.join(committed, "expected.json")))
    files = ["cache.secret", "expected.json"] + [
        os.path.join("data", name[:2], name) for name in expected["blocks"]
    ]
    assert len(expected["blocks"]) == len(make_vectors.BLOCKS)
    match, mismatch, errors = filecmp.cmpfiles(
        committed, str(tmp_path / "blocks"), files, shallow=False
    )
    assert (mismatch, errors) == ([], []) and len(match) == len(files)


def test_a_block_store_serves_every_block_vector(tmp_path):
    directory = str(tmp_path / "blocks")
    shutil.copytree(os.path.join(VECTORS, "blocks"), directory)
    expected = json.load(open(os.path.join(directory, "expected.json")))["blocks"]
    with CounterDeltas() as c:
        store = BlockStore(directory, max_size=1 << 20)
        for name, want in expected.items():
            key, index = name.rsplit("-", 1)
            payload = store.read(key, int(index), want["length"], 0, want["length"])
            assert payload is not None and hashlib.sha256(payload).hexdigest() == want["sha256"]
    assert store.last_recovery["adopted"] == len(expected)  # files without rows that verify
    assert c.get("block_cache.corrupt_blocks", 0) == 0


def test_a_footer_cache_serves_the_footer_vector(tmp_path):
    directory = str(tmp_path / "footers")
    shutil.copytree(os.path.join(VECTORS, "footers"), directory)
    expected = json.load(open(os.path.join(directory, "expected.json")))
    url, size, version = json.loads(expected["identity"])
    cache = FooterCache(directory, max_bytes=1 << 20, ttl=3600)
    identity = FileIdentity(url, size, version)
    assert os.path.relpath(cache.path_of(identity), directory) == expected["path"]

    def not_read():
        raise AssertionError("the footer vector was not served")

    with CounterDeltas() as c:
        metadata = cache.get_or_load(identity, not_read)
    assert c["footer_cache.hits_disk"] == 1 and metadata.num_rows == expected["num_rows"]


def _fragment_expected(directory: str) -> dict:
    return json.load(open(os.path.join(directory, "expected.json")))


def test_regenerated_fragment_vector_has_the_committed_layout_and_rows(tmp_path):
    """The generator still writes the committed entry: the same file name, header (magic,
    format, no expiry) and rows. The Arrow stream's bytes are pyarrow's, so they are not
    compared; the committed entry must still verify (the next test)."""
    make_vectors.main(str(tmp_path))
    committed = _fragment_expected(os.path.join(VECTORS, "fragments"))
    fresh = _fragment_expected(str(tmp_path / "fragments"))
    for field in ("key", "path", "header_hex", "rows", "schema"):
        assert fresh[field] == committed[field], field
    assert filecmp.cmp(
        os.path.join(VECTORS, "fragments", "cache.secret"),
        str(tmp_path / "fragments" / "cache.secret"),
        shallow=False,
    )


def test_a_fragment_cache_serves_the_fragment_vector(tmp_path):
    directory = str(tmp_path / "fragments")
    shutil.copytree(os.path.join(VECTORS, "fragments"), directory)
    expected = _fragment_expected(directory)
    data = open(os.path.join(directory, expected["path"]), "rb").read()
    assert hashlib.sha256(data).hexdigest() == expected["entry_sha256"]
    cache = FragmentCache(
        directory, max_bytes=1 << 20, max_entries=10, max_entry_bytes=1 << 20, ttl=None
    )
    schema, batches = make_vectors.fragment_rows()
    with CounterDeltas() as c:
        got = cache.get(bytes.fromhex(expected["key"]))
    assert got is not None and c.get("fragment_cache.corrupt", 0) == 0
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches(batches, schema))
