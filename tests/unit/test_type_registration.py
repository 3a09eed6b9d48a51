"""Registration of what Spark's Parquet reader reads: timestamp kinds,
partition layouts Spark accepts, partition type inference and ``--partition-type``, and
clear refusals for what neither reads."""

import datetime as dt
import os
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cli import main
from raptorx_py.datasource.planning.planner import typed_partition_values
from raptorx_py.errors import LayoutError, SchemaError
from raptorx_py.hive.column_types import infer_partition_key_type
from raptorx_py.tables.table_registration import register_external_table


@pytest.fixture
def ms(env):
    with env.metastore() as m:
        yield m


def _write(root, part, table, name="part-0.parquet", **kw):
    d = os.path.join(root, part) if part else root
    os.makedirs(d, exist_ok=True)
    pq.write_table(table, os.path.join(d, name), **kw)


def _ids(n=2):
    return pa.table({"id": pa.array(range(n), pa.int64())})


def _types(t):
    return {c.name: c.type for c in t.all_columns}


# -- timestamp kinds --------------------------------------------------------------------------
def test_timestamp_kinds_are_typed_as_sparks_reader_types_them(tmp_path, env, ms):
    root = str(tmp_path / "t")
    naive = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]
    _write(
        root,
        None,
        pa.table(
            {
                "naive_us": pa.array(naive, pa.timestamp("us")),
                "naive_ms": pa.array([dt.datetime(2020, 1, 1)] * 2, pa.timestamp("ms")),
                "utc_us": pa.array(naive, pa.timestamp("us", tz="UTC")),
                "la_us": pa.array(naive, pa.timestamp("us", tz="America/Los_Angeles")),
            }
        ),
    )
    _write(
        str(tmp_path / "i96"),
        None,
        pa.table({"t96": pa.array(naive, pa.timestamp("us"))}),
        use_deprecated_int96_timestamps=True,
    )
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    # isAdjustedToUTC=false is Spark's timestamp_ntz; true is timestamp.
    assert _types(t) == {
        "naive_us": "timestamp_ntz",
        "naive_ms": "timestamp_ntz",
        "utc_us": "timestamp",
        "la_us": "timestamp",
    }
    assert t.stats["naive_us"].low == dt.datetime(1, 1, 1)
    t96 = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", str(tmp_path / "i96"))
    # INT96 (pyarrow shows it as a naive timestamp[ns]) is Spark's timestamp.
    assert _types(t96) == {"t96": "timestamp"}


# -- layouts and values Spark reads, refusals that name what is wrong --------------------------
def test_underscore_partition_key_is_a_partition_like_in_spark(tmp_path, env, ms):
    root = str(tmp_path / "t")
    _write(root, "_k=1", _ids())
    _write(root, "_k=2", _ids(3))
    open(os.path.join(root, "_SUCCESS"), "w").close()
    os.makedirs(os.path.join(root, "_temporary", "0"))
    _write(root, "_k=1", _ids(), name="part-9.parquet._COPYING_")
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    assert [k.name for k in t.partition_keys] == ["_k"]
    assert sorted(p.values for p in ms.list_partitions(t)) == [("1",), ("2",)]
    assert int(t.parameters.get("numRows", 0)) == 0  # partitioned: rows are per partition
    assert sum(p.row_count for p in ms.list_partitions(t)) == 5


def test_empty_and_default_partition_value_are_both_null(tmp_path, env, ms):
    root = str(tmp_path / "t")
    _write(root, "pk=", _ids())
    _write(root, "pk=1", _ids())
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    assert sorted((p.values for p in ms.list_partitions(t)), key=repr) == [("1",), (None,)]

    _write(root, "pk=__HIVE_DEFAULT_PARTITION__", _ids())
    with pytest.raises(
        LayoutError,
        match=r"pk=.*pk=__HIVE_DEFAULT_PARTITION__.* same "
        r"partition \(pk=null\)",
    ):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)


def test_values_python_cannot_hold_register_with_unknown_bounds(tmp_path, env, ms):
    root = str(tmp_path / "t")
    far = pa.array([dt.date(2020, 1, 1).toordinal() - 719163, 3_000_000], pa.int32())
    _write(
        root,
        None,
        pa.table({"d": far.cast(pa.date32()), "ts": pa.array([0, 2**62], pa.timestamp("us"))}),
    )
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    assert _types(t) == {"d": "date", "ts": "timestamp_ntz"}
    assert t.stats["d"].low is None and t.stats["d"].num_nulls == 0


@pytest.mark.parametrize(
    "column, match",
    [
        (
            pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("ns")),
            "column 'c' holds nanosecond timestamps",
        ),
        (pa.array([Decimal("1.5")], pa.decimal256(40, 5)), "column 'c' has Arrow type decimal256"),
    ],
)
def test_types_spark_does_not_read_are_refused_naming_file_and_column(
    tmp_path, env, ms, column, match
):
    root = str(tmp_path / "t")
    _write(root, None, pa.table({"c": column}))
    with pytest.raises(SchemaError, match=f"file .*part-0.parquet: {match}"):
        register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)


