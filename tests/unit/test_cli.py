import json
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
    assert "PARQUET files" in out
    assert "2 partitions" in out
    assert main(["table", "list", db, *_args(env)]) == 0
    assert capsys.readouterr().out.split() == [f"{db}.sales"]
    assert main(["table", "show", f"{db}.sales", "--partitions", *_args(env)]) == 0
    out = capsys.readouterr().out
    assert (
        "id bigint" in out and "m string (partition key)" in out and "2 partitions, 3 rows" in out
    )
    assert "2024-02  rows=1" in out and f"{table_dir}, PARQUET files" in out


def test_show_check_finds_a_partition_gone_and_partition_drop_drops_it(env, table_dir, capsys):
    """What PartitionMissingError tells a user to run (files-changing.md, "When the store
    holds less than the metastore says"); the files of a dropped partition stay."""
    import shutil

    name = f"{env.unique_db('cli')}.sales"
    assert main(["table", "register", name, f"file://{table_dir}", *_args(env)]) == 0
    shutil.rmtree(table_dir / "m=2024-02")
    capsys.readouterr()
    assert main(["table", "show", name, "--check", "--json", *_args(env)]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["absent"] == 1 and record["format"] == "PARQUET"
    assert [p["absent"] for p in record["partition_list"]] == [
        None,
        "does not exist, but the metastore records 1 file, 1 row",
    ]
    assert main(["partition", "drop", name, "m=2024-02", *_args(env)]) == 0
    assert f"dropped {name} partition m=2024-02" in capsys.readouterr().out
    assert main(["table", "show", name, "--check", *_args(env)]) == 0
    out = capsys.readouterr().out
    assert "1 partitions, 2 rows" in out and "checked 1 partitions: 0 absent" in out
    assert main(["partition", "drop", name, "m=2024-02", *_args(env)]) == 2  # no longer there


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


@pytest.mark.parametrize(
    "uri", ["thrift//localhost:9083", "localhost:9083", "http://h:9083", "thrift://localhost"]
)
def test_config_show_refuses_a_malformed_metastore_uri_with_its_file_and_line(
    tmp_path, capsys, uri
):
    """`raptorx config show` once exited 0 on these, so a script could not tell."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "hive.properties").write_text(f"# a metastore\nhive.metastore.uri={uri}\n")
    assert main(["config", "show", "--conf-dir", str(conf)]) == 2
    err = capsys.readouterr().err
    assert f"{conf / 'hive.properties'}:2, property 'hive.metastore.uri'" in err
    assert err.count("\n") == 1


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


# --- statistics recomputed by the commands that change a table ------------------------------


def _partitions(env, name):
    from raptorx_py.names import parse_table_name

    with env.metastore() as ms:
        table = ms.get_table(*parse_table_name(name))
        return {"/".join(p.values): p for p in ms.list_partitions(table)}


def _add_file(directory, ids, name="part-1.parquet"):
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), directory / name)


def test_unseal_change_seal_recomputes_statistics(env, table_dir, capsys):
    name = f"{env.unique_db('cli')}.sales"
    assert main(["table", "register", name, f"file://{table_dir}", "--seal", *_args(env)]) == 0
    assert main(["partition", "unseal", name, "m=2024-01", *_args(env)]) == 0
    _add_file(table_dir / "m=2024-01", [500, None])
    capsys.readouterr()
    assert main(["partition", "seal", name, "m=2024-01", *_args(env)]) == 0
    assert "statistics recomputed from its files" in capsys.readouterr().out
    p = _partitions(env, name)["2024-01"]
    assert p.parameters["sealed"] == "true" and p.row_count == 4
    assert (p.stats["id"].high, p.stats["id"].num_nulls) == (500, 1)
    # sealing again: the statistics describe the files, nothing is read but the listing
    assert main(["partition", "seal", name, "m=2024-01", *_args(env)]) == 0
    assert "statistics verified" in capsys.readouterr().out


def test_analyze_recomputes_one_partition_or_all(env, table_dir, capsys):
    name = f"{env.unique_db('cli')}.sales"
    assert main(["table", "register", name, f"file://{table_dir}", "--seal", *_args(env)]) == 0
    _add_file(table_dir / "m=2024-01", [9])
    _add_file(table_dir / "m=2024-02", [10])
    assert main(["table", "analyze", name, "--partition", "m=2024-01", *_args(env)]) == 0
    parts = _partitions(env, name)
    assert (parts["2024-01"].row_count, parts["2024-02"].row_count) == (3, 1)
    assert parts["2024-01"].parameters["sealed"] == "true"  # analyze keeps the seal
    assert main(["table", "analyze", name, *_args(env)]) == 0
    assert "statistics of 2 partitions recomputed" in capsys.readouterr().out
    assert _partitions(env, name)["2024-02"].stats["id"].high == 10


def test_analyze_an_unpartitioned_table_keeps_its_seal(env, tmp_path):
    from raptorx_py.names import parse_table_name

    root = tmp_path / "flat"
    _add_file(root, [1, 2], "part-0.parquet")
    name = f"{env.unique_db('cli')}.flat"
    assert main(["table", "register", name, f"file://{root}", "--seal", *_args(env)]) == 0
    _add_file(root, [7])
    assert main(["table", "analyze", name, *_args(env)]) == 0
    with env.metastore() as ms:
        table = ms.get_table(*parse_table_name(name))
    assert table.parameters["sealed"] == "true" and table.parameters["numRows"] == "3"
    assert table.stats["id"].high == 7


def test_partition_add_and_repair(env, table_dir, tmp_path, capsys):
    name = f"{env.unique_db('cli')}.sales"
    assert main(["table", "register", name, f"file://{table_dir}", *_args(env)]) == 0
    _add_file(table_dir / "m=2024-03", [4, 5], "part-0.parquet")
    elsewhere = tmp_path / "elsewhere"
    _add_file(elsewhere, [6], "part-0.parquet")
    capsys.readouterr()
    argv = ["partition", "add", name, "m=2024-09", "--location", str(elsewhere), "--seal"]
    assert main([*argv, *_args(env)]) == 0
    assert "1 rows, statistics computed from its files, sealed" in capsys.readouterr().out
    assert main(["partition", "add", name, "m=2024-09", *_args(env)]) == 2
    assert "already exist" in capsys.readouterr().err
    assert main(["table", "repair", name, "--seal", *_args(env)]) == 0
    out = capsys.readouterr().out
    assert "added partition m=2024-03" in out and "1 partitions added" in out
    parts = _partitions(env, name)
    assert parts["2024-03"].parameters["sealed"] == "true"
    assert "sealed" not in parts["2024-01"].parameters  # only what it added
    assert sorted(parts) == ["2024-01", "2024-02", "2024-03", "2024-09"]
    assert parts["2024-03"].row_count == 2 and parts["2024-03"].stats["id"].high == 5
    assert parts["2024-09"].location == f"file://{elsewhere}"
    assert main(["table", "repair", name, *_args(env)]) == 0
    assert "0 partitions added" in capsys.readouterr().out


def test_partition_add_refuses_other_columns(env, table_dir, capsys):
    name = f"{env.unique_db('cli')}.sales"
    assert main(["table", "register", name, f"file://{table_dir}", *_args(env)]) == 0
    (table_dir / "m=2024-05").mkdir()
    pq.write_table(
        pa.table({"x": pa.array([1], pa.int32())}), table_dir / "m=2024-05" / "f.parquet"
    )
    assert main(["partition", "add", name, "m=2024-05", *_args(env)]) == 2
    err = capsys.readouterr().err
    assert "has columns x int, but" in err and "has id bigint" in err
    assert "2024-05" not in _partitions(env, name)


def test_register_replace_keeps_seals_unless_told(env, table_dir):
    name = f"{env.unique_db('cli')}.sales"
    assert main(["table", "register", name, f"file://{table_dir}", *_args(env)]) == 0
    assert main(["partition", "seal", name, "m=2024-02", *_args(env)]) == 0
    assert main(["table", "register", name, f"file://{table_dir}", "--replace", *_args(env)]) == 0
    parts = _partitions(env, name)
    assert "sealed" not in parts["2024-01"].parameters
    assert parts["2024-02"].parameters["sealed"] == "true"
    argv = ["table", "register", name, f"file://{table_dir}", "--replace", "--no-keep-seals"]
    assert main([*argv, *_args(env)]) == 0
    assert all("sealed" not in p.parameters for p in _partitions(env, name).values())


def test_help_says_when_statistics_are_recomputed(capsys):
    def help_of(*command):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        return " ".join(capsys.readouterr().out.split())

    assert "recomputed" in help_of("partition", "seal")
    assert "computed from the files" in help_of("partition", "add")
    assert "ANALYZE TABLE" in help_of("table", "analyze")
    assert "MSCK REPAIR TABLE" in help_of("table", "repair")
    assert "computed again" in help_of("table", "register")


def _many_partitions(env, count):
    """An external table db.t of ``count`` partitions k=00000.. (no files: metadata only)."""
    from raptorx_py.hive.model import EXTERNAL_TABLE, Column, Partition, Table

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
    """``raptorx table show db.t --partitions | head`` once ended in a BrokenPipeError
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
    """The error once listed all 83 partitions on one line."""
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


def test_tpch_load_managed_refuses_orc(env, tmp_path, capsys):
    argv = ["tpch", "load", "--scale", "0.01", "--warehouse", str(tmp_path), "--managed"]
    assert main([*argv, "--format", "orc", *_args(env)]) == 2
    assert "--managed writes Parquet tables" in capsys.readouterr().err
