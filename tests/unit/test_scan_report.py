"""What a scan reports to the native provider (``datasource/scan_report.py``): the plan mark
and its lines, the counters scope a task's and a planning's counts are collected in, and the
task counts file."""

from __future__ import annotations

import pickle
import threading

import pytest
from pyspark.sql.datasource import InputPartition

from raptorx_py.config import load_settings
from raptorx_py.datasource.planning.options import resolve_options
from raptorx_py.datasource.planning.scan_planning import tiers_on
from raptorx_py.errors import ConfigError
from raptorx_py.jvm_contract import protocol as jvm_protocol
from raptorx_py.jvm_contract import scan_report
from raptorx_py.metrics import Counters


def test_the_plan_mark_survives_pickling_verbatim_and_parses_back():
    mark = scan_report.plan_mark(
        "db.t",
        ["ds", "h"],
        "external, no write ids (table id 7)",
        ["listing", "fragment"],
        {"planner.partitions_total": 5, "metastore.round_trips": 2, "scan.column.db.t.x": 1},
    )
    assert mark.startswith(jvm_protocol.PLAN_MARK) and mark.isascii()
    partition = scan_report.mark_plan(InputPartition(("split",)), mark)
    pickled = pickle.dumps(partition)
    assert mark.encode() in pickled  # what the JVM searches for, without unpickling
    lines = scan_report.parse_plan_mark(pickle.loads(pickled).plan)
    assert lines == {
        jvm_protocol.PLAN_TABLE_KEY: "db.t",
        jvm_protocol.PLAN_PARTITION_KEYS_KEY: "ds,h",
        jvm_protocol.PLAN_SNAPSHOT_KEY: "external, no write ids (table id 7)",
        jvm_protocol.PLAN_TIERS_KEY: "listing,fragment",
        "metastore.round_trips": "2",
        "planner.partitions_total": "5",
    }  # per-column counters are not a scan's figures


def test_a_scope_collects_what_is_counted_while_open_and_survives_a_drain():
    counters = Counters()
    counters.add("a")
    outer = counters.open_scope()
    counters.add("a", 2)
    with counters.scope() as inner:
        counters.add("b")
        counters.drain()  # a flush in the middle (the reader flushes per task)
        threading.Thread(target=counters.add, args=("c",)).start()
    counters.add("a")
    assert dict(inner) in ({"b": 1, "c": 1}, {"b": 1})  # the thread may finish after
    assert counters.close_scope(outer)["a"] == 3
    counters.add("a")
    assert dict(outer)["a"] == 3  # closed: no longer collects
    # two scopes that counted the same are told apart (closed by identity)
    x, y = counters.open_scope(), counters.open_scope()
    counters.close_scope(y)
    counters.add("z")
    assert dict(x) == {"z": 1} and dict(y) == {}


def test_task_counts_are_published_whole(tmp_path):
    path = tmp_path / "counts.tsv"
    scan_report.write_task_counts(str(path), {"reader.files_opened": 2, "zero": 0})
    assert path.read_text() == "reader.files_opened\t2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["counts.tsv"]  # no temporary file left
    # outside a Spark task there is no file to write to
    assert scan_report.task_counts_path() is None


def test_tiers_on_names_each_tier_a_scan_runs_with(tmp_path):
    settings = load_settings(
        overrides={
            "hive.metastore-cache-ttl": "0s",
            "hive.file-status-cache-tables": "tpch.*",
            "hive.parquet.metadata-cache-enabled": "true",
            "cache.enabled": "false",
            "fragment-result-cache.enabled": "true",
        },
        env={},
        cwd=tmp_path,
    )
    assert tiers_on(settings, "tpch.lineitem") == ["listing", "footer", "fragment"]
    assert tiers_on(settings, "sales.events") == ["footer", "fragment"]


def test_the_issues_misspelled_option_gets_a_suggestion():
    """A user's misspelling, ``.option("raptorx.chache...")``: the closest property."""
    with pytest.raises(ConfigError, match=r"did you mean 'cache.enabled'\?"):
        resolve_options({}, {"raptorx.chache.enabled": "true"})
