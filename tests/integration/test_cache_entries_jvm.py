"""The block files (format 3), footer entries and fragment entries from both languages: the
JVM (``raptorx.cache.BlockFiles``, ``FooterFiles``, ``FragmentHits``, reached through the
shared session's py4j gateway) verifies every vector Python wrote (tests/vectors/); a
fragment entry the JVM writes (``FragmentEntryWriter``, ``FragmentStores``) is served by a
Python ``FragmentCache``; a block the JVM publishes and
names for adoption is adopted into a Python ``BlockStore``'s index and read by it; a flipped
byte, a truncated file, a forged file (valid layout, MAC under another secret) and a version
2 file are each a counted corrupt miss, deleted, on either side; a block evicted between
two reads is a plain miss. Shown by counts (``BlockCounts``, ``counters``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import struct

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from raptorx_py.cache import block_store
from raptorx_py.cache.block_store import TRAILER, BlockStore, encode_trailer
from raptorx_py.cache.fragment_cache import FragmentCache
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock

pytestmark = pytest.mark.spark

VECTORS = os.path.join(os.path.dirname(__file__), "..", "vectors")
KEY = "5c" * 20
BS = 1000


class Jvm:
    """``BlockFiles`` and ``FooterFiles`` with Python arguments, and deltas of the JVM's
    block counts."""

    def __init__(self, spark):
        self.jvm = spark._jvm
        self.blocks = self.jvm.raptorx.cache.BlockFiles
        self.footers = self.jvm.raptorx.cache.FooterFiles

    def path(self, directory: str):
        return self.jvm.java.io.File(str(directory)).toPath()

    def counts(self) -> dict[str, int]:
        return dict(self.jvm.raptorx.cache.BlockCounts.snapshot())

    def read(self, directory: str, secret: bytes, name: str, length: int) -> bytes | None:
        got = self.blocks.read(self.path(directory), secret, name, length)
        return bytes(got.get()) if got.isDefined() else None

    def read_range(self, directory, secret, name, length, offset, n) -> bytes | None:
        buffer = self.jvm.java.nio.ByteBuffer.allocate(n)
        ok = self.blocks.readRange(self.path(directory), secret, name, length, offset, buffer)
        return bytes(buffer.array()) if ok else None

    def publish(self, directory, secret, name, payload, group_shared=False) -> bool:
        return self.blocks.publish(
            self.path(directory), secret, name, payload, len(payload), group_shared
        )

    def adopt(self, directory, names, group_shared=False) -> bool:
        java_names = self.jvm.java.util.ArrayList()
        for n in names:
            java_names.add(n)
        return self.blocks.adopt(self.path(directory), java_names, group_shared)


@pytest.fixture
def jvm(spark) -> Jvm:
    return Jvm(spark)


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _payload(seed: int, n: int = BS) -> bytes:
    return hashlib.sha256(str(seed).encode()).digest() * (n // 32) + b"\x07" * (n % 32)


def _secret(directory: str) -> bytes:
    return open(os.path.join(directory, "cache.secret"), "rb").read()


def test_the_jvm_verifies_every_python_written_vector(jvm, tmp_path):
    directory = str(tmp_path / "blocks")
    shutil.copytree(os.path.join(VECTORS, "blocks"), directory)  # a corrupt one is deleted
    expected = json.load(open(os.path.join(directory, "expected.json")))
    secret = bytes(jvm.blocks.secret(jvm.path(directory), False))
    assert hashlib.sha256(secret).hexdigest() == expected["secret_sha256"]
    before = jvm.counts()
    for name, want in expected["blocks"].items():
        payload = jvm.read(directory, secret, name, want["length"])
        assert payload is not None and hashlib.sha256(payload).hexdigest() == want["sha256"]
        middle = want["length"] // 2
        part = jvm.read_range(
            directory, secret, name, want["length"], middle, want["length"] - middle
        )
        assert part == payload[middle:]  # the second read of a verified file: just the range
        assert jvm.read(directory, secret, name, want["length"]) == payload  # no MAC again
    n = len(expected["blocks"])
    # each file's MAC checked once: later reads of the same file read only its bytes
    assert _delta(before, jvm.counts()) == {"jvm_blocks.hits": 3 * n, "jvm_blocks.verified": n}


def test_the_jvm_verifies_the_python_written_footer_vector(jvm, tmp_path):
    directory = str(tmp_path / "footers")
    shutil.copytree(os.path.join(VECTORS, "footers"), directory)
    expected = json.load(open(os.path.join(directory, "expected.json")))
    identity = expected["identity"].encode()
    path = jvm.footers.path(jvm.path(directory), expected["url"], identity)
    assert os.path.relpath(str(path.toString()), directory) == expected["path"]
    secret = _secret(directory)
    got = jvm.footers.payload(path, secret, identity)
    assert got.isDefined()
    assert hashlib.sha256(bytes(got.get())).hexdigest() == expected["payload_sha256"]
    # another identity, another secret: not this entry's
    assert not jvm.footers.payload(path, secret, identity.replace(b"791", b"792")).isDefined()
    assert not jvm.footers.payload(path, bytes(32), identity).isDefined()


def test_blocks_the_jvm_publishes_are_adopted_and_read_by_python(jvm, tmp_path):
    """The JVM first: it creates the secret, publishes two blocks and names them; a store
    opened afterwards folds them in at start-up. Then, with the store open, two more: its
    ``adopt_published`` folds them in and evicts past capacity, which the JVM reads."""
    directory = str(tmp_path / "blocks")
    secret = bytes(jvm.blocks.secret(jvm.path(directory), False))
    assert stat.S_IMODE(os.stat(os.path.join(directory, "cache.secret")).st_mode) == 0o600
    names = [f"{KEY}-{i}" for i in range(4)]
    before = jvm.counts()
    assert all(jvm.publish(directory, secret, n, _payload(i)) for i, n in enumerate(names[:2]))
    assert jvm.adopt(directory, names[:2])
    assert _delta(before, jvm.counts()) == {
        "jvm_blocks.published": 2,
        "jvm_blocks.adopt_files": 1,
    }
    (names_file,) = os.listdir(os.path.join(directory, block_store.ADOPT_DIR))
    assert names_file.startswith(f"{jvm.jvm.java.lang.ProcessHandle.current().pid()}.")
    assert os.listdir(os.path.join(directory, block_store.TMP_DIR)) == []
    size = BS + TRAILER.size
    for n in names[:2]:
        assert stat.S_IMODE(os.stat(os.path.join(directory, "data", n[:2], n)).st_mode) == 0o600

    clock = FakeClock(5000.0)
    with CounterDeltas() as c:
        store = BlockStore(directory, max_size=3 * size, clock=clock)
        assert store.last_recovery["adopted"] == 2
        assert store.read(KEY, 1, BS, 0, BS) == _payload(1)
    assert c["block_cache.adopted"] == 2 and c.get("block_cache.corrupt_blocks", 0) == 0
    assert store.entries() == {names[0]: size, names[1]: size}
    assert jvm.blocks.capacity(jvm.path(directory)).get() == 3 * size

    clock.advance(1.0)
    assert all(jvm.publish(directory, secret, n, _payload(i + 2)) for i, n in enumerate(names[2:]))
    assert jvm.adopt(directory, names[2:])
    with CounterDeltas() as c:
        assert store.adopt_published() == 2
    assert c["block_cache.adopted"] == 2 and c["block_cache.evictions"] == 1
    assert set(store.entries()) == set(names[1:]) and store.total_bytes() == 3 * size
    assert store.read(KEY, 3, BS, 10, 100) == _payload(3)[10:110]
    assert jvm.read(directory, secret, names[0], BS) is None  # evicted: a plain miss
    # What the JVM may publish before the next adoption: the room the index left (none,
    # full), but a tenth of the capacity at least; all of it when the index is empty.
    path = jvm.path(directory)
    assert jvm.blocks.held(path).get() == 3 * size
    fill_room = jvm.jvm.raptorx.cache.BlockCachingFileSystem.fillRoom
    assert fill_room(3 * size, jvm.blocks.held(path)) == 3 * size // 10
    assert store.drop_prefix("") == 3 and store.adopt_published() == 0
    assert jvm.blocks.held(path).get() == 0
    assert fill_room(3 * size, jvm.blocks.held(path)) == 3 * size


def test_a_group_shared_jvm_publish_is_group_readable(jvm, tmp_path):
    directory = str(tmp_path / "shared")
    secret = bytes(jvm.blocks.secret(jvm.path(directory), True))
    name = f"{KEY}-0"
    assert jvm.publish(directory, secret, name, _payload(0), group_shared=True)
    assert jvm.adopt(directory, [name], group_shared=True)
    mode = lambda *p: stat.S_IMODE(os.stat(os.path.join(directory, *p)).st_mode)  # noqa: E731
    assert mode("cache.secret") == mode("data", name[:2], name) == 0o660
    assert mode() == mode("data") == mode("data", name[:2]) == mode("adopt") == 0o2770
    store = BlockStore(directory, max_size=1 << 20, group_shared=True)
    assert store.read(KEY, 0, BS, 0, BS) == _payload(0)


def test_a_failed_publish_is_counted_and_never_raises(jvm, tmp_path):
    directory = tmp_path / "blocks"
    directory.mkdir()
    (directory / "tmp").write_text("a file where the temp directory goes")
    before = jvm.counts()
    assert not jvm.publish(str(directory), bytes(32), f"{KEY}-0", _payload(0))
    assert not jvm.publish(str(directory), bytes(32), "not-a-block-name", _payload(0))
    assert not jvm.adopt(str(directory), [f"{KEY}-0"])
    assert _delta(before, jvm.counts()) == {
        "jvm_blocks.publish_errors": 2,
        "jvm_blocks.adopt_errors": 1,
    }


def _flip(path: str, secret: bytes, name: str) -> None:
    """A byte changed in place, later than the file was verified: its mtime moved on (both
    sides remember a verified file by its mtime; a change within one timestamp tick of the
    verification is their documented limit)."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(BS // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def _truncate(path: str, secret: bytes, name: str) -> None:
    os.truncate(path, os.path.getsize(path) - 1)


