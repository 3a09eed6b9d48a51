"""Database and table names follow Hive's rule (letters, digits,
underscore; case-insensitive) at every entry point, checked in one place (``names.py``)."""

from __future__ import annotations

import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cli import main
from raptorx_py.errors import InvalidNameError
from raptorx_py.hive.model import MANAGED_TABLE, Table
from raptorx_py.metastore.transactions import get_table_snapshots
from raptorx_py.names import parse_table_name
from raptorx_py.tables.commit import commit_write
from raptorx_py.tables.table_registration import register_external_table
from raptorx_py.tables.write_job import begin_write
from tests.unit.test_managed_write import COLUMNS, batch, read_ids, setup, write  # noqa: F401

BAD = ["a/delta_0000002_0000002", "t\nx", "t x", "../t", "t-1", "tä", ""]


def test_one_rule_for_every_parser(setup):  # noqa: F811
    """One parser (``names.parse_table_name``); the metastore's snapshots use it with no
    default database: a snapshot names its tables in full."""
    settings, ms, _, _ = setup
    assert parse_table_name("Db.T_1") == ("db", "t_1")
    assert parse_table_name("t") == ("default", "t")
    commit_write(ms, settings, *write(settings, ms, [batch(range(2))]))
    assert get_table_snapshots(ms, ["DB.t"])["DB.t"].table_id == ms.get_table("db", "t").id

    def snapshot(name):
        return get_table_snapshots(ms, [name])

    for bad in BAD:
        for parse in (parse_table_name, snapshot):
            with pytest.raises(InvalidNameError, match="letters .*digits and underscores"):
                parse(f"d.{bad}")
    with pytest.raises(InvalidNameError, match="not of the form"):
        snapshot("t")


def test_a_write_cannot_create_a_table_inside_another_tables_directory(setup):  # noqa: F811
    settings, ms, _, tmp = setup
    job, files = write(settings, ms, [batch(range(4))])
    commit_write(ms, settings, job, files)
    for bad in BAD:
        with pytest.raises(InvalidNameError, match=re.escape(f"invalid table name {bad!r}")):
            begin_write(ms, settings, "db", bad, COLUMNS, False, ("region",))
    assert ms.list_tables("db") == ["t"]
    assert sorted(os.listdir(tmp / "warehouse" / "db.db" / "t")) == ["region=EU", "region=US"]
    assert read_ids(settings, ms) == [0, 1, 2, 3]


def test_the_metastore_itself_refuses_bad_names_and_folds_case(setup):  # noqa: F811
    _, ms, _, tmp = setup
    with pytest.raises(InvalidNameError, match="invalid database name 'a.b'"):
        ms.create_database("a.b")
    ms.create_database("Sales", location=str(tmp / "s"))
    with pytest.raises(InvalidNameError, match="invalid table name 'x\\\\ny'"):
        ms.create_table(Table("sales", "x\ny", MANAGED_TABLE, str(tmp / "s" / "x"), COLUMNS))
    created = ms.create_table(Table("SALES", "Orders", MANAGED_TABLE, str(tmp / "s/o"), COLUMNS))
    assert (created.database, created.name) == ("sales", "orders")
    assert ms.get_table("Sales", "ORDERS").id == created.id


def test_registration_and_cli_refuse_bad_names(setup, capsys):  # noqa: F811
    settings, ms, _, tmp = setup
    root = tmp / "ext"
    root.mkdir()
    pq.write_table(pa.table({"id": [1]}), root / "f.parquet")
    with pytest.raises(InvalidNameError, match="invalid table name 'e/x'"):
        register_external_table(ms, settings, "db.e/x", f"file://{root}")
    url = settings.metastore_url
    assert (
        main(["table", "register", "db.e\nx", f"file://{root}", "-p", f"hive.metastore.url={url}"])
        == 2
    )
    assert "invalid table name 'e\\nx'" in capsys.readouterr().err
    assert main(["table", "show", "db.t/x", "-p", f"hive.metastore.url={url}"]) == 2
    assert "letters" in capsys.readouterr().err
    assert ms.list_databases() == []
