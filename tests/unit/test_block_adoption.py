"""Block files format 3 and the blocks a JVM publishes: the JVM cannot update the index, so
it publishes ``adopt/*.names`` files, which a ``BlockStore`` folds into its index (in
``adopt_published``, in a put before it evicts, and in start-up recovery); it reads
``capacity`` to know how far it may fill. The JVM is played here by ``publish_like_jvm``,
which writes what ``raptorx.cache.BlockFiles.publish`` and ``.adopt`` write (the JVM itself
is checked against the same files in tests/integration/test_cache_entries_jvm.py)."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import stat
import struct

import pytest

from raptorx_py.cache import block_store, cache_files
from raptorx_py.cache.block_store import TRAILER, BlockStore, encode_trailer
from tests.support.counter_deltas import CounterDeltas
from tests.support.fake_clock import FakeClock

BS = 256
BLOCK = BS + TRAILER.size
KEY = "0123456789abcdef" * 2


def _name(i: int, key: str = KEY) -> str:
    return f"{key}-{i}"


def _payload(i: int) -> bytes:
    return bytes([i % 256]) * BS


def _store(tmp_path, **kwargs) -> BlockStore:
    kwargs.setdefault("max_size", 100 * BLOCK)
    kwargs.setdefault("clock", FakeClock(1000.0))
    store = BlockStore(str(tmp_path / "blocks"), **kwargs)
    assert store.enabled
    return store


def publish_like_jvm(store: BlockStore, names: list[str], *, payloads=None) -> str:
    """Publish each block as the JVM does (temp file, rename), then the names file naming
    them; returns the names file's path."""
    secret = cache_files.load_secret(store.directory, store.file_mode)
    for n, name in enumerate(names):
        payload = payloads[n] if payloads else _payload(int(name.rsplit("-", 1)[1]))
        tmp = os.path.join(store.tmp_dir, f"{os.getpid()}.{secrets.token_hex(8)}.part")
        with open(tmp, "wb") as f:
            f.write(payload + encode_trailer(secret, name, payload))
        final = store.path_of(name)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.replace(tmp, final)
    return write_names(store, "".join(n + "\n" for n in names).encode())


def write_names(store: BlockStore, text: bytes) -> str:
    path = os.path.join(store.adopt_dir, f"4242.{secrets.token_hex(8)}{block_store.ADOPT_SUFFIX}")
    with open(path, "wb") as f:
        f.write(text)
    return path


def test_adopted_blocks_get_rows_totals_and_are_read(tmp_path):
    store = _store(tmp_path)
    assert store.put(KEY, 0, _payload(0))
    names_file = publish_like_jvm(store, [_name(1), _name(2)])
    store.clock.advance(5.0)
    with CounterDeltas() as c:
        assert store.adopt_published() == 2
    assert c["block_cache.adopted"] == 2
    assert not os.path.exists(names_file)
    assert store.entries() == {_name(0): BLOCK, _name(1): BLOCK, _name(2): BLOCK}
    assert store.total_bytes() == 3 * BLOCK
    atimes = dict(store._connection().execute("SELECT name, atime FROM blocks"))
    assert atimes[_name(1)] == atimes[_name(2)] == 1005.0  # the store's clock, not mtime
    assert store.read(KEY, 2, BS, 10, 20) == _payload(2)[10:30]
    assert store.adopt_published() == 0  # nothing left to fold


def test_adoption_evicts_past_capacity_least_recently_used_first(tmp_path):
    store = _store(tmp_path, max_size=3 * BLOCK)
    for i in (0, 1):
        assert store.put(KEY, i, _payload(i))
        store.clock.advance(1.0)
    publish_like_jvm(store, [_name(2), _name(3)])
    with CounterDeltas() as c:
        assert store.adopt_published() == 2
    assert c["block_cache.evictions"] == 1
    assert set(store.entries()) == {_name(1), _name(2), _name(3)}  # block 0 was the oldest
    assert store.total_bytes() == 3 * BLOCK
    assert not os.path.exists(store.path_of(_name(0)))