def test_cli_refusals_are_one_line_not_tracebacks(tmp_path, env, capsys):
    root = str(tmp_path / "t")
    _write(root, None, pa.table({"c": pa.array([1], pa.timestamp("ns"))}))
    args = ["-p", f"hive.metastore.url={env.properties['hive.metastore.url']}"]
    assert main(["table", "register", f"{env.unique_db()}.t", root, *args]) == 2
    err = capsys.readouterr().err
    assert "nanosecond timestamps" in err and "Traceback" not in err


# -- partition types as Spark infers them, or as given -----------------------------------------
@pytest.mark.parametrize(
    "values, expected",
    [
        (["1", "-2"], "int"),
        (["1", "3000000000"], "bigint"),
        (["12345678901234567890"], "decimal(20,0)"),
        (["1", "12345678901234567890"], "decimal(20,0)"),
        (["1.50", "2"], "double"),
        (["2020-01-01", None], "date"),
        (["2020-01-01", "1"], "string"),
        (["2020-02-30"], "string"),
        (["2020-01-01 00:00:00"], "string"),
        (["a", "1"], "string"),
        ([None], "string"),
    ],
)
def test_partition_types_are_inferred_as_spark_infers_them(values, expected):
    assert infer_partition_key_type(values) == expected
    assert infer_partition_key_type(values, inference=False) == "string"


def test_inferred_and_given_partition_types(tmp_path, env, ms):
    root = str(tmp_path / "t")
    for part in (
        "pdec=1.50/pd=2020-01-01/pn=7",
        "pdec=2/pd=2021-06-30/pn=08",
        "pdec=__HIVE_DEFAULT_PARTITION__/pd=2020-01-01/pn=9",
    ):
        _write(root, part, _ids())
    t = register_external_table(ms, env.settings(), f"{env.unique_db()}.t", root)
    assert _types(t) == {"id": "bigint", "pdec": "double", "pd": "date", "pn": "int"}
    assert sorted(
        typed_partition_values(t, p) for p in ms.list_partitions(t) if p.values[0] is not None
    ) == [(1.5, dt.date(2020, 1, 1), 7), (2.0, dt.date(2021, 6, 30), 8)]

    given = register_external_table(
        ms,
        env.settings(),
        f"{env.unique_db()}.t",
        root,
        partition_types={"pdec": "decimal(4,2)", "pn": "string"},
    )
    assert _types(given) == {"id": "bigint", "pdec": "decimal(4,2)", "pd": "date", "pn": "string"}
    off = register_external_table(
        ms, env.settings(), f"{env.unique_db()}.t", root, infer_partition_types=False
    )
    assert {k.type for k in off.partition_keys} == {"string"}

    with pytest.raises(
        SchemaError,
        match=r"pd=2020-01-01.*value '2020-01-01' of key 'pd' is "
        r"not a int",
    ):
        register_external_table(
            ms, env.settings(), f"{env.unique_db()}.t", root, partition_types={"pd": "int"}
        )
    with pytest.raises(SchemaError, match="partition key 'pd' cannot have type 'map<"):
        register_external_table(
            ms, env.settings(), f"{env.unique_db()}.t", root, partition_types={"pd": "map<int,int>"}
        )
    with pytest.raises(SchemaError, match=r"\['nope'\], which are not partition keys"):
        register_external_table(
            ms, env.settings(), f"{env.unique_db()}.t", root, partition_types={"nope": "int"}
        )


def test_cli_partition_type(tmp_path, env, capsys):
    root = str(tmp_path / "t")
    _write(root, "k=2020-01-01", _ids())
    args = ["-p", f"hive.metastore.url={env.properties['hive.metastore.url']}"]
    db = env.unique_db()
    assert main(["table", "register", f"{db}.a", root, *args]) == 0
    assert "partition keys: k date" in capsys.readouterr().out
    assert main(["table", "register", f"{db}.b", root, "--partition-type", "k=string", *args]) == 0
    assert "partition keys: k string" in capsys.readouterr().out
    assert main(["table", "register", f"{db}.c", root, "--no-partition-type-inference", *args]) == 0
    assert "partition keys: k string" in capsys.readouterr().out


def test_which_partition_key_and_column_filters_are_evaluated_here():
    from raptorx_py import predicates as preds

    types = {"k": "double", "d": "date", "n": "timestamp_ntz", "t": "timestamp"}
    keys = {"k", "d"}
    # A double key's NaN is unequal to itself in Python, equal in Spark: left to Spark.
    assert not preds.is_exact(preds.Comparison("=", "k", 1.5), types, keys)
    assert preds.is_exact(preds.Comparison("=", "d", dt.date(2020, 1, 1)), types, keys)
    # No time zone is involved in timestamp_ntz: compared exactly, here as in Spark.
    assert preds.is_exact(preds.Comparison("<", "n", dt.datetime(2020, 1, 1)), types, keys)
    assert not preds.is_exact(preds.Comparison("<", "t", dt.datetime(2020, 1, 1)), types, keys)
    # char/varchar: their filters reach the reader on the values as stored (Spark pads a
    # char above the scan, and never pushes its padded comparisons), compared as strings.
    chars = {"c": "char(5)", "v": "varchar(4)"}
    assert preds.is_exact(preds.Comparison("=", "c", "ab"), chars, set())
    assert preds.is_exact(preds.StringMatch("starts", "v", "a"), chars, set())
    batch = pa.record_batch(
        {
            "n": pa.array(
                [dt.datetime(1, 1, 1), None, dt.datetime(9999, 12, 31, 23, 59, 59, 999999)],
                pa.timestamp("us"),
            )
        }
    )
    expr = preds.to_arrow(
        preds.Comparison("<=>", "n", dt.datetime(9999, 12, 31, 23, 59, 59, 999999))
    )
    assert batch.filter(expr).num_rows == 1