def _forge(path: str, secret: bytes, name: str) -> None:
    """Valid layout, right name, other bytes, MAC under another secret (a forger who can
    write the cache but not read its secret)."""
    payload = b"\xee" * BS
    with open(path + ".x", "wb") as f:
        f.write(payload + encode_trailer(bytes(32), name, payload))
    os.replace(path + ".x", path)


def _version_2(path: str, secret: bytes, name: str) -> None:
    """What the previous format wrote: a 24-byte trailer with a keyed 64-bit BLAKE2b."""
    payload = open(path, "rb").read()[:BS]
    h = hashlib.blake2b(key=secret, digest_size=8)
    h.update(len(name).to_bytes(4, "little") + name.encode() + payload)
    trailer = struct.pack("<4sB3xQQ", b"RXBC", 2, BS, int.from_bytes(h.digest(), "little"))
    with open(path + ".x", "wb") as f:
        f.write(payload + trailer)
    os.replace(path + ".x", path)


DAMAGES = [_flip, _truncate, _forge, _version_2]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__)
def test_a_damaged_block_is_a_counted_corrupt_miss_for_the_jvm(jvm, tmp_path, damage):
    store = BlockStore(str(tmp_path / "blocks"), max_size=1 << 20)
    secret, name = _secret(store.directory), f"{KEY}-1"
    assert store.put(KEY, 1, _payload(1))
    path = store.path_of(name)
    assert jvm.read(store.directory, secret, name, BS) == _payload(1)  # verified, remembered
    damage(path, secret, name)
    before = jvm.counts()
    assert jvm.read(store.directory, secret, name, BS) is None
    assert jvm.read_range(store.directory, secret, name, BS, 0, 10) is None  # gone: a miss
    assert _delta(before, jvm.counts()) == {"jvm_blocks.corrupt": 1, "jvm_blocks.misses": 2}
    assert not os.path.exists(path)


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__)
def test_a_damaged_jvm_published_block_is_a_counted_corrupt_miss_for_python(jvm, tmp_path, damage):
    store = BlockStore(str(tmp_path / "blocks"), max_size=1 << 20)
    secret, name = _secret(store.directory), f"{KEY}-1"
    assert jvm.publish(store.directory, secret, name, _payload(1))
    assert jvm.adopt(store.directory, [name]) and store.adopt_published() == 1
    damage(store.path_of(name), secret, name)
    with CounterDeltas() as c:
        assert store.read(KEY, 1, BS, 0, BS) is None
    assert c["block_cache.corrupt_blocks"] == 1
    assert not os.path.exists(store.path_of(name)) and store.entries() == {}


