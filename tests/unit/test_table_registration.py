import datetime as dt
import os
from decimal import Decimal

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from raptorx_py.errors import CorruptFileError, EmptyTableLocationError, LayoutError, SchemaError
from raptorx_py.hive.model import ColumnStats
from raptorx_py.names import parse_table_name
from raptorx_py.tables.table_registration import register_external_table


def write_partition(
    root, name, ids, day0=dt.date(2024, 1, 1), file="part-0.parquet", row_group_size=None
):
    d = os.path.join(root, name) if name else root
    os.makedirs(d, exist_ok=True)
    t = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([day0 + dt.timedelta(days=i) for i in range(len(ids))], pa.date32()),
            "price": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(15, 2)),
            "tag": pa.array([None if i % 3 == 0 else f"t{i}" for i in ids], pa.string_view()),
        }
    )
    pq.write_table(t, os.path.join(d, file), row_group_size=row_group_size)
    return os.path.join(d, file)


@pytest.fixture
def ms(env):
    with env.metastore() as m:
        yield m


def test_registers_partitions_types_and_stats(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_partition(root, "m=2024-01", [1, 2, 3])
    write_partition(root, "m=2024-02", [4, 5], day0=dt.date(2024, 2, 1))
    write_partition(root, "m=__HIVE_DEFAULT_PARTITION__", [6])
    write_partition(root, "m=a%2Fb", [7])
    open(os.path.join(root, "_SUCCESS"), "w").close()
    db = env.unique_db()
    t = register_external_table(ms, env.settings(), f"{db}.t", f"file://{root}")
    assert t.table_type == "EXTERNAL_TABLE"
    assert [(c.name, c.type) for c in t.columns] == [
        ("id", "bigint"),
        ("day", "date"),
        ("price", "decimal(15,2)"),
        ("tag", "string"),
    ]
    assert [(k.name, k.type) for k in t.partition_keys] == [("m", "string")]
    parts = {p.values: p for p in ms.list_partitions(t)}
    assert set(parts) == {("2024-01",), ("2024-02",), (None,), ("a/b",)}
    jan = parts[("2024-01",)]
    assert jan.row_count == 3 and jan.parameters["numFiles"] == "1"
    assert jan.stats["id"] == ColumnStats(0, 1, 3)
    assert jan.stats["day"] == ColumnStats(0, dt.date(2024, 1, 1), dt.date(2024, 1, 3))
    assert jan.stats["tag"].num_nulls == 1 and jan.stats["tag"].low == "t1"


def test_integer_partition_keys_and_multi_file_stats(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_partition(root, "y=2024", [1, 2], file="a.parquet")
    write_partition(root, "y=2024", [10, 20], file="b.parquet", row_group_size=1)
    write_partition(root, "y=2025", [3])
    db = env.unique_db()
    t = register_external_table(ms, env.settings(), f"{db}.t", f"file://{root}")
    assert t.partition_keys[0].type == "int"  # as Spark infers it
    p = {p.values: p for p in ms.list_partitions(t)}[("2024",)]
    assert p.row_count == 4 and p.stats["id"] == ColumnStats(0, 1, 20)


def test_unpartitioned_table_has_table_stats(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_partition(root, None, [5, 6, 7])
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    assert t.partition_keys == () and t.parameters["numRows"] == "3"
    assert t.stats["id"] == ColumnStats(0, 5, 7)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bad_magic", "empty"])
def test_corrupt_file_names_the_file_and_changes_nothing(tmp_path, env, ms, damage):
    root = str(tmp_path / "t")
    write_partition(root, "m=1", [1, 2])
    bad = write_partition(root, "m=2", list(range(100)))
    data = open(bad, "rb").read()
    damaged = {
        "garbage": b"not parquet at all" * 10,
        "truncated": data[: len(data) // 2],
        "bad_magic": data[:-4] + b"XXXX",
        "empty": b"",
    }[damage]
    open(bad, "wb").write(damaged)
    db = env.unique_db()
    before = ms.list_databases()
    with pytest.raises(CorruptFileError, match=f"{bad}"):
        register_external_table(ms, env.settings(), f"{db}.t", root)
    assert ms.list_databases() == before


def write_orc_partition(root, name, ids):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    t = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "price": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(15, 2)),
            "at": pa.array([dt.datetime(2024, 1, 1, 0, 0, i % 60) for i in ids]),
        }
    )
    orc.write_table(t, os.path.join(d, "000000_0"))
    return os.path.join(d, "000000_0")


def test_an_orc_directory_registers_as_orc_with_row_counts(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_orc_partition(root, "m=1", [1, 2, 3])
    write_orc_partition(root, "m=2", list(range(10)))
    db = env.unique_db()
    t = register_external_table(ms, env.settings(), f"{db}.t", root)
    assert t.storage_format == "ORC"
    assert [(c.name, c.type) for c in t.columns] == [
        ("id", "bigint"),
        ("price", "decimal(15,2)"),
        ("at", "timestamp"),
    ]
    parts = {p.values: p for p in ms.list_partitions(t)}
    assert parts[("1",)].row_count == 3 and parts[("2",)].row_count == 10
    # Bounds where ORC's are exact (integers, decimals); none for timestamps.
    assert parts[("2",)].stats == {
        "id": ColumnStats(0, 0, 9),
        "price": ColumnStats(0, Decimal("0"), Decimal("2.25")),
        "at": ColumnStats(0, None, None),
    }


def test_orc_bounds_are_kept_only_where_exact_and_ordered_as_spark_orders():
    import pyorc

    from raptorx_py.storage.orc_files import column_stats

    def stats(kind, low, high, values=8):
        return {"kind": kind, "number_of_values": values, "minimum": low, "maximum": high}

    k = pyorc.TypeKind
    assert column_stats(stats(k.LONG, -3, 7), 10) == ColumnStats(2, -3, 7)
    assert column_stats(stats(k.DATE, dt.date(1582, 10, 15), dt.date(2024, 1, 1)), 8).low
    # Dates another calendar may count otherwise, doubles whose NaN ORC leaves out, strings
    # in UTF-16 order, timestamps, and a timestamp_ntz stored as bigint: null counts only.
    for kind, low, high in (
        (k.DATE, dt.date(1500, 1, 1), dt.date(2024, 1, 1)),
        (k.DOUBLE, 1.0, 2.0),
        (k.STRING, "a", "z"),
        (k.TIMESTAMP, dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)),
    ):
        assert column_stats(stats(kind, low, high), 9) == ColumnStats(1, None, None), kind
    assert column_stats(stats(k.LONG, 1, 2), 8, marked_ntz=True) == ColumnStats(0, None, None)
    assert column_stats({"kind": k.LONG, "number_of_values": 0}, 4) == ColumnStats(4, None, None)


def write_pyorc(path, schema: str, rows) -> str:
    """One ORC file written by pyorc (ORC's C++ writer), whose ORC types pyarrow reads
    partly (char/varchar as string, a union as Arrow's union)."""
    import pyorc

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f, pyorc.Writer(f, schema) as w:
        for row in rows:
            w.write(row)
    return path


def test_orc_char_and_varchar_register_as_declared_and_read_as_marked_strings(tmp_path, env, ms):
    from pyspark.sql.types import StringType

    from raptorx_py.hive.column_types import CHAR_VARCHAR_METADATA_KEY, spark_struct

    root = tmp_path / "t"
    write_pyorc(
        str(root / "000000_0"),
        "struct<id:int,c:char(5),v:varchar(4),s:string>",
        [(1, "ab", "abc", "x"), (2, None, None, None)],
    )
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", str(root))
    assert [(c.name, c.type) for c in t.columns] == [
        ("id", "int"),
        ("c", "char(5)"),
        ("v", "varchar(4)"),
        ("s", "string"),
    ]
    # Strings, marked as Spark's own readers mark them (its analyzer pads char on read).
    fields = {f.name: f for f in spark_struct(t.columns).fields}
    assert all(fields[n].dataType == StringType() for n in "cvs")
    assert fields["c"].metadata == {CHAR_VARCHAR_METADATA_KEY: "char(5)"}
    assert fields["v"].metadata == {CHAR_VARCHAR_METADATA_KEY: "varchar(4)"}
    assert fields["s"].metadata == {} and fields["id"].metadata == {}


def test_an_orc_union_column_is_refused_naming_it_and_why(tmp_path, env, ms):
    root = tmp_path / "t"
    bad = write_pyorc(
        str(root / "000000_0"), "struct<id:int,u:uniontype<int,string>>", [(1, 7), (2, "x")]
    )
    with pytest.raises(
        SchemaError,
        match=rf"file file://{bad}: column 'u' has ORC type uniontype<int,string>: Spark's "
        r"ORC reader does not read union types",
    ):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", str(root))


def test_a_corrupt_orc_file_names_the_file_and_changes_nothing(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_orc_partition(root, "m=1", [1, 2])
    bad = write_orc_partition(root, "m=2", list(range(100)))
    data = open(bad, "rb").read()
    open(bad, "wb").write(data[: len(data) // 2])
    before = ms.list_databases()
    with pytest.raises(CorruptFileError, match=f"{bad}: not readable ORC"):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    assert ms.list_databases() == before


def test_a_full_acid_orc_file_is_refused_saying_so(tmp_path, env, ms):
    d = tmp_path / "t"  # a bucket file of a delta directory, copied out of it
    d.mkdir(parents=True)
    row = pa.array([{"id": 1}, {"id": 2}], pa.struct([("id", pa.int64())]))
    acid = pa.table(
        {
            "operation": pa.array([0, 0], pa.int32()),
            "originalTransaction": pa.array([1, 1], pa.int64()),
            "bucket": pa.array([536870912] * 2, pa.int32()),
            "rowId": pa.array([0, 1], pa.int64()),
            "currentTransaction": pa.array([1, 1], pa.int64()),
            "row": row,
        }
    )
    orc.write_table(acid, str(d / "bucket_00000"))
    with pytest.raises(LayoutError, match="bucket_00000 is a full-ACID ORC file"):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", str(tmp_path / "t"))


def test_files_disagreeing_on_schema(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_partition(root, "m=1", [1])
    os.makedirs(os.path.join(root, "m=2"))
    pq.write_table(pa.table({"id": pa.array(["x"])}), os.path.join(root, "m=2", "f.parquet"))
    with pytest.raises(SchemaError, match="m=2/f.parquet has columns id string"):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)


def test_partition_key_inside_files_is_rejected(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_partition(root, "id=1", [1])
    with pytest.raises(LayoutError, match=r"\['id'\]"):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)


def test_bad_layout_and_empty_locations(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_partition(root, "not_a_partition", [1])
    with pytest.raises(LayoutError, match="not_a_partition"):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    with pytest.raises(EmptyTableLocationError, match="does not exist"):
        register_external_table(
            ms, env.settings(), f"{env.unique_db()}.t", str(tmp_path / "missing")
        )


def test_replace_and_refuse(tmp_path, env, ms):
    root = str(tmp_path / "t")
    write_partition(root, "m=1", [1])
    name = f"{env.unique_db()}.t"
    first = register_external_table(ms, env.settings(), name, root)
    with pytest.raises(FileExistsError):
        register_external_table(ms, env.settings(), name, root)
    assert register_external_table(ms, env.settings(), name, root, replace=True).id != first.id


def test_registration_sends_a_fixed_number_of_statements_whatever_the_partitions(
    tmp_path, env, ms, counted
):
    # Partitions are written in batches (metastore/partition_rows.py): one statement per
    # metadata table, not four per partition (40,025 statements for 10,000 partitions before).
    statements = {}
    for n in (1, 64):
        root = str(tmp_path / f"t{n}")
        for i in range(n):
            write_partition(root, f"m={i}", [i])
        db = env.unique_db()
        with counted() as c:
            t = register_external_table(ms, env.settings(), f"{db}.t", f"file://{root}")
        assert len(ms.list_partitions(t)) == n
        statements[n] = c["metastore.round_trips"]
    assert 0 < statements[1] == statements[64] <= 40


def test_table_names():
    assert parse_table_name("db.t") == ("db", "t")
    assert parse_table_name("t") == ("default", "t")
    for bad in ("a.b.c", ".t", "db."):
        with pytest.raises(SchemaError, match="not of the form"):
            parse_table_name(bad)
