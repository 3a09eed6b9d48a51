"""File identity on S3: a split carries the ETag it was planned with; an object overwritten
after planning fails the read with an error saying so, never mixing old and new bytes."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.datasource.planning.planner import plan_scan
from raptorx_py.datasource.reading.scan import read_split
from raptorx_py.errors import FileChangedError
from raptorx_py.storage.fs import filesystem_for
from raptorx_py.tables.table_registration import register_external_table
from tests.support.counter_deltas import CounterDeltas

pytestmark = pytest.mark.s3


def _put_table(fs, path, ids):
    with fs.open(path, "wb") as f:
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), f)


def test_overwritten_object_fails_the_read_by_name(env, s3_endpoint, s3_bucket):
    settings = env.settings(**s3_endpoint.s3_properties())
    fs, _ = filesystem_for(f"s3://{s3_bucket}", settings)
    path = f"{s3_bucket}/t/m=1/part-0.parquet"
    _put_table(fs, path, range(100))
    with env.metastore(**s3_endpoint.s3_properties()) as ms:
        table = register_external_table(ms, settings, f"{env.unique_db()}.t", f"s3://{s3_bucket}/t")
        plan = plan_scan(ms, settings, table, table.all_columns, [])
    (split,) = plan.splits
    assert split.etag and split.size > 0
    s3_endpoint.reset_stats()
    assert sum(b.num_rows for b in read_split(split, table, table.all_columns, (), settings)) == 100
    assert s3_endpoint.stats()["requests"]["HEAD"] == 0  # identity came from the listing

    _put_table(fs, path, range(1000, 1100))  # same size, other bytes, other ETag
    with pytest.raises(FileChangedError, match=rf"s3://{path} was overwritten after the query"):
        list(read_split(split, table, table.all_columns, (), settings))


@pytest.mark.parametrize("change", ["shrunk", "deleted"])
@pytest.mark.parametrize("tiers", ["off", "on"])
def test_a_listed_object_that_shrank_or_went_is_a_changed_file(
    env, s3_endpoint, s3_bucket, change, tiers
):
    """A file of a sealed partition that shrank or was deleted without
    `partition unseal`, read where the caches lack its bytes, failed with CorruptFileError
    (the store's "range not satisfiable" / "key does not exist"), after a warning that
    cached bytes "did not decode". It is a changed file: FileChangedError, its advice,
    counted in reader.files_changed."""
    on = {
        "cache.enabled": "true",
        "hive.parquet.metadata-cache-enabled": "true",
    }
    props = {**s3_endpoint.s3_properties(), **(on if tiers == "on" else {})}
    settings = env.settings(**props)
    fs, _ = filesystem_for(f"s3://{s3_bucket}", settings)
    path = f"{s3_bucket}/t/m=1/part-0.parquet"
    _put_table(fs, path, range(100_000))
    with env.metastore(**props) as ms:
        table = register_external_table(
            ms, settings, f"{env.unique_db()}.t", f"s3://{s3_bucket}/t", sealed=True
        )
        plan = plan_scan(ms, settings, table, table.all_columns, [])
    (split,) = plan.splits
    if change == "shrunk":
        _put_table(fs, path, range(3))
        assert fs.size(path) < split.size // 2
    else:
        fs.rm(path)
    with CounterDeltas() as c, pytest.raises(FileChangedError) as info:
        list(read_split(split, table, table.all_columns, (), settings))
    message = str(info.value)
    assert f"s3://{path}" in message
    assert "raptorx partition unseal" in message  # the advice
    assert c["reader.files_changed"] == 1
    assert c["reader.cache_fallbacks"] == 0  # not taken for damaged cached bytes
    assert isinstance(info.value.__cause__, FileChangedError | OSError)
