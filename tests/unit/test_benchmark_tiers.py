"""The benchmark's cache configurations (cold and warm) and the report's storage-tier table,
without Spark or an object store."""

from __future__ import annotations

import pytest

from benchmarks import configurations, report
from benchmarks.configurations import BenchContext


def _run(metrics, requests=None, nbytes=0):
    return {
        "seconds": 1.0,
        "rows": 4,
        "requests": requests or {},
        "bytes": nbytes,
        "metrics": metrics,
    }


COLD = {
    "listing_cache.misses": 80,
    "footer_cache.misses": 80,
    "block_cache.misses": 80,
    "block_cache.bytes_from_remote": 4 * 1024**2,
    "block_cache.put_errors": 1,
}
WARM = {
    "listing_cache.hits": 80,
    "footer_cache.hits_memory": 70,
    "footer_cache.hits_disk": 10,
    "block_cache.hits": 90,
    "block_cache.bytes_from_cache": 4 * 1024**2,
    "block_cache.evictions": 2,
    "block_cache.corrupt_blocks": 1,
}


@pytest.fixture
def results():
    return {
        "scale": 0.01,
        "latency_ms": 20.0,
        "warmup": 1,
        "repetitions": 1,
        "configurations": [
            {"name": "tiered-hive-s3"},
            {"name": "tiered-hive-s3-cold"},
            {"name": "tiered-hive-s3-warm"},
        ],
        "queries": {
            "1": {
                "configs": {
                    "tiered-hive-s3": {
                        "runs": [
                            _run({"reader.files_opened": 80}, {"LIST": 80, "RANGED_GET": 160}, 5000)
                        ]
                    },
                    "tiered-hive-s3-cold": {
                        "runs": [_run(COLD, {"LIST": 80, "RANGED_GET": 80}, 4 * 1024**2)]
                    },
                    "tiered-hive-s3-warm": {"runs": [_run(WARM)]},
                }
            },
            "6": {
                "configs": {
                    "tiered-hive-s3": {"runs": [_run({})]},
                    "tiered-hive-s3-cold": {
                        "runs": [_run(COLD, {"LIST": 80, "RANGED_GET": 80}, 4 * 1024**2)]
                    },
                    "tiered-hive-s3-warm": {"runs": [_run(WARM)]},
                }
            },
        },
    }


def test_tier_figures_sum_each_tiers_counters():
    f = report.tier_figures(WARM)
    assert (f["listing_hits"], f["footer_hits"], f["block_hits"]) == (80, 80, 90)
    assert (f["block_evictions"], f["corrupt"], f["put_errors"]) == (2, 1, 0)
    assert report.tier_figures({})["footer_misses"] == 0


def test_report_shows_each_cached_configurations_tiers_per_query(results):
    text = report.render_markdown(results)
    section = text.split("## Storage tiers per query", 1)[1].split("\n## ", 1)[0]
    # Only configurations with tier counters get a table.
    assert "### tiered-hive-s3-cold" in section and "### tiered-hive-s3-warm" in section
    assert "### tiered-hive-s3\n" not in section
    cold = section.split("### tiered-hive-s3-cold", 1)[1].split("###", 1)[0]
    assert (
        "| Q1 | 160 | 4.0 MiB | 0 / 80 | 0 / 80 | 0 / 80 | 0 B / 4.0 MiB | 0 / 0 / 0 | 1 | 0 |"
        in cold
    )
    assert (
        "| **total** | 320 | 8.0 MiB | 0 / 160 | 0 / 160 | 0 / 160 | 0 B / 8.0 MiB "
        "| 0 / 0 / 0 | 2 | 0 |" in cold
    )
    warm = section.split("### tiered-hive-s3-warm", 1)[1]
    assert "| Q6 | 0 | 0 B | 80 / 0 | 80 / 0 | 90 / 0 | 4.0 MiB / 0 B | 0 / 0 / 2 | 0 | 1 |" in warm


def test_cache_configurations_are_registered():
    names = [c.name for c in configurations.all_configurations()]
    assert (
        names.index("tiered-hive-s3")
        < names.index("tiered-hive-s3-cold")
        < names.index("tiered-hive-s3-warm")
    )


def test_the_default_run_shows_the_fragment_cache_and_spark_cache_table():
    # The main job's report must show the product's headline (warm reads with the fragment
    # result cache) beside what a user would otherwise reach for (CACHE TABLE).
    names = [c.name for c in configurations.get_configurations(None)]
    assert names[0] == "spark-parquet-local"
    assert "tiered-hive-s3-warm-fragments" in names
    assert "spark-cache-table" in names


def _registered_options(config, ctx, monkeypatch):
    seen = []
    monkeypatch.setattr(
        configurations, "tiered_views", lambda options: lambda _ctx: seen.append(dict(options))
    )
    config.register_views(ctx)
    return seen[-1]


