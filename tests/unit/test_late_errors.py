"""Errors that would come late or unclear come early and name what was
wrong: a file whose column type differs from the table's, a write with both NULL and the
string __HIVE_DEFAULT_PARTITION__ as partition values, a password in `config show`."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.errors import SchemaError
from raptorx_py.tables.table_registration import register_external_table


@pytest.mark.parametrize(
    "table_type, good, bad, bad_type",
    [
        ("bigint", pa.array([1, 2], pa.int64()), pa.array([1.5, 2.0], pa.float64()), "double"),
        (
            "decimal(10,2)",
            pa.array([decimal.Decimal("1.25")], pa.decimal128(10, 2)),
            pa.array([decimal.Decimal("1.234")], pa.decimal128(10, 3)),
            "decimal128(10, 3)",
        ),
    ],
)
def test_a_file_whose_column_type_differs_names_file_column_table_and_types(
    env, tmp_path, table_type, good, bad, bad_type
):
    root = tmp_path / "t"
    (root / "p=1").mkdir(parents=True)
    pq.write_table(pa.table({"v": good}), root / "p=1" / "a.parquet")
    settings = env.settings()
    name = f"{env.unique_db()}.t"
    with env.metastore() as ms:
        table = register_external_table(ms, settings, name, f"file://{root}")
        assert table.columns[0].type == table_type
        pq.write_table(pa.table({"v": bad}), root / "p=1" / "b.parquet")  # added later
        plan = plan_scan(ms, settings, table, table.columns, [])
    bad_split = next(s for s in plan.splits if s.url.endswith("b.parquet"))
    with pytest.raises(SchemaError) as e:
        list(read_split(bad_split, table, table.columns, [], settings))
    message = str(e.value)
    for part in (bad_split.url, "column 'v'", bad_type, table_type, f"table {name}"):
        assert part in message, (part, message)


def test_null_and_the_default_partition_string_in_one_write_fail_before_anything_exists(tmp_path):
    from raptorx_py.config import load_settings
    from raptorx_py.metastore.store import Metastore, SqliteBackend
    from raptorx_py.tables.commit import commit_write
    from tests.unit.test_managed_write import batch, read_ids, write

    settings = load_settings(
        overrides={
            "hive.metastore.url": f"sqlite:///{tmp_path}/ms.db",
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
        },
        env={},
        cwd=tmp_path,
    )
    with Metastore(SqliteBackend(f"{tmp_path}/ms.db")) as ms:
        mixed = batch(range(4), region_of=lambda i: None if i % 2 else "__HIVE_DEFAULT_PARTITION__")
        job, files = write(settings, ms, [mixed])
        with pytest.raises(
            SchemaError,
            match=r"partition values \['__HIVE_DEFAULT_PARTITION__'\] "
            r"and \[NULL\].*same Hive "
            r"partition region=__HIVE_DEFAULT_PARTITION__",
        ):
            commit_write(ms, settings, job, files)
        assert ms.list_databases() == []  # no empty table left behind
        assert ms.get_transaction(job.txn_id).state == "aborted"
        # An existing table: refused the same way, before any file moves; the table keeps
        # its rows.
        job, files = write(settings, ms, [batch(range(2), region_of=lambda i: None)])
        commit_write(ms, settings, job, files)
        job, files = write(
            settings, ms, [batch(range(2, 4), region_of=lambda i: "__HIVE_DEFAULT_PARTITION__")]
        )
        with pytest.raises(SchemaError, match="same Hive partition"):
            commit_write(ms, settings, job, files)
        assert read_ids(settings, ms) == [0, 1]


def test_config_show_masks_the_metastore_password(tmp_path, capsys):
    from raptorx_py.cli import main

    url = "postgresql://hive:s3cr%40t/pw@db.example:5432/metastore?sslmode=require&password=x2"
    assert main(["config", "show", "-p", f"hive.metastore.url={url}"]) == 0
    out = capsys.readouterr().out
    assert "s3cr" not in out and "pw@" not in out and "x2" not in out
    assert (
        "postgresql://hive:<hidden>@db.example:5432/metastore?sslmode=require&password="
        "<hidden>" in out
    )
