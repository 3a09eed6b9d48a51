"""``raptorx locks show`` on every metastore backend."""

import pytest

from raptorx_py.cli import main
from raptorx_py.metastore.locks import SR, SW, LockComponent, X, try_lock
from tests.unit.txn_helpers import open_ms


@pytest.fixture
def url(metastore_url):
    open_ms(metastore_url).close()
    return metastore_url


def run(capsys, url, *args):
    code = main(["locks", "show", *args, "-p", f"hive.metastore.url={url}"])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _rows(lines):
    return [line.split() for line in lines[1:]]


def test_no_locks(capsys, url):
    code, lines, _ = run(capsys, url)
    assert code == 0
    assert lines[0].split() == [
        "LOCK_ID",
        "DATABASE",
        "TABLE",
        "PARTITION",
        "STATE",
        "TYPE",
        "TXN_ID",
    ]
    assert lines[1:] == ["(no locks)"]


def test_all_locks_then_filtered_by_table_and_partition(capsys, url):
    with open_ms(url) as ms:
        txn = ms.open_transaction()
        a = try_lock(
            ms,
            [LockComponent(SW, "db", "t", "p=1")],
            txn_id=txn,
            user="alice",
            host="box1",
            agent_info="loader",
        )
        b = try_lock(ms, [LockComponent(X, "db", "u")], user="bob", host="box2")
    code, lines, _ = run(capsys, url)
    assert code == 0
    assert _rows(lines) == [
        [str(a.lock_id), "db", "ACQUIRED", "SHARED_READ", str(txn)],
        [str(a.lock_id), "db", "t", "ACQUIRED", "SHARED_READ", str(txn)],
        [str(a.lock_id), "db", "t", "p=1", "ACQUIRED", "SHARED_WRITE", str(txn)],
        [str(b.lock_id), "db", "ACQUIRED", "SHARED_READ"],
        [str(b.lock_id), "db", "u", "ACQUIRED", "EXCLUSIVE"],
    ]
    _, lines, _ = run(capsys, url, "db.t")
    assert [r[-3:] for r in _rows(lines)] == [
        ["ACQUIRED", "SHARED_READ", str(txn)],
        ["ACQUIRED", "SHARED_WRITE", str(txn)],
    ]
    _, lines, _ = run(capsys, url, "db.t", "--partition", "p=1", "--extended")
    assert lines[0].split()[-5:] == ["ACQUIRED_AT", "LAST_HEARTBEAT", "USER", "HOST", "AGENT_INFO"]
    [row] = _rows(lines)
    assert row[:7] == [str(a.lock_id), "db", "t", "p=1", "ACQUIRED", "SHARED_WRITE", str(txn)]
    assert row[-3:] == ["alice", "box1", "loader"]
    assert row[7].endswith("Z") and row[8].endswith("Z")
    _, lines, _ = run(capsys, url, "db")
    assert len(_rows(lines)) == 5
    _, lines, _ = run(capsys, url, "other.t")
    assert lines[1:] == ["(no locks)"]


def test_multi_level_partition_and_bad_arguments(capsys, url):
    with open_ms(url) as ms:
        try_lock(ms, [LockComponent(SR, "db", "t", "a=1/b=2")])
    _, lines, _ = run(capsys, url, "db.t", "--partition", "a=1", "--partition", "b=2")
    assert [r[3] for r in _rows(lines)] == ["a=1/b=2"]
    code, _, err = run(capsys, url, "db", "--partition", "a=1")
    assert code == 2 and "--partition needs a <db>.<table>" in err
