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


def _many_partitions(env, count):
    """An external table db.t of ``count`` partitions k=00000.. (no files: metadata only)."""
    from raptorx_py.metastore.model import EXTERNAL_TABLE, Column, Partition, Table

    db = env.unique_db("many")
    with Metastore(backend_for_url(env.properties["hive.metastore.url"])) as ms:
        ms.create_database(db)
        table = ms.create_table(
            Table(
                db,
                "t",
                EXTERNAL_TABLE,
                "file:///x",
                (Column("id", "bigint"),),
                (Column("k", "string"),),
            )
        )
        ms.add_partitions(
            table, [Partition((f"{i:05d}",), f"file:///x/k={i:05d}") for i in range(count)]
        )
    return f"{db}.t"


def test_show_partitions_into_a_closed_pipe_stops_quietly(env):
    """Issue 28: ``raptorx table show db.t --partitions | head`` ended in a BrokenPipeError
    traceback. 4,000 partition lines are more than a pipe holds, so the command is still
    writing when its reader closes the pipe."""
    name = _many_partitions(env, 4000)
    exe = os.path.join(os.path.dirname(sys.executable), "raptorx")
    proc = subprocess.Popen(
        [exe, "table", "show", name, "--partitions", *_args(env)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().startswith(name.encode())  # what `head -1` reads
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err  # 128 + SIGPIPE, as a shell reports `seq | head`
    assert err == ""


def test_a_missing_partitions_error_lists_a_bounded_readable_set(env, capsys):
    """Issue 28: the error listed all 83 partitions on one line."""
    name = _many_partitions(env, 83)
    assert main(["partition", "seal", name, "k=00100", *_args(env)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"partition '{name}/k=00100' does not exist. 83 partitions exist, among them" in err
    listed = [w.strip(",") for w in err.split() if w.startswith("k=0")]
    assert len(listed) == 10 and "and 73 more" in err
    # The closest to the missing name first (difflib's), then the first by name.
    assert listed[:3] == ["k=00080", "k=00070", "k=00060"] and listed[3] == "k=00000"
    assert f"raptorx table show {name} --partitions lists them all" in err
    # A few are listed whole, as before.
    small = _many_partitions(env, 3)
    assert main(["partition", "seal", small, "k=9", *_args(env)]) == 2
    assert "Existing partitions: k=00000, k=00001, k=00002" in capsys.readouterr().err
