"""The changed-file advice both readers give (``storage/changed_files.py``): the Python
reader's words, and the JVM's, built from the read hand-off's ``changed_advice`` with the
split's ``partition`` put in, are the same text for every split (the JVM's substitution is
``JvmReadHandoff.Plan.adviceFor``: a plain replace of ``{partition}``)."""

from __future__ import annotations

import datetime
import json
from types import SimpleNamespace

import pytest

from raptorx_py.config.loader import build_settings
from raptorx_py.datasource.planning.planner import Split
from raptorx_py.datasource.reading.scan import changed_file_advice
from raptorx_py.hive.model import Column, Table
from raptorx_py.jvm_contract import jvm_read_handoff
from raptorx_py.storage.changed_files import PARTITION


def table(keys: tuple[Column, ...]) -> Table:
    return Table(
        database="db",
        name="t",
        table_type="EXTERNAL_TABLE",
        location="file:///w/t",
        columns=(Column("id", "bigint"),),
        partition_keys=keys,
    )


def plan_of(mark: str) -> dict:
    return json.loads(bytes.fromhex(mark.split("|")[1]))


def jvm_advice(plan: dict, split: dict) -> str:
    """What ``JvmReadHandoff.Plan.adviceFor`` makes of the hand-off."""
    return plan["changed_advice"].replace(PARTITION, split["partition"] or "<its partition>")


@pytest.mark.parametrize(
    ("keys", "values", "spec"),
    [
        ((Column("k", "int"),), (2,), "k=2"),
        (
            (Column("d", "date"), Column("s", "string")),
            (datetime.date(1993, 5, 1), "a/b c"),
            "d=1993-05-01/s=a%2Fb c",
        ),
        ((Column("k", "int"), Column("s", "string")), (None, "x"), None),
        ((), (), None),
    ],
)
def test_the_jvm_gives_the_python_readers_advice(keys, values, spec) -> None:
    settings = build_settings({"hive.file-status-cache-expire-time": ("90s", "test", None)})
    t = table(keys)
    split = Split(
        url="file:///w/t/f.parquet",
        size=10,
        version="posix:1:2:3",
        etag=None,
        partition_values=values,
    )
    mark = jvm_read_handoff.handoff_mark(
        settings, t, [SimpleNamespace(split=split, predicates=(), key=None)]
    )
    plan = plan_of(mark)
    (handed,) = plan["splits"]
    python = changed_file_advice(split, t, settings)
    assert jvm_advice(plan, handed) == python
    assert "(hive.file-status-cache-expire-time, 90s)" in python
    if spec is not None:
        assert handed["partition"] == spec
        assert f"`raptorx partition unseal db.t {spec}`" in python
    if not keys:
        assert handed["partition"] is None
        assert "`raptorx table register db.t <url> --replace`" in python
