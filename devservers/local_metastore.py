"""A SQLite metastore with its warehouse and metrics under one local directory, as the
benchmarks and the cluster tests set one up: its properties, one external table registered
in it, and TPC-H loaded into it for a run on the standalone cluster
(``devservers.standalone_cluster``; the database the cluster driver's ``tpch`` spec reads,
``devservers.cluster_driver``)."""

from __future__ import annotations

from pathlib import Path

#: The database the TPC-H tables are registered in for a cluster run.
CLUSTER_TPCH_DATABASE = "tpch_cluster"


def local_metastore_properties(root: Path) -> dict[str, str]:
    """The raptorx properties of a SQLite metastore at ``root/metastore.db`` with its
    warehouse at ``root/warehouse``, metrics under ``root/metrics``, cache directories under
    ``root`` and every cache tier off (``TIERS_OFF``: a run turns on what it measures)."""
    from raptorx_py.config import TIERS_OFF

    return {
        "hive.metastore.url": f"sqlite:///{root / 'metastore.db'}",
        "hive.metastore.warehouse.dir": str(root / "warehouse"),
        "metrics.directory": str(root / "metrics"),
        "cache.base-directory": str(root / "cache"),
        "fragment-result-cache.base-directory": str(root / "fragment-cache"),
        **TIERS_OFF,
    }


def register_table(
    properties: dict[str, str], qualified_name: str, url: str, *, sealed: bool = False
) -> None:
    """Register ``url`` as the external table ``qualified_name`` (and its database) in the
    metastore of ``properties``, created when missing; ``sealed`` as in
    ``register_external_table``."""
    # Deferred: table_registration imports pyarrow, which a benchmark's --help need not load.
    from raptorx_py.config import load_settings
    from raptorx_py.metastore import open_metastore
    from raptorx_py.tables.table_registration import register_external_table

    settings = load_settings(overrides=properties)
    with open_metastore(settings.metastore_connection, create=True) as ms:
        register_external_table(ms, settings, qualified_name, url, sealed=sealed)


def load_cluster_tpch(scale: float, root: Path, *, work_dir: str) -> dict[str, str]:
    """TPC-H at ``scale`` (generated under ``work_dir``, reused when already there) loaded
    into a FRESH metastore under ``root`` (``local_metastore_properties``; a metastore left
    there by an earlier run is deleted first), as ``CLUSTER_TPCH_DATABASE``; the properties."""
    # Deferred: tpch.load imports pyarrow, which the benchmark's --help need not load.
    from raptorx_py.config import load_settings
    from raptorx_py.tpch.load import load_tpch

    root.mkdir(parents=True, exist_ok=True)
    (root / "metastore.db").unlink(missing_ok=True)
    props = local_metastore_properties(root)
    load_tpch(
        scale,
        props["hive.metastore.warehouse.dir"],
        load_settings(overrides=props),
        database=CLUSTER_TPCH_DATABASE,
        work_dir=work_dir,
        progress=False,
    )
    return props
