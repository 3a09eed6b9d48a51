import random

import pytest

from raptorx_py.errors import EmptyTableLocationError, LayoutError
from raptorx_py.hive.partition_names import escape_partition_value, unescape_partition_value
from raptorx_py.metrics import counters
from raptorx_py.storage.fs import filesystem_for, split_url
from raptorx_py.storage.hive_layout import (
    data_files_below,
    find_files,
    is_hidden,
    list_data_files,
    parse_partition_dir,
    walk_table,
)


@pytest.mark.parametrize(
    "value,escaped",
    [
        ("2024-01", "2024-01"),
        ("a/b", "a%2Fb"),
        ("x=y", "x%3Dy"),
        ("50%", "50%25"),
        ("a b", "a b"),
        ("ü", "ü"),
        ("", "__HIVE_DEFAULT_PARTITION__"),
        (None, "__HIVE_DEFAULT_PARTITION__"),
    ],
)
def test_escape_matches_hive(value, escaped):
    assert escape_partition_value(value) == escaped
    assert unescape_partition_value(escaped) == (value or None)


def test_unescape_leaves_malformed_percent_alone():
    assert unescape_partition_value("100%") == "100%"
    assert unescape_partition_value("%zz") == "%zz"


def test_hidden_names():
    assert is_hidden("_SUCCESS") and is_hidden(".crc") and not is_hidden("part-0.parquet")


def test_partition_dir_must_be_key_value():
    assert parse_partition_dir("k=v", "/t/k=v") == ("k", "v")
    with pytest.raises(LayoutError, match="/t/oops"):
        parse_partition_dir("oops", "/t/oops")
    with pytest.raises(LayoutError):
        parse_partition_dir("=v", "/t/=v")
    # The null marker is a value, never a key.
    with pytest.raises(LayoutError, match="names no partition column"):
        parse_partition_dir("__HIVE_DEFAULT_PARTITION__=v", "/t/__HIVE_DEFAULT_PARTITION__=v")


def _touch(path, data=b"x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_walk_partitioned_two_levels_skips_hidden(tmp_path, env):
    root = tmp_path / "t"
    _touch(root / "y=2024" / "m=01" / "a.parquet")
    _touch(root / "y=2024" / "m=02" / "b.parquet")
    _touch(root / "y=2024" / "m=02" / ".b.parquet.crc")
    _touch(root / "y=2024" / "m=02" / "_tmp" / "junk.parquet")
    _touch(root / "y=__HIVE_DEFAULT_PARTITION__" / "m=a%2Fb" / "c.parquet")
    _touch(root / "_SUCCESS")
    fs, path = filesystem_for(f"file://{root}", env.settings())
    keys, parts = walk_table(fs, path)
    assert keys == ["y", "m"]
    assert sorted((p.values for p in parts), key=str) == sorted(
        [("2024", "01"), ("2024", "02"), (None, "a/b")], key=str
    )
    assert sum(len(p.files) for p in parts) == 3


def test_walk_unpartitioned(tmp_path, env):
    _touch(tmp_path / "t" / "part-0.parquet")
    _touch(tmp_path / "t" / "part-1.parquet")
    fs, path = filesystem_for(str(tmp_path / "t"), env.settings())
    keys, parts = walk_table(fs, path)
    assert keys == [] and len(parts) == 1 and len(parts[0].files) == 2


def test_walk_rejects_inconsistent_keys(tmp_path, env):
    _touch(tmp_path / "t" / "a=1" / "f.parquet")
    _touch(tmp_path / "t" / "b=1" / "f.parquet")
    fs, path = filesystem_for(str(tmp_path / "t"), env.settings())
    with pytest.raises(LayoutError, match="b=1"):
        walk_table(fs, path)


def test_walk_rejects_unparseable_directory(tmp_path, env):
    _touch(tmp_path / "t" / "notapartition" / "f.parquet")
    fs, path = filesystem_for(str(tmp_path / "t"), env.settings())
    with pytest.raises(LayoutError, match="notapartition"):
        walk_table(fs, path)


def test_walk_missing_and_empty(tmp_path, env):
    fs, _ = filesystem_for(str(tmp_path), env.settings())
    with pytest.raises(EmptyTableLocationError, match="does not exist"):
        walk_table(fs, str(tmp_path / "nope"))
    _touch(tmp_path / "empty" / "_SUCCESS")
    with pytest.raises(EmptyTableLocationError, match="no data files"):
        walk_table(fs, str(tmp_path / "empty"))


def test_split_url():
    assert split_url("s3://bucket/a/b/") == ("s3", "bucket/a/b")
    assert split_url("file:///x/y") == ("file", "/x/y")
    assert split_url("/x/y") == ("file", "/x/y")
    with pytest.raises(OSError, match="unsupported URL scheme 'hdfs'"):
        split_url("hdfs://nn/x")


NAMES = ("part-0.parquet", "part-1.parquet", "_SUCCESS", ".part-0.crc", "x._COPYING_", "data")
DIRS = ("m=1", "m=2", "m=3", "_tmp", ".hidden", "_k=1", "m=4/n=1", "m=4/n=2", "m=4/_tmp")


@pytest.mark.parametrize("seed", range(8))
def test_one_listing_of_the_root_gives_each_directory_what_its_own_listing_gives(
    tmp_path, env, seed
):
    """``data_files_below`` against ``list_data_files`` of each directory, on seeded random
    layouts: hidden files and directories at every depth, a directory below another one
    (each of its files belongs to both), a directory that does not exist, a file outside
    every directory asked for."""
    rng = random.Random(seed)
    root = tmp_path / "t"
    for d in DIRS:
        for name in rng.sample(NAMES, rng.randint(0, len(NAMES))):
            path = root / d / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * rng.randint(0, 9))
    (root / "stray.parquet").parent.mkdir(parents=True, exist_ok=True)
    (root / "stray.parquet").write_bytes(b"y")
    fs, path = filesystem_for(str(root), env.settings())
    dirs = [f"{path}/{d}" for d in rng.sample(DIRS, 6)] + [f"{path}/m=4", f"{path}/m=9"]

    with counters.scope() as c:
        below = data_files_below(fs, path, dirs, find_files(fs, path))
    assert c["storage.listings"] == 1
    assert below == [list_data_files(fs, d) for d in dirs]
    assert below[-1] == []  # m=9 does not exist
    assert [f.path for f in below[-2]] == sorted(  # m=4: both directories below it
        f.path for d in (f"{path}/m=4/n=1", f"{path}/m=4/n=2") for f in list_data_files(fs, d)
    )
