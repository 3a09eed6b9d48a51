import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cli import main
from raptorx_py.metastore.store import Metastore, backend_for_url


@pytest.fixture
def table_dir(tmp_path):
    root = tmp_path / "sales"
    for m, ids in (("2024-01", [1, 2]), ("2024-02", [3])):
        (root / f"m={m}").mkdir(parents=True)
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64())}), root / f"m={m}" / "part-0.parquet"
        )
    return root


def _args(env):
    return ["-p", env.properties["hive.metastore.url"].join(["hive.metastore.url=", ""])]


def test_register_list_show(env, table_dir, capsys):
    db = env.unique_db("cli")
    assert main(["table", "register", f"{db}.sales", f"file://{table_dir}", *_args(env)]) == 0
    out = capsys.readouterr().out
    assert f"registered {db}.sales (EXTERNAL)" in out and "partition keys: m string" in out
    assert "2 partitions" in out
    assert main(["table", "list", db, *_args(env)]) == 0
    assert capsys.readouterr().out.split() == [f"{db}.sales"]
    assert main(["table", "show", f"{db}.sales", "--partitions", *_args(env)]) == 0
    out = capsys.readouterr().out
    assert (
        "id bigint" in out and "m string (partition key)" in out and "2 partitions, 3 rows" in out
    )
    assert "2024-02  rows=1" in out


def test_errors_are_one_line_exit_2(env, table_dir, capsys):
    assert main(["table", "show", "nodb.t", *_args(env)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("raptorx: error: database 'nodb' does not exist") and err.count("\n") == 1
    assert main(["table", "register", "x.y", str(table_dir / "missing"), *_args(env)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["config", "show", "-p", "hive.s3.conect-timeout=1s"]) == 2
    assert "hive.s3.connect-timeout" in capsys.readouterr().err  # the suggestion
    assert main(["config", "show", "-p", "nonsense"]) == 2
    assert "expected name=value" in capsys.readouterr().err


def test_config_show_lists_every_property(capsys):
    from raptorx_py.config import PROPERTIES

    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert all(p.name in out for p in PROPERTIES)


def test_entry_point_is_installed():
    exe = os.path.join(os.path.dirname(sys.executable), "raptorx")
    result = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True)
    assert "table" in result.stdout and "tpch" in result.stdout


def test_help_has_a_description_and_examples():
    from raptorx_py.cli import build_parser

    text = build_parser().format_help()
    assert "``" not in text and "raptorx: register and inspect metastore tables" in text
    assert "examples:" in text and "raptorx config show --sources" in text


def test_config_show_names_its_files_and_the_metastore(tmp_path, monkeypatch, capsys):
    conf = tmp_path / "mine"
    conf.mkdir()
    (conf / "hive.properties").write_text(
        "hive.metastore.url=postgresql://meta:s3cret@db.example/hive\n"
    )
    monkeypatch.chdir(tmp_path)  # no ./conf here
    monkeypatch.delenv("RAPTORX_CONF_DIR", raising=False)
    assert main(["config", "show", "--sources", "--conf-dir", str(conf)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"files read (later ones win): {conf / 'hive.properties'}",
        "metastore: postgresql://meta:***@db.example/hive",
    ]
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "files read (later ones win): none, defaults only\n"
        "metastore: sqlite:///~/.raptorx/metastore.db\n"
    )


def test_table_list_on_an_empty_metastore_names_it(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    Metastore(backend_for_url(url)).close()  # an empty one: `table list` never creates one
    assert main(["table", "list", "-p", f"hive.metastore.url={url}"]) == 0
    assert capsys.readouterr().out == f"(no tables in the metastore {url})\n"


def test_cli_errors_name_the_option_and_the_flag(env, table_dir, capsys):
    assert main(["config", "show", "-p", "cache.enabled=maybe"]) == 2
    assert capsys.readouterr().err.startswith(
        "raptorx: error: -p/--property, property 'cache.enabled': invalid value 'maybe'"
    )
    db = env.unique_db("cli")
    assert main(["table", "register", f"{db}.t", f"file://{table_dir}", *_args(env)]) == 0
    capsys.readouterr()
    assert main(["table", "register", f"{db}.t", f"file://{table_dir}", *_args(env)]) == 2
    assert "`raptorx table register --replace`" in capsys.readouterr().err
