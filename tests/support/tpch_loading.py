"""Loading the test TPC-H data into a warehouse as the integration tests do: generated once
in pytest's cache (``tests.support.tpch_fixtures.tpch_work_dir``, shared with the ``tpch_sf001_dir``
fixture) and copied without a progress bar."""

from __future__ import annotations

from raptorx_py.tpch.load import load_tpch
from tests.support.tpch_fixtures import tpch_work_dir


def load_cached_tpch(
    request,
    scale: float,
    warehouse_url: str,
    settings,
    *,
    database: str = "tpch",
    storage_format: str = "PARQUET",
) -> dict[str, str]:
    """``load_tpch`` of ``scale`` into ``warehouse_url``, registered in ``settings``'
    metastore as ``<database>.*`` (sealed, the loader's default) in ``storage_format``;
    table -> URL."""
    return load_tpch(
        scale,
        warehouse_url,
        settings,
        database=database,
        work_dir=str(tpch_work_dir(request)),
        progress=False,
        storage_format=storage_format,
    )


def load_tpch_into_bucket(
    request, env, s3_endpoint, scale: float, *, bucket: str, database: str
) -> dict[str, str]:
    """TPC-H at ``scale`` in its own ``bucket`` of the local S3 endpoint (under ``wh/``),
    registered in ``env``'s metastore as ``<database>.*``; the endpoint's S3 properties."""
    s3_endpoint.create_bucket(bucket)
    props = s3_endpoint.s3_properties()
    load_cached_tpch(request, scale, f"s3://{bucket}/wh", env.settings(**props), database=database)
    return props