def test_the_jvm_makes_room_itself_oldest_first_one_process_at_a_time(jvm, tmp_path):
    """A node where no Python store folds what the JVM published: ``DirectoryRoom`` sums the
    files under the data directory and deletes the oldest until they take at most nine
    tenths of the bound; while another process holds its lock it makes no room."""
    import fcntl

    directory = str(tmp_path / "blocks")
    secret = bytes(jvm.blocks.secret(jvm.path(directory), False))
    names = [f"{KEY}-{i}" for i in range(10)]
    for i, n in enumerate(names):
        assert jvm.publish(directory, secret, n, _payload(i))
        os.utime(os.path.join(directory, "data", n[:2], n), (1000 + i, 1000 + i))
    size = BS + TRAILER.size
    room = jvm.jvm.raptorx.cache.DirectoryRoom
    data = jvm.path(os.path.join(directory, "data"))
    with open(os.path.join(directory, "jvm-room.lock"), "a+b") as held:
        fcntl.lockf(held, fcntl.LOCK_EX)
        assert room.make(jvm.path(directory), data, 5 * size).isEmpty()
        fcntl.lockf(held, fcntl.LOCK_UN)
    made = room.make(jvm.path(directory), data, 5 * size).get()
    # 10 blocks, bound 5: down to at most 4.5 blocks' bytes, the oldest six deleted
    assert (made.total(), made.evicted(), made.evictedBytes()) == (4 * size, 6, 6 * size)
    left = sorted(os.listdir(os.path.join(directory, "data", KEY[:2])))
    assert left == sorted(names[6:])
    assert jvm.read(directory, secret, names[0], BS) is None  # evicted: a plain miss
    assert jvm.read(directory, secret, names[9], BS) == _payload(9)
    # under the bound: nothing deleted; an unknown bound: no room made
    assert room.make(jvm.path(directory), data, 5 * size).get().evicted() == 0
    assert room.make(jvm.path(directory), data, 0).isEmpty()
    # after making room, this JVM keeps a ledger: what it found plus what it publishes
    assert room.roomLeft(jvm.path(directory), 5 * size).get() == size
    room.published(jvm.path(directory), size)
    assert room.roomLeft(jvm.path(directory), 5 * size).get() == 0