def test_cold_runs_get_fresh_caches_and_warm_runs_keep_theirs(tmp_path, monkeypatch):
    ctx = BenchContext(
        spark=None, database="tpch", local_data_dir="", properties={}, work_dir=str(tmp_path)
    )
    cold, warm = configurations.get_configurations(["tiered-hive-s3-cold", "tiered-hive-s3-warm"])
    first = _registered_options(cold, ctx, monkeypatch)
    second = _registered_options(cold, ctx, monkeypatch)
    for options in (first, second):
        assert {k: options[k] for k in configurations.ALL_TIERS} == configurations.ALL_TIERS
    assert first["cache.base-directory"] != second["cache.base-directory"]
    assert first["hive.file-status-cache-size"] != second["hive.file-status-cache-size"]
    assert _registered_options(warm, ctx, monkeypatch) == _registered_options(
        warm, ctx, monkeypatch
    )

    cold_root = tmp_path / "cache" / "tiered-hive-s3-cold"
    (cold_root / "run-1" / "blocks").mkdir(parents=True)
    cold.prepare(ctx)
    assert not cold_root.exists()

    warm_root = tmp_path / "cache" / "tiered-hive-s3-warm"
    (warm_root / "blocks").mkdir(parents=True)
    warm.prepare(ctx)  # the first run: what an earlier benchmark left goes
    assert not warm_root.exists()
    (warm_root / "blocks").mkdir(parents=True)
    warm.prepare(ctx)  # later runs keep what the warm-up filled
    assert (warm_root / "blocks").is_dir()


def test_every_storing_run_stores_anew_over_warm_storage_tiers(tmp_path, monkeypatch):
    ctx = BenchContext(
        spark=None, database="tpch", local_data_dir="", properties={}, work_dir=str(tmp_path)
    )
    (storing,) = configurations.get_configurations(["tiered-hive-s3-warm-storing"])
    first = _registered_options(storing, ctx, monkeypatch)
    second = _registered_options(storing, ctx, monkeypatch)
    # the storage tiers' directory is kept, the fragments' is new each run
    assert first["cache.base-directory"] == second["cache.base-directory"]
    fragments = "fragment-result-cache.base-directory"
    assert first[fragments] != second[fragments]
    for options in (first, second):
        assert options["fragment-result-cache.enabled"] == "true"
        assert options["fragment-result-cache.store-on-first-use"] == "true"
        assert options[fragments].startswith(options["cache.base-directory"])


def test_a_cold_run_empties_its_caches_while_a_late_fill_still_writes(tmp_path, monkeypatch):
    # At SF 10 the JVM was still storing the previous query's blocks when the next cold run
    # emptied the caches, and rmtree failed with "Directory not empty": the removal retries,
    # and a writer arriving after the move recreates only its own (old) run's directory.
    import errno
    import shutil

    root = tmp_path / "cache" / "tiered-hive-s3-cold"
    (root / "run-1" / "blocks").mkdir(parents=True)
    (root / "run-1" / "blocks" / "a").write_bytes(b"x")
    real_rmtree = shutil.rmtree
    calls = []

    def racing_rmtree(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:  # a late fill's file lands while the first pass removes
            (root / "run-1" / "blocks").mkdir(parents=True)  # it writes by its old path
            raise OSError(errno.ENOTEMPTY, "Directory not empty", str(path))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(configurations.shutil, "rmtree", racing_rmtree)
    configurations.remove_directory(str(root))
    assert len(calls) == 2 and calls[0] == calls[1] != str(root)
    assert sorted(p.name for p in root.parent.iterdir()) == ["tiered-hive-s3-cold"]
    assert [p.name for p in root.iterdir()] == ["run-1"]  # the late writer's, removed next run
    configurations.remove_directory(str(root))
    assert list(root.parent.iterdir()) == []

    monkeypatch.setattr(
        configurations.shutil,
        "rmtree",
        lambda path, *a, **k: (_ for _ in ()).throw(OSError(errno.EACCES, "denied", path)),
    )
    root.mkdir()
    with pytest.raises(PermissionError):
        configurations.remove_directory(str(root))  # other errors are not retried


def test_the_a_a_configuration_registers_the_baselines_own_frames(monkeypatch):
    # Its ratio to the baseline is the noise floor of a per-query ratio only if nothing but
    # the run differs: the same DataFrames, made once, registered again.
    from raptorx_py.tpch import queries

    made, registered = [], []

    class Frame:
        def __init__(self, table):
            self.table = table

        def createOrReplaceTempView(self, name):  # noqa: N802 (pyspark's name)
            registered.append((name, self))

    monkeypatch.setattr(
        queries,
        "parquet_reader",
        lambda spark, d, file_format="parquet": lambda t: made.append(t) or Frame(t),
    )
    ctx = BenchContext(spark=None, database="tpch", local_data_dir="/d", properties={}, work_dir="")
    baseline, again = configurations.get_configurations(
        ["spark-parquet-local", "spark-parquet-local-again"]
    )
    assert "spark-parquet-local-again" not in configurations.DEFAULT_CONFIGURATIONS
    baseline.register_views(ctx)
    first = dict(registered)
    registered.clear()
    again.register_views(ctx)
    assert sorted(made) == sorted(queries.TABLES)  # read once, for both
    assert {n: id(f) for n, f in registered} == {n: id(f) for n, f in first.items()}


def test_the_python_reader_configuration_is_the_warm_one_read_by_python(tmp_path, monkeypatch):
    ctx = BenchContext(
        spark=None, database="tpch", local_data_dir="", properties={}, work_dir=str(tmp_path)
    )
    warm, python = configurations.get_configurations(
        ["tiered-hive-s3-warm", "tiered-hive-s3-warm-python"]
    )
    jvm = _registered_options(warm, ctx, monkeypatch)
    pyarrow = _registered_options(python, ctx, monkeypatch)
    assert "hive.parquet.reader" not in jvm  # AUTO, the default
    assert pyarrow.pop("hive.parquet.reader") == "PYTHON"
    # the same tiers and settings, each in its own cache directory
    assert jvm.pop("cache.base-directory") != pyarrow.pop("cache.base-directory")
    assert jvm == pyarrow