def test_a_put_folds_published_blocks_before_it_evicts(tmp_path):
    store = _store(tmp_path, max_size=2 * BLOCK)
    publish_like_jvm(store, [_name(1), _name(2)])
    store.clock.advance(1.0)
    with CounterDeltas() as c:
        assert store.put(KEY, 3, _payload(3))
    assert c["block_cache.adopted"] == 2 and c["block_cache.evictions"] == 1
    assert store.total_bytes() == 2 * BLOCK == sum(store.entries().values())
    assert _name(3) in store.entries()


def test_recovery_folds_names_files_with_the_clock_as_last_access(tmp_path):
    store = _store(tmp_path)
    names_file = publish_like_jvm(store, [_name(4)])
    store.close()
    again = _store(tmp_path, clock=FakeClock(2000.0))
    assert again.last_recovery["adopted"] == 1
    assert not os.path.exists(names_file)
    atime = again._connection().execute("SELECT atime FROM blocks").fetchone()[0]
    assert again.entries() == {_name(4): BLOCK} and atime == 2000.0


def test_names_of_missing_or_wrong_size_files_adopt_nothing(tmp_path):
    store = _store(tmp_path)
    publish_like_jvm(store, [_name(1), _name(2)])
    os.unlink(store.path_of(_name(1)))
    with open(store.path_of(_name(2)), "r+b") as f:
        f.truncate(BLOCK - 1)
    long_one = publish_like_jvm(store, [_name(3)])
    with open(store.path_of(_name(3)), "ab") as f:
        f.write(b"x")  # longer than its trailer says
    with CounterDeltas() as c:
        assert store.adopt_published() == 0
    assert c.get("block_cache.adopted", 0) == 0
    assert store.entries() == {} and store.total_bytes() == 0
    assert os.listdir(store.adopt_dir) == [] and not os.path.exists(long_one)


def test_a_name_already_indexed_is_not_counted_twice(tmp_path):
    store = _store(tmp_path)
    assert store.put(KEY, 1, _payload(1))
    publish_like_jvm(store, [_name(1)])
    assert store.adopt_published() == 0
    assert store.entries() == {_name(1): BLOCK} and store.total_bytes() == BLOCK


@pytest.mark.parametrize(
    "text",
    [
        b"\xff\xfe not ascii\n",
        (_name(1) + "\n" + _name(2)).encode(),  # not newline-terminated: torn
        (_name(1) + "\nnot-a-block\n").encode(),
        b"",
    ],
    ids=["binary", "torn", "foreign-line", "empty"],
)
def test_a_garbage_names_file_is_removed_with_one_debug_log(tmp_path, caplog, text):
    store = _store(tmp_path)
    publish_like_jvm(store, [_name(1), _name(2)])
    for name in os.listdir(store.adopt_dir):  # only the garbage one stays
        os.unlink(os.path.join(store.adopt_dir, name))
    garbage = write_names(store, text)
    caplog.set_level(logging.DEBUG, logger=block_store.__name__)
    assert store.adopt_published() == 0
    assert not os.path.exists(garbage) and store.entries() == {}
    assert [r.message for r in caplog.records].count(
        f"block cache: unreadable names file {garbage} removed"
    ) == 1


def test_a_clear_removes_published_blocks_not_yet_adopted(tmp_path):
    store = _store(tmp_path)
    publish_like_jvm(store, [_name(1)])
    assert store.drop_prefix("") == 1
    assert not os.path.exists(store.path_of(_name(1))) and store.total_bytes() == 0


def test_the_store_publishes_its_capacity(tmp_path):
    store = _store(tmp_path, max_size=12345)
    path = os.path.join(store.directory, block_store.CAPACITY_FILE)
    assert open(path).read() == "12345\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    _store(tmp_path, max_size=999)
    assert open(path).read() == "999\n"
    assert os.listdir(store.tmp_dir) == []