# -- INT96 read at microseconds, with Spark's rebase rule ----------------------------------
def _int96_file(path, values, metadata=None):
    t = pa.table({"t96": pa.array(values, pa.timestamp("us"))})
    if metadata:
        t = t.replace_schema_metadata(metadata)
    pq.write_table(t, path, use_deprecated_int96_timestamps=True)


def _read_int96(env, root):
    from raptorx_py.datasource.planning.planner import Split
    from raptorx_py.datasource.reading.scan import read_split

    settings = env.settings()
    with env.metastore() as ms:
        t = register_external_table(ms, settings, f"{env.unique_db()}.t", root)
    path = os.path.join(root, "part-0.parquet")
    split = Split(f"file://{path}", os.path.getsize(path), None, None)
    return [
        v
        for b in read_split(split, t, t.columns, (), settings)
        for v in b.column("t96").to_pylist()
    ]


def test_int96_reads_years_1_to_9999_at_microseconds(tmp_path, env):
    from raptorx_py.errors import UnsupportedValueError

    utc = dt.UTC
    far = [
        dt.datetime(1, 1, 1),
        dt.datetime(1850, 1, 1),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    ]
    root = str(tmp_path / "pyarrow")
    os.makedirs(root)
    # No Spark version: Spark 4 reads it as written (int96RebaseModeInRead CORRECTED).
    _int96_file(os.path.join(root, "part-0.parquet"), far)
    assert _read_int96(env, root) == [v.replace(tzinfo=utc) for v in far]

    new = str(tmp_path / "spark4")
    os.makedirs(new)
    _int96_file(os.path.join(new, "part-0.parquet"), far, {"org.apache.spark.version": "4.0.0"})
    assert _read_int96(env, new) == [v.replace(tzinfo=utc) for v in far]

    # Spark before 3.1 wrote INT96 in the hybrid calendar, which Spark rebases: refused
    # before 1900 (where rebasing moves values), read after.
    legacy = str(tmp_path / "spark2")
    os.makedirs(legacy)
    _int96_file(os.path.join(legacy, "part-0.parquet"), far, {"org.apache.spark.version": "2.4.8"})
    with pytest.raises(
        UnsupportedValueError,
        match=r"spark2/part-0.parquet: column 't96' "
        r"holds timestamp\[us\] values before 1900",
    ):
        _read_int96(env, legacy)
    marked = str(tmp_path / "marked")
    os.makedirs(marked)
    recent = [dt.datetime(1900, 1, 1), dt.datetime(9999, 12, 31)]
    _int96_file(
        os.path.join(marked, "part-0.parquet"),
        recent,
        {"org.apache.spark.version": "3.5.0", "org.apache.spark.legacyINT96": ""},
    )
    assert _read_int96(env, marked) == [v.replace(tzinfo=utc) for v in recent]


def test_dates_of_a_legacy_spark_file_before_the_gregorian_switch_are_refused(tmp_path, env):
    """Spark before 3.0 wrote dates in the hybrid calendar (``datetimeRebaseSpec``): Spark
    rebases those before 1582-10-15; refused here, later ones read."""
    from raptorx_py.datasource.planning.planner import Split
    from raptorx_py.datasource.reading.scan import read_split
    from raptorx_py.errors import UnsupportedValueError

    def read(days, version):
        root = str(tmp_path / f"{version}-{days[0].year}")
        os.makedirs(root)
        path = os.path.join(root, "part-0.parquet")
        t = pa.table({"d": pa.array(days, pa.date32())})
        pq.write_table(t.replace_schema_metadata({"org.apache.spark.version": version}), path)
        settings = env.settings()
        with env.metastore() as ms:
            table = register_external_table(ms, settings, f"{env.unique_db()}.t", root)
        split = Split(f"file://{path}", os.path.getsize(path), None, None)
        return [
            v
            for b in read_split(split, table, table.columns, (), settings)
            for v in b.column("d").to_pylist()
        ]

    old = [dt.date(1500, 1, 1), dt.date(2020, 1, 1)]
    assert read(old, "3.0.0") == old
    with pytest.raises(UnsupportedValueError, match="column 'd' holds date32.* before 1582-10-15"):
        read(old, "2.4.8")
    assert read([dt.date(1582, 10, 15)], "2.4.8") == [dt.date(1582, 10, 15)]
