"""What ``raptorx`` shows of a node's caches: ``raptorx cache stats|clear|invalidate|warm``,
``--json`` on ``table list``, ``table show`` and ``config show``, and ``--version``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from raptorx_py.cli import main
from tests.unit.test_cache_management import files_of, make_table, tier_settings


def _args(settings) -> list[str]:
    out = []
    for name in (
        "hive.metastore.url",
        "metrics.directory",
        "cache.base-directory",
        "fragment-result-cache.base-directory",
        "cache.enabled",
        "hive.parquet.metadata-cache-enabled",
        "fragment-result-cache.enabled",
        "cache.block-size",
    ):
        out += ["-p", f"{name}={settings.properties()[name]}"]
    return out


@pytest.fixture
def table(tmp_path):
    settings = tier_settings(tmp_path)
    root = make_table(tmp_path, settings)
    return settings, root


def test_version(capsys, tmp_path, monkeypatch):
    """The package's version, the jar's (version, build, pyspark built against, path), the
    installed pyspark; here a jar named by RAPTORX_NATIVE_JAR."""
    from importlib.metadata import version

    from tests.unit.test_native_jar import fake_jar

    jar = fake_jar(tmp_path / "x.jar", "raptorx.version=9.8\nbuild.id=abc\npyspark.version=7.0\n")
    monkeypatch.setenv("RAPTORX_NATIVE_JAR", str(jar))
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.splitlines() == [
        f"raptorx {version('raptorx_py')}",
        f"jar 9.8 (build abc, built against pyspark 7.0): {jar}",
        f"pyspark {version('pyspark')} installed",
    ]


def test_table_list_and_show_as_json(table, capsys):
    settings, root = table
    assert main(["table", "list", "--json", *_args(settings)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == {"metastore": settings.metastore_url, "tables": ["shop.events"]}
    assert main(["table", "show", "shop.events", "--json", *_args(settings)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["name"] == "shop.events" and shown["type"] == "EXTERNAL_TABLE"
    assert [c["name"] for c in shown["columns"]] == ["id", "qty", "note"]
    assert shown["partition_keys"] == [{"name": "day", "type": "date"}]
    assert shown["partitions"] == 3 and shown["rows"] == 12000
    assert "partition_list" not in shown
    assert main(["table", "show", "shop.events", "--json", "--partitions", *_args(settings)]) == 0
    parts = json.loads(capsys.readouterr().out)["partition_list"]
    assert [p["name"] for p in parts] == ["day=2024-01-01", "day=2024-01-02", "day=2024-01-03"]
    assert parts[0]["rows"] == 4000 and parts[0]["location"].endswith("events/day=2024-01-01")


def test_config_show_as_json_masks_secrets(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAPTORX_CONF_DIR", raising=False)
    url = "postgresql://meta:s3cret@db.example/hive"
    assert (
        main(
            [
                "config",
                "show",
                "--json",
                "-p",
                f"hive.metastore.url={url}",
                "-p",
                "hive.s3.aws-secret-key=abc",
                "-p",
                "hive.file-status-cache-tables=*",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "s3cret" not in out
    record = json.loads(out)
    assert record["files"] == [] and record["metastore"] == "postgresql://meta:***@db.example/hive"
    assert record["overridden"] == [
        "hive.metastore.url",
        "hive.s3.aws-secret-key",
        "hive.file-status-cache-tables",
    ]
    props = {p["name"]: p for p in record["properties"]}
    assert props["hive.s3.aws-secret-key"]["value"] == "<hidden>"
    assert "s3cret" not in props["hive.metastore.url"]["value"]
    # The value as set, not marked: `*` is `*` (the text once showed it as `**`).
    assert props["hive.file-status-cache-tables"]["value"] == "*"
    assert props["hive.file-status-cache-tables"]["differs"] is False
    assert props["fragment-result-cache.enabled"]["file"] == "config.properties"
    assert main(["config", "show", "--json", "--sources"]) == 0
    assert "properties" not in json.loads(capsys.readouterr().out)


def _stats_json(settings, capsys) -> dict:
    assert main(["cache", "stats", "--json", *_args(settings)]) == 0
    return json.loads(capsys.readouterr().out)


def test_cache_stats_text_and_json(table, capsys):
    from raptorx_py.metrics import flush

    settings, _ = table
    flush(settings.metrics_directory)  # what this process counted before is not ours
    before = {t["tier"]: t for t in _stats_json(settings, capsys)["tiers"]}
    assert main(["cache", "warm", "shop.events", "--no-progress", *_args(settings)]) == 0
    capsys.readouterr()
    record = _stats_json(settings, capsys)
    tiers = {t["tier"]: t for t in record["tiers"]}
    assert record["counters"] == "metrics sink"
    # The command's own counts reached the sink: six footers loaded, every block fetched.
    assert tiers["footer"]["misses"] - before["footer"]["misses"] == 6
    assert tiers["block"]["misses"] - before["block"]["misses"] == tiers["block"]["entries"]
    assert tiers["footer"]["entries"] == 6 and tiers["block"]["entries"] > 0
    assert tiers["metastore"]["entries"] is None and tiers["block"]["limit_unit"] == "bytes"
    assert main(["cache", "stats", *_args(settings)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "TIER",
        "ON",
        "ENTRIES",
        "SIZE",
        "LIMIT",
        "HITS",
        "MISSES",
        "EVICTIONS",
        "LOCATION",
    ]
    footer = next(line for line in lines if line.startswith("footer")).split()
    assert footer[1:3] == ["yes", "6"]


def test_cache_clear_invalidate_and_warm(table, capsys):
    settings, root = table
    assert (
        main(
            [
                "cache",
                "warm",
                "shop.events",
                "--columns",
                "id,qty",
                "--where",
                "day >= date '2024-01-02'",
                *_args(settings),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # Not a terminal here: no bar, just the summary line.
    assert out.count("\n") == 1 and out.startswith(
        "warmed shop.events: 4 files, 16 row groups (0 pruned), 32 column chunks of "
    )
    assert out.rstrip().endswith("read from the block cache; footers: 4 loaded, 0 cached")
    assert (
        main(
            [
                "cache",
                "invalidate",
                "shop.events",
                "--partition",
                "day=2024-01-02",
                *_args(settings),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("invalidated shop.events (1 partition(s), 2 data files): ")
    assert "2 footer entries" in out
    assert main(["cache", "clear", "--tier", "footer", "--tier", "listing", *_args(settings)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0] == "footer: 2 entries removed"
    assert out[1].startswith("listing, footer memory: cleared in every process of this node")
    assert (
        main(
            [
                "cache",
                "invalidate",
                "shop.events",
                "--partition",
                "day=1999-01-01",
                *_args(settings),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("raptorx: error: partition 'shop.events/day=1999-01-01' does not exist")
    assert err.count("\n") == 1
    assert files_of(root)  # the table's files were never touched
    assert all(os.path.exists(u[len("file://") :]) for u in files_of(root))


def test_cache_warm_shows_a_bar_only_on_a_terminal(table):
    """Through the installed command, stdout a pipe: no bar, no escape codes."""
    settings, _ = table
    exe = os.path.join(os.path.dirname(sys.executable), "raptorx")
    done = subprocess.run(
        [exe, "cache", "warm", "shop.events", *_args(settings)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("warmed shop.events: 6 files") and "\x1b" not in done.stdout
    assert done.stderr == ""