def test_a_block_evicted_between_two_reads_is_a_plain_miss(jvm, tmp_path):
    store = BlockStore(str(tmp_path / "blocks"), max_size=1 << 20)
    secret, name = _secret(store.directory), f"{KEY}-2"
    assert store.put(KEY, 2, _payload(2))
    before = jvm.counts()
    assert jvm.read_range(store.directory, secret, name, BS, 5, 5) == _payload(2)[5:10]
    assert store.evict_to(0) == 1
    assert jvm.read_range(store.directory, secret, name, BS, 5, 5) is None
    assert jvm.read(store.directory, secret, name, BS) is None
    assert _delta(before, jvm.counts()) == {
        "jvm_blocks.hits": 1,
        "jvm_blocks.verified": 1,
        "jvm_blocks.misses": 2,
    }
    with CounterDeltas() as c:
        assert store.read(KEY, 2, BS, 0, BS) is None
    assert c.get("block_cache.corrupt_blocks", 0) == 0


# -- fragment entries ----------------------------------------------------------------------


def _fragment_hits(jvm: Jvm):
    return jvm.jvm.org.apache.spark.sql.execution.python.raptorx.FragmentHits


def _fragment_entry(jvm: Jvm):
    """The entry layout, in the JVM's contract package."""
    return jvm.jvm.raptorx.contract.FragmentEntry


