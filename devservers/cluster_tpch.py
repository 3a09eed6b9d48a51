"""TPC-H loaded for a run on the standalone cluster (``devservers.standalone_cluster``): a
SQLite metastore, a local warehouse and a metrics directory under one directory, and the
database the cluster driver's ``tpch`` spec reads (``devservers.cluster_driver``).

Shared by ``benchmarks.cluster_affinity`` and the cluster test, so both load the same way."""

from __future__ import annotations

from pathlib import Path

#: The database the TPC-H tables are registered in for a cluster run.
CLUSTER_TPCH_DATABASE = "tpch_cluster"


def local_metastore_properties(root: Path) -> dict[str, str]:
    """The raptorx properties of a SQLite metastore at ``root/metastore.db`` with its
    warehouse at ``root/warehouse`` and metrics under ``root/metrics``."""
    return {
        "hive.metastore.url": f"sqlite:///{root / 'metastore.db'}",
        "hive.metastore.warehouse.dir": str(root / "warehouse"),
        "metrics.directory": str(root / "metrics"),
    }


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