def test_each_adoption_publishes_the_bytes_the_index_holds(tmp_path):
    """The JVM may fill the room the index left at the last adoption (a tenth of the
    capacity at least, ``BlockCachingFileSystem.fillRoom``): the second line of
    ``capacity``, written after the adoption's commit, even when nothing was adopted."""
    store = _store(tmp_path, max_size=10 * BLOCK)
    path = os.path.join(store.directory, block_store.CAPACITY_FILE)
    assert store.adopt_published() == 0
    assert open(path).read() == f"{10 * BLOCK}\n0\n"
    publish_like_jvm(store, [_name(1), _name(2)])
    assert store.put(KEY, 3, _payload(3))  # a put folds the published blocks in too
    assert store.adopt_published() == 0
    assert (
        open(path).read()
        == f"{10 * BLOCK}\n{3 * BLOCK}\n"
        == f"{10 * BLOCK}\n{store.total_bytes()}\n"
    )
    assert os.listdir(store.tmp_dir) == []


def test_the_trailer_is_hmac_sha256_of_length_name_and_payload(tmp_path):
    store = _store(tmp_path)
    assert store.put(KEY, 7, _payload(7))
    raw = open(store.path_of(_name(7)), "rb").read()
    assert len(raw) == BLOCK and TRAILER.size == 48
    magic, version, length, mac = struct.unpack("<4sB3xQ32s", raw[BS:])
    assert raw[BS + 5 : BS + 8] == b"\0\0\0"
    secret = open(os.path.join(store.directory, "cache.secret"), "rb").read()
    name = _name(7).encode()
    sha256 = hashlib.sha256  # HMAC by hand (RFC 2104), independent of the code under test
    inner = sha256(
        bytes(b ^ 0x36 for b in secret.ljust(64, b"\0"))
        + len(name).to_bytes(4, "little")
        + name
        + _payload(7)
    ).digest()
    outer = sha256(bytes(b ^ 0x5C for b in secret.ljust(64, b"\0")) + inner).digest()
    assert (magic, version, length, mac) == (b"RXBC", 3, BS, outer)


def test_a_version_2_block_is_a_counted_corrupt_miss_and_deleted(tmp_path):
    store = _store(tmp_path)
    secret = open(os.path.join(store.directory, "cache.secret"), "rb").read()
    name, payload = _name(1), _payload(1)
    # Version 2's trailer: a 64-bit BLAKE2b keyed with the secret, 24 bytes.
    h = hashlib.blake2b(key=secret, digest_size=8)
    h.update(len(name).to_bytes(4, "little") + name.encode() + payload)
    v2 = struct.pack("<4sB3xQQ", b"RXBC", 2, BS, int.from_bytes(h.digest(), "little"))
    path = store.path_of(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(payload + v2)
    with CounterDeltas() as c:
        assert store.read(KEY, 1, BS, 0, BS) is None  # 24-byte trailer: the wrong size
    assert c["block_cache.corrupt_blocks"] == 1 and not os.path.exists(path)
    # ... and one as long as a version 3 block (its trailer padded) fails its version check
    with open(path, "wb") as f:
        f.write(payload + v2 + b"\0" * (TRAILER.size - len(v2)))
    with CounterDeltas() as c:
        assert store.read(KEY, 1, BS, 0, BS) is None
    assert c["block_cache.corrupt_blocks"] == 1 and not os.path.exists(path)


def test_an_adoption_with_nothing_published_writes_nothing(tmp_path):
    """The planner asks for an adoption once per scan it hands to the JVM: with no names
    file and the capacity file already current, neither is rewritten (the file is the same
    one, not a new one renamed over it); once the index holds more, it is."""
    store = _store(tmp_path, max_size=10 * BLOCK)
    path = os.path.join(store.directory, block_store.CAPACITY_FILE)
    assert store.adopt_published() == 0
    first = os.stat(path).st_ino
    assert store.adopt_published() == 0
    assert os.stat(path).st_ino == first
    assert open(path).read() == f"{10 * BLOCK}\n0\n"
    assert store.put(KEY, 1, _payload(1))
    assert store.adopt_published() == 0
    assert os.stat(path).st_ino != first
    assert open(path).read() == f"{10 * BLOCK}\n{store.total_bytes()}\n"