def test_the_jvm_verifies_the_python_written_fragment_vector(jvm, tmp_path):
    """``FragmentHits.verified`` (what a hit runs) accepts the entry Python wrote, whole,
    and refuses it under another key, another secret or past an expiry it does not have."""
    directory = str(tmp_path / "fragments")
    shutil.copytree(os.path.join(VECTORS, "fragments"), directory)
    expected = json.load(open(os.path.join(directory, "expected.json")))
    hits, entry = _fragment_hits(jvm), _fragment_entry(jvm)
    path = hits.resolve(directory)
    assert os.path.relpath(str(entry.path(path, expected["key"])), directory) == expected["path"]
    secret = hits.secret(path).get()
    got = hits.verified(path, secret, expected["key"], 0)
    assert got.isDefined()
    assert hashlib.sha256(bytes(got.get())).hexdigest() == expected["entry_sha256"]
    assert hits.verified(path, secret, expected["key"], 2**62).isDefined()  # never expires
    other = "ff" + expected["key"][2:]
    os.makedirs(os.path.dirname(str(entry.path(path, other))), exist_ok=True)
    shutil.copy(os.path.join(directory, expected["path"]), str(entry.path(path, other)))
    assert not hits.verified(path, secret, other, 0).isDefined()  # the MAC names the key
    assert not hits.verified(path, bytes(32), expected["key"], 0).isDefined()


def _columnar_batch(spark, ids: list, names: list):
    """A Spark ``ColumnarBatch`` of a long and a string column (None: null), built through
    py4j as Spark's reader hands one to the JVM's fragment store."""
    j = spark._jvm
    types = j.org.apache.spark.sql.types.DataTypes
    vectors = j.org.apache.spark.sql.execution.vectorized
    ids_vector = vectors.OnHeapColumnVector(len(ids), types.LongType)
    names_vector = vectors.OnHeapColumnVector(len(names), types.StringType)
    for i, (n, s) in enumerate(zip(ids, names)):
        if n is None:
            ids_vector.putNull(i)
        else:
            ids_vector.putLong(i, n)
        if s is None:
            names_vector.putNull(i)
        else:
            data = s.encode()
            names_vector.putByteArray(i, data, 0, len(data))
    columns = spark.sparkContext._gateway.new_array(
        j.org.apache.spark.sql.vectorized.ColumnVector, 2
    )
    columns[0], columns[1] = ids_vector, names_vector
    return j.org.apache.spark.sql.vectorized.ColumnarBatch(columns, len(ids))


def test_a_fragment_entry_the_jvm_writes_is_read_by_python(jvm, spark, tmp_path):
    """``FragmentEntryWriter`` (the stream a split Spark's reader read is stored as) and
    ``FragmentStores.publish`` (header, MAC, atomic rename) write an entry that Python's
    ``FragmentCache`` verifies and serves with its rows."""
    directory = str(tmp_path / "fragments")
    cache = FragmentCache(
        directory, max_bytes=1 << 20, max_entries=10, max_entry_bytes=1 << 20, ttl=None
    )
    j = jvm.jvm
    ids, names = [1, None, 3], ["a", "été", None]
    batch = _columnar_batch(spark, ids, names)
    schema = StructType([StructField("id", LongType()), StructField("name", StringType())])
    java_schema = j.org.apache.spark.sql.types.DataType.fromJson(schema.json())
    writer = j.org.apache.spark.sql.execution.python.raptorx.FragmentEntryWriter(
        java_schema, 1 << 20
    )
    assert writer.add(batch)
    finished = writer.finish()
    writer.close()
    assert finished.isDefined()
    stream, length = finished.get()._1(), finished.get()._2()
    hits = _fragment_hits(jvm)
    key = bytes(range(40, 60))
    path = hits.resolve(directory)
    stores = j.org.apache.spark.sql.execution.python.raptorx.FragmentStores
    size = stores.publish(path, hits.secret(path).get(), key.hex(), stream, length, 0, False)
    entry_file = str(_fragment_entry(jvm).path(path, key.hex()))
    assert size == os.path.getsize(os.path.join(directory, entry_file))
    with CounterDeltas() as c:
        got = cache.get(key)
    assert got is not None and c.get("fragment_cache.corrupt", 0) == 0
    table = pa.Table.from_batches(got)
    assert table.column("id").to_pylist() == ids and table.column("name").to_pylist() == names
