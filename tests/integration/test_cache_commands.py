"""``raptorx cache warm|invalidate|clear`` over the S3 endpoint, with Spark reading the same
table: a warmed table is read with no ranged GET, an invalidated partition is fetched again,
and Spark queries running while the tiers are cleared and invalidated return Spark's own
Parquet reader's rows every time (counted by the endpoint's requests and the tiers'
counters)."""

from __future__ import annotations

import io
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cli import main
from raptorx_py.storage.fs import filesystem_for
from raptorx_py.tables.table_registration import register_external_table

pytestmark = [pytest.mark.spark, pytest.mark.s3]

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")


@pytest.fixture
def events(env, s3_endpoint, s3_bucket, tmp_path):
    """``<db>.events`` on S3, sealed, three days of two files each; returns the table name,
    the properties every tier on under ``tmp_path``, and the rows as Spark's reader sees
    them from a local copy."""
    props = {
        **env.properties,
        **s3_endpoint.s3_properties(),
        "cache.enabled": "true",
        "cache.block-size": "8kB",
        "cache.base-directory": str(tmp_path / "cache"),
        "hive.parquet.metadata-cache-enabled": "true",
        "fragment-result-cache.enabled": "true",
        "fragment-result-cache.base-directory": str(tmp_path / "fragments"),
        "hive.file-status-cache-tables": "*",
    }
    settings = env.settings(**props)
    fs, _ = filesystem_for(f"s3://{s3_bucket}", settings)
    local = tmp_path / "local"
    base = 0
    for day in DAYS:
        for f in range(2):
            table = pa.table(
                {
                    "id": pa.array(range(base, base + 3000), pa.int64()),
                    "qty": pa.array([i % 50 for i in range(3000)], pa.int64()),
                }
            )
            base += 3000
            buf = io.BytesIO()
            pq.write_table(table, buf, row_group_size=1000)
            with fs.open(f"{s3_bucket}/events/day={day}/part-{f}.parquet", "wb") as out:
                out.write(buf.getvalue())
            (local / f"day={day}").mkdir(parents=True, exist_ok=True)
            (local / f"day={day}" / f"part-{f}.parquet").write_bytes(buf.getvalue())
    name = f"{env.unique_db('cachecmd')}.events"
    with env.metastore(**props) as ms:
        register_external_table(ms, settings, name, f"s3://{s3_bucket}/events", sealed=True)
    return name, props, str(local)


def _cli(props, *command) -> int:
    args = [arg for k, v in props.items() for arg in ("-p", f"{k}={v}")]
    return main([*command, *args])


def _sum_query(spark, name, props):
    df = spark.read.format("tiered_hive").options(**props).load(name)
    return df.where("qty < 10").groupBy("day").agg({"id": "sum", "*": "count"}).orderBy("day")


def _expected(spark, local):
    df = spark.read.parquet(local)
    rows = df.where("qty < 10").groupBy("day").agg({"id": "sum", "*": "count"}).orderBy("day")
    return [tuple(r) for r in rows.collect()]


def test_warm_then_read_with_no_ranged_get_invalidate_fetches_again(
    spark, events, s3_endpoint, counted, capsys
):
    name, props, local = events
    expected = _expected(spark, local)
    assert _cli(props, "cache", "warm", name, "--columns", "id,qty", "--no-progress") == 0
    assert capsys.readouterr().out.startswith(f"warmed {name}: 6 files, 18 row groups")
    s3_endpoint.reset_stats()
    with counted() as c:
        rows = [tuple(r) for r in _sum_query(spark, name, props).collect()]
    assert rows == expected
    requests = s3_endpoint.stats()["requests"]
    assert requests["RANGED_GET"] == requests["GET"] == 0, requests
    assert c["block_cache.misses"] == 0 and c["footer_cache.misses"] == 0

    assert _cli(props, "cache", "invalidate", name, "--partition", f"day={DAYS[1]}") == 0
    assert f"invalidated {name} (1 partition(s), 2 data files)" in capsys.readouterr().out
    s3_endpoint.reset_stats()
    with counted() as c:
        rows = [tuple(r) for r in _sum_query(spark, name, props).collect()]
    assert rows == expected
    # that day's two files, and no other, read again (by Spark's reader under AUTO)
    assert c["reader.spark_splits"] + c["reader.python_splits"] == 2
    assert c["fragment_cache.hits"] == 4 and c["fragment_cache.misses"] == 2
    assert s3_endpoint.stats()["requests"]["RANGED_GET"] > 0


def test_queries_stay_right_while_the_tiers_are_cleared_and_invalidated(spark, events, capsys):
    """Spark reads in its Python workers (other processes) while this process clears and
    invalidates every tier: two commands per query, the first as it starts."""
    name, props, local = events
    expected = _expected(spark, local)
    results: list = []
    errors: list = []
    started = threading.Semaphore(0)
    finished = threading.Event()

    def read_repeatedly():
        try:
            for _ in range(6):
                started.release()
                results.append([tuple(r) for r in _sum_query(spark, name, props).collect()])
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
        finally:
            finished.set()
            started.release()

    reader = threading.Thread(target=read_repeatedly)
    reader.start()
    commands = 0
    while started.acquire(timeout=600) and not finished.is_set():
        assert _cli(props, "cache", "clear") == 0
        assert _cli(props, "cache", "invalidate", name, "--partition", f"day={DAYS[0]}") == 0
        commands += 2
    reader.join()
    capsys.readouterr()
    assert not errors, errors
    assert commands >= 10 and results == [expected] * 6
