"""The benchmark's pure reporting functions, on a small synthetic results dict (no Spark,
no object store, no timings)."""

from __future__ import annotations

import math

import pytest

from benchmarks import configurations, report


def _run(seconds, rows, requests=None, nbytes=0, metrics=None):
    return {
        "seconds": seconds,
        "rows": rows,
        "requests": requests or {},
        "bytes": nbytes,
        "metrics": metrics or {},
    }


@pytest.fixture
def results():
    return {
        "schema_version": report.SCHEMA_VERSION,
        "command": "python -m benchmarks.tpch_suite --scale 0.01",
        "started_at": "2025-01-02T03:04:05+00:00",
        "wall_seconds": 12.0,
        "machine": {
            "platform": "Linux-test",
            "cpu_count": 2,
            "memory_bytes": 2 * 1024**3,
            "python": "3.11.2",
            "pyspark": "4.3.0",
        },
        "scale": 0.01,
        "latency_ms": 20.0,
        "endpoint": {"url": "http://127.0.0.1:1234", "request_cost": 1.5},
        "warmup": 1,
        "repetitions": 3,
        "configurations": [
            {"name": "local", "description": "baseline"},
            {"name": "remote", "description": "over S3"},
        ],
        "queries": {
            # keys are strings (as after a JSON round trip); "10" must sort after "6"
            "10": {
                "configs": {
                    "local": {"runs": [_run(4.0, 20), _run(4.0, 20), _run(4.0, 20)]},
                    "remote": {
                        "runs": [
                            _run(8.0, 20, {"GET": 2}, 100),
                            _run(9.0, 20, {"GET": 2}, 100),
                            _run(8.0, 20, {"GET": 2}, 100),
                        ]
                    },
                }
            },
            "1": {
                "configs": {
                    "local": {"runs": [_run(1.0, 4), _run(3.0, 4), _run(2.0, 4)]},
                    "remote": {
                        "runs": [
                            _run(
                                5.0,
                                4,
                                {"LIST": 1, "RANGED_GET": 10},
                                3 * 1024**2,
                                {"reader.files_opened": 2},
                            ),
                            _run(
                                4.0,
                                4,
                                {"LIST": 1, "RANGED_GET": 12},
                                3 * 1024**2,
                                {"reader.files_opened": 2},
                            ),
                            _run(
                                6.0,
                                4,
                                {"LIST": 1, "RANGED_GET": 11},
                                3 * 1024**2,
                                {"reader.files_opened": 2},
                            ),
                        ]
                    },
                }
            },
        },
    }


def test_statistics():
    assert report.median([3, 1, 2]) == 2
    assert report.median([1, 2, 3, 4]) == 2.5
    assert report.geometric_mean([1, 4]) == pytest.approx(2.0)
    assert report.geometric_mean([2, 8, 4]) == pytest.approx(4.0)
    assert report.ratio(6.0, 2.0) == 3.0
    assert report.ratio(1.0, None) is None
    assert report.ratio(1.0, 0.0) is None
    with pytest.raises(ValueError, match="no values"):
        report.median([])
    with pytest.raises(ValueError, match="positive"):
        report.geometric_mean([1.0, 0.0])


def test_summarize_medians_and_geomean(results):
    s = report.summarize(results)
    assert s["baseline"] == "local"
    assert list(s["queries"]) == ["1", "10"]
    q1 = s["queries"]["1"]["remote"]
    assert (q1["median_s"], q1["min_s"], q1["max_s"], q1["rows"]) == (5.0, 4.0, 6.0, 4)
    assert q1["requests"] == {"LIST": 1, "RANGED_GET": 11}
    assert q1["requests_total"] == 12
    assert q1["metrics"] == {"reader.files_opened": 2}
    assert s["ratios"]["1"]["remote"] == pytest.approx(2.5)
    # geomeans over Q1 and Q10: local sqrt(2*4), remote sqrt(5*8)
    assert s["geomean"]["local"] == pytest.approx(math.sqrt(8))
    assert s["geomean"]["remote"] == pytest.approx(math.sqrt(40))
    assert s["geomean_ratio"]["remote"] == pytest.approx(math.sqrt(5))
    assert report.row_count_mismatches(results) == []


def test_markdown_table_rows(results):
    md = report.render_markdown(results)
    assert md.startswith("# TPC-H benchmark, scale factor 0.01\n")
    assert "- Command: `python -m benchmarks.tpch_suite --scale 0.01`" in md
    assert "Linux-test, 2 CPUs, 2.0 GiB RAM, Python 3.11.2, PySpark 4.3.0" in md
    lines = md.splitlines()
    # One main table: seconds and the ratio per configuration, nothing else.
    assert "| query | rows | local s | remote s (x of baseline) |" in lines
    assert "| Q1 | 4 | 2.000 | 5.000 (2.50x) |" in lines
    assert "| Q10 | 20 | 4.000 | 8.000 (2.00x) |" in lines
    assert "| **geomean** (2 queries) |  | 2.828 | 6.325 (2.24x) |" in lines
    assert lines.index("| Q1 | 4 | 2.000 | 5.000 (2.50x) |") < lines.index(
        "| Q10 | 20 | 4.000 | 8.000 (2.00x) |"
    )
    assert any(
        "relative to the baseline local" in line and "Lower is faster" in line for line in lines
    )
    # The chart with its caption, then the requests and bytes of the configurations that
    # read the store (the local baseline's always-empty columns are gone).
    assert "![median seconds per query](tpch_queries.png)" in lines
    assert any(
        line.startswith("*Median seconds per query") and "lower is faster" in line for line in lines
    )
    assert "| query | remote requests / bytes |" in lines
    assert "| Q1 | 12 / 3.0 MiB |" in lines and "| Q10 | 2 / 100 B |" in lines
    assert "whole 1 MiB blocks" not in md  # no block cache in these runs
    # totals: requests by kind and the data source's counters, summed over queries
    assert "| remote | 2 | 1 | 11 | 3.0 MiB |" in lines
    assert "| `reader.files_opened` | 0 | 2 |" in lines
    assert "## Problems" not in md


def test_row_count_mismatch_and_errors_are_reported(results):
    results["queries"]["10"]["configs"]["remote"]["runs"][1]["rows"] = 19
    results["queries"]["1"]["configs"]["remote"] = {"runs": [], "error": "StorageError: boom"}
    problems = report.row_count_mismatches(results)
    assert problems == [
        "Q10: configuration remote returned different row counts across runs: [20, 19, 20]"
    ]
    results["queries"]["10"]["configs"]["remote"]["runs"][1]["rows"] = 20
    results["queries"]["10"]["configs"]["local"]["runs"] = [_run(4.0, 21)]
    assert report.row_count_mismatches(results) == [
        "Q10: row counts differ between configurations: local=21, remote=20"
    ]
    md = report.render_markdown(results)
    lines = md.splitlines()
    assert "| Q1 | 4 | 2.000 | error |" in lines
    # the geometric mean covers only queries every configuration completed
    assert "| **geomean** (1 query) |  | 4.000 | 8.000 (2.00x) |" in lines
    assert "- Q1 remote: StorageError: boom" in lines


def test_cold_bytes_are_explained_when_the_block_cache_ran(results):
    for run in results["queries"]["1"]["configs"]["remote"]["runs"]:
        run["metrics"]["block_cache.misses"] = 3
    md = report.render_markdown(results)
    assert "a cold run reads more bytes than a run without caches" in md
    assert "whole 1 MiB blocks" in md


def test_formatting():
    assert report.format_bytes(0) == "0 B"
    assert report.format_bytes(1536) == "1.5 KiB"
    assert report.format_bytes(5 * 1024**3) == "5.0 GiB"
    assert report.format_count(1234567) == "1,234,567"
    assert report.format_count(2.5) == "2.5"
    assert report.choose_log_scale([0.1, 10.0]) is True
    assert report.choose_log_scale([1.0, 10.0]) is False


def test_write_reports_writes_json_markdown_and_png(results, tmp_path):
    paths = report.write_reports(results, str(tmp_path / "out"))
    with open(paths["chart"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "out" / "results.md").read_text().startswith("# TPC-H benchmark")
    import json

    assert json.loads((tmp_path / "out" / "results.json").read_text())["scale"] == 0.01


def test_runner_helpers_need_no_spark():
    from benchmarks import configurations, tpch_suite

    before = {
        "requests": {"GET": 1, "LIST": 2},
        "bytes": {"GET": 10, "LIST": 5},
        "latency_ms": 20.0,
        "max_concurrent": 3,
        "pid": 7,
    }
    after = {
        "requests": {"GET": 4, "LIST": 2, "RANGED_GET": 5},
        "bytes": {"GET": 40, "LIST": 5, "RANGED_GET": 500},
        "latency_ms": 20.0,
        "max_concurrent": 4,
        "pid": 7,
    }
    delta = tpch_suite.store_delta(after, before)
    assert delta == {
        "requests": {"GET": 3, "RANGED_GET": 5},
        "bytes": {"GET": 30, "RANGED_GET": 500},
    }
    assert tpch_suite.split_store_stats(delta) == ({"GET": 3, "RANGED_GET": 5}, 530)
    assert tpch_suite.default_work_dir("/x/y/bench-out") == "/x/y/work-data"
    args = tpch_suite.parse_args(["--scale", "0.1", "--configs", "a,b", "--queries", "1,6"])
    assert (
        args.scale,
        args.configs,
        args.queries,
        args.repetitions,
        args.warmup,
        args.latency_ms,
        args.throughput_mbps,
    ) == (0.1, ["a", "b"], ["1", "6"], 3, 1, 20.0, 90.0)
    names = [c.name for c in configurations.get_configurations(None)]
    assert names == [
        "spark-parquet-local",
        "spark-parquet-s3",
        "tiered-hive-s3",
        "tiered-hive-s3-cold",
        "tiered-hive-s3-warm",
        "tiered-hive-s3-warm-fragments",
        "spark-cache-table",
    ]
    registered = {c.name for c in configurations.all_configurations()}
    assert {"tiered-hive-local", "tiered-hive-local-nojar"} <= registered - set(names)
    with pytest.raises(
        ValueError, match="unknown benchmark configuration.*nope.*known: spark-parquet-local"
    ):
        configurations.get_configurations(["spark-parquet-local", "nope"])


def test_property_overrides_are_checked_by_name(capsys):
    from benchmarks import tpch_suite

    args = tpch_suite.parse_args(
        [
            "--property",
            "fragment-result-cache.max-cache-size=8GB",
            "--property",
            "cache.enabled = true",
        ]
    )
    assert args.properties == {
        "fragment-result-cache.max-cache-size": "8GB",
        "cache.enabled": "true",
    }
    assert tpch_suite.parse_args([]).properties == {}
    for bad, said in (
        (
            "fragment-result-cache.max-cache-sise=8GB",
            "property 'fragment-result-cache.max-cache-sise': unknown property; "
            "did you mean 'fragment-result-cache.max-cache-size'?",
        ),
        ("8GB", "expected NAME=VALUE"),
    ):
        with pytest.raises(SystemExit) as exit_:
            tpch_suite.parse_args(["--property", bad])
        assert exit_.value.code == 2
        assert said in capsys.readouterr().err


def test_idle_pauses_only_the_named_configurations_timed_runs(results):
    from benchmarks import tpch_suite

    args = tpch_suite.parse_args(["--idle-seconds", "70", "--idle-configs", "remote"])
    assert tpch_suite.pauses_before(args, "remote", "timed")
    assert not tpch_suite.pauses_before(args, "remote", "warmup")
    assert not tpch_suite.pauses_before(args, "local", "timed")
    every = tpch_suite.parse_args(["--idle-seconds", "70"])
    assert tpch_suite.pauses_before(every, "local", "timed")
    assert not tpch_suite.pauses_before(tpch_suite.parse_args([]), "local", "timed")
    configs = [configurations.Configuration(n, n, lambda ctx: None) for n in ("local", "remote")]
    tpch_suite.check_idle_configs(["remote"], configs)
    with pytest.raises(ValueError, match="--idle-configs: nowhere not among"):
        tpch_suite.check_idle_configs(["nowhere"], configs)
    # ... and which format the tables were in, when not Parquet.
    assert tpch_suite.parse_args(["--format", "orc"]).format == "orc"
    assert "- Format: ORC." in report.render_markdown({**results, "format": "orc"})
    assert "Format" not in report.render_markdown({**results, "format": "parquet"})
    # The report says which runs came after a pause.
    md = report.render_markdown({**results, "idle_seconds": 70, "idle_configs": ["remote"]})
    assert "- Pauses: 70 s of no query before each timed run of `remote`" in md
    assert "Pauses" not in report.render_markdown(results)


def test_cold_prepare_hook_empties_the_named_directory(tmp_path):
    from benchmarks.configurations import BenchContext, clear_directories

    cache = tmp_path / "cache"
    (cache / "sub").mkdir(parents=True)
    (cache / "sub" / "block").write_bytes(b"x")
    ctx = BenchContext(
        spark=None,
        database="tpch",
        local_data_dir="",
        work_dir=str(tmp_path),
        properties={"cache.base-directory": str(cache)},
    )
    clear_directories("cache.base-directory")(ctx)
    assert cache.is_dir() and list(cache.iterdir()) == []
    with pytest.raises(ValueError, match="property fragment-result-cache.base-directory"):
        clear_directories("fragment-result-cache.base-directory")(ctx)


def test_result_comparison_is_reported(results):
    for q in results["queries"].values():
        q["results_compared"] = 2
    text = report.render_markdown(results)
    assert "Results: on all 2 queries every configuration returned the baseline's rows" in text
    assert report.result_differences(results) == []
    results["queries"]["1"]["configs"]["remote"]["result_difference"] = "row 0 differs"
    assert report.result_differences(results) == [
        "Q1: remote rows differ from the baseline's: row 0 differs"
    ]
    text = report.render_markdown(results)
    assert "- Q1: remote rows differ from the baseline's: row 0 differs" in text
    assert "Results: on all" not in text


def test_fragment_cache_counts_per_query(results):
    """A configuration with the fragment result cache on gets its per-query table:
    computed, served, pruned and simplified; the others do not appear in it."""
    for run in results["queries"]["1"]["configs"]["remote"]["runs"]:
        run["metrics"].update(
            {
                "reader.fragments_computed": 2,
                "fragment_cache.hits": 7,
                "planner.partitions_pruned_by_stats": 3,
                "planner.predicates_dropped_by_stats": 5,
            }
        )
    md = report.render_markdown(results)
    assert "## Fragment result cache per query" in md
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| query | remote computed"))
    assert "local" not in header
    assert any(line.startswith("| Q1 | 2 | 7 | 3 | 5 |") for line in lines), md


def test_planning_counts_per_query(results):
    """A configuration whose scans were planned gets its per-query planning table: scans,
    the driver planner's milliseconds per scan, worker calls, LISTs and metastore round
    trips; a query planned by workers shows no milliseconds."""
    for run in results["queries"]["1"]["configs"]["remote"]["runs"]:
        run["metrics"].update(
            {
                "planning.scans": 4,
                "planning.driver_micros": 10_000,
                "storage.listings": 0,
                "metastore.round_trips": 1,
            }
        )
    for run in results["queries"]["10"]["configs"]["remote"]["runs"]:
        run["metrics"].update({"planning.scans": 2, "planning.worker_calls": 3})
    md = report.render_markdown(results)
    assert "## Planning per query" in md
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| query | remote scans"))
    assert "local" not in header
    assert any(line.startswith("| Q1 | 4 | 2.5 | 0 | 0 | 1 |") for line in lines), md
    assert any(line.startswith("| Q10 | 2 | — | 3 | 0 | 0 |") for line in lines), md
    assert report.planning_ms_per_scan({"planning.scans": 0}) is None


def _headline_results():
    """Spark on local files 1 s, Spark on S3 4 s, tiered_hive with no cache 6 s and warm +
    fragments 0.5 s, for Q1 (RaptorX: >=10x), Q2 (3-5x) and Q3 (no target)."""
    seconds = {
        "spark-parquet-local": 1.0,
        "spark-parquet-s3": 4.0,
        "tiered-hive-s3": 6.0,
        "tiered-hive-s3-warm-fragments": 0.5,
    }
    return {
        "scale": 1,
        "latency_ms": 20.0,
        "throughput_mbps": 90.0,
        "repetitions": 1,
        "configurations": [{"name": c, "description": c} for c in seconds],
        "queries": {
            str(q): {"configs": {c: {"runs": [_run(s * q, 1)]} for c, s in seconds.items()}}
            for q in (1, 2, 3)
        },
    }


def test_headline_ratios_against_spark_on_s3_and_on_local_files(tmp_path):
    results = _headline_results()
    h = report.headline(report.summarize(results))
    assert h["references"] == ["spark-parquet-s3", "spark-parquet-local"]
    assert h["tiered"] == ["tiered-hive-s3", "tiered-hive-s3-warm-fragments"]
    assert h["ratios"]["spark-parquet-s3"]["2"] == {
        "tiered-hive-s3": 1.5,
        "tiered-hive-s3-warm-fragments": 0.125,
    }
    assert h["geomean"]["spark-parquet-local"]["tiered-hive-s3"] == pytest.approx(6.0)
    assert h["speedup"] == {"1": 12.0, "2": 12.0, "3": 12.0}
    assert h["geomean_speedup"] == pytest.approx(12.0)
    assert [report.raptorx_target(q) for q in ("1", "2", "3", "22")] == [
        ">=10x",
        "3-5x",
        "",
        ">=10x",
    ]

    markdown = report.render_markdown(results)
    # The headline comes before everything else the report shows.
    assert markdown.index("## Where tiered_hive stands") < markdown.index("## Configurations")
    assert "throughput 90 MB/s per connection" in markdown
    assert "| Q2 | 1.50x | 0.12x | 12.0x faster | 3-5x |" in markdown
    assert "| Q2 | 6.00x | 0.50x |" in markdown  # against local files

    paths = report.write_reports(results, str(tmp_path))
    with open(paths["ratios_chart"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_noise_floor_is_the_baselines_ratio_to_itself():
    results = _headline_results()
    assert report.noise_floor(report.summarize(results)) is None  # no A/A pair run
    assert "noise floor" not in report.render_markdown(results)
    again = {"1": 1.3, "2": 2.0, "3": 2.4}  # the baseline's own second time: 1.3, 1.0, 0.8
    results["configurations"].insert(1, {"name": report.SPARK_LOCAL_AGAIN, "description": ""})
    for q, seconds in again.items():
        results["queries"][q]["configs"][report.SPARK_LOCAL_AGAIN] = {"runs": [_run(seconds, 1)]}
    floor = report.noise_floor(report.summarize(results))
    assert floor["lowest"] == ("3", pytest.approx(0.8))
    assert floor["highest"] == ("1", pytest.approx(1.3))
    assert floor["above"] == {1.1: 1, 1.2: 1}
    assert floor["band"] == (pytest.approx(1 / 1.3), pytest.approx(1.3))
    assert floor["geomean"] == pytest.approx((1.3 * 1.0 * 0.8) ** (1 / 3))
    markdown = report.render_markdown(results)
    assert "per query from 0.80x (Q3) to 1.30x (Q1), 1 above 1.10x and 1 above 1.20x" in markdown
    assert "between 0.77x and 1.30x (as far from 1.00x, either way)" in markdown
    # Shown under the table against local files, where the ratios it qualifies are.
    local = markdown.index("(spark-parquet-local)")
    assert local < markdown.index("The noise floor") < markdown.index("## Configurations")


def test_no_headline_without_a_reference(results, tmp_path):
    """The synthetic run of the other tests names neither of Spark's readers."""
    assert report.headline(report.summarize(results))["references"] == []
    assert "## Where tiered_hive stands" not in report.render_markdown(results)
    assert report.write_reports(results, str(tmp_path))["ratios_chart"] is None


def test_configurations_spark_conf_joins_jars_and_refuses_conflicts():
    from benchmarks.configurations import Configuration
    from benchmarks.tpch_suite import configurations_spark_conf

    def config(name, conf):
        return Configuration(name, name, register_views=print, spark_conf=lambda _ep: conf)

    plain = Configuration("plain", "no session settings", register_views=print)
    a = config("a", {"spark.jars": "/a.jar", "spark.hadoop.x": "1"})
    b = config("b", {"spark.jars": "/b.jar,/a.jar", "spark.hadoop.x": "1"})
    assert configurations_spark_conf([plain, a, b], endpoint=None) == {
        "spark.jars": "/a.jar,/b.jar",  # each jar once
        "spark.hadoop.x": "1",
    }
    with pytest.raises(ValueError, match="configuration c needs spark.hadoop.x=2"):
        configurations_spark_conf([a, config("c", {"spark.hadoop.x": "2"})], endpoint=None)


def test_seeded_runs_compare_row_counts_run_by_run(results):
    """With a parameter seed, a configuration's runs run other texts (other row counts are
    right), and run k of every configuration runs the same text (they must agree)."""
    per = results["queries"]["10"]["configs"]
    per["local"]["runs"][1]["rows"] = 7
    per["remote"]["runs"][1]["rows"] = 7
    assert any("across runs" in p for p in report.row_count_mismatches(results))
    results["parameter_seed"] = 3
    assert report.row_count_mismatches(results) == []
    per["remote"]["runs"][2]["rows"] = 8
    assert report.row_count_mismatches(results) == [
        "Q10: row counts differ between configurations in timed run 3: local=20, remote=8"
    ]
    assert "drawn from seed 3+k" in report.render_markdown(results)


def test_time_breakdown_where_no_cache_is_slower_than_spark_on_s3():
    results = _headline_results()
    run = results["queries"]["2"]["configs"]["tiered-hive-s3"]["runs"][0]
    run.update(
        requests={"LIST": 3, "RANGED_GET": 7},
        bytes=2048,
        store_stats={"injected_delay_seconds": 0.25},
        metrics={"reader.python_tasks": 4},
        stages=[
            {"start_ms": 120, "run_ms": 900, "cpu_ms": 300},
            {"start_ms": 700, "run_ms": 100, "cpu_ms": 50},
            {"start_ms": None, "run_ms": 0, "cpu_ms": 0},  # skipped
        ],
    )
    assert report.run_breakdown(run) == {
        "seconds": 12.0,
        "requests": 10.0,
        "bytes": 2048.0,
        "store_wait_s": 0.25,
        "driver_ms": 120.0,
        "task_s": 1.0,
        "jvm_cpu_s": 0.35,
        "python_tasks": 4.0,
    }
    markdown = report.render_markdown(results)
    assert "### Where the time goes where no cache or cold is slower than Spark on S3" in markdown
    # tiered-hive-s3 is 1.5x of Spark on S3 on every query: each gets Spark's row and its own.
    assert "| Q2 | tiered-hive-s3 | 12.000 | 10 | 2.0 KiB | 0.25 | 120 | 1.00 | 0.35 | 4 |" in (
        markdown
    )
    section = markdown.split("### Where the time goes")[1].split("## ")[0]
    assert section.count("| spark-parquet-s3 |") == 3


# --- disk held per tier --------------------------------------------------------------------


def _file(path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_disk_per_tier_sums_each_tier_s_files_against_the_table_bytes(tmp_path):
    """A warm root (tiers at its top) and a cold one's last run (under ``run-<k>``): each
    file counts for its tier, files of no tier are not counted, an empty tier is zeros."""
    warm = tmp_path / "warm"
    _file(warm / "blocks" / "ab" / "block-1", 3000)
    _file(warm / "blocks" / "index.db", 1000)
    _file(warm / "footers" / "f1", 500)
    _file(warm / "fragments" / "entries" / "00" / "k.arrow", 6000)
    _file(warm / "fragments" / "cache.secret", 32)
    _file(warm / "log.txt", 99)  # no tier
    got = report.disk_per_tier(str(warm), table_bytes=2000)
    assert got["blocks"] == {"bytes": 4000, "files": 2, "per_table_byte": 2.0}
    assert got["footers"] == {"bytes": 500, "files": 1, "per_table_byte": 0.25}
    assert got["fragments"] == {"bytes": 6032, "files": 2, "per_table_byte": 3.016}
    cold = tmp_path / "cold"
    _file(cold / "run-3" / "blocks" / "b", 700)
    got = report.disk_per_tier(str(cold), table_bytes=0)
    assert got["blocks"] == {"bytes": 700, "files": 1, "per_table_byte": None}
    assert got["fragments"] == {"bytes": 0, "files": 0, "per_table_byte": None}
    missing = report.disk_per_tier(str(tmp_path / "nowhere"), table_bytes=10)
    assert all(t["bytes"] == 0 for t in missing.values())


def test_the_disk_section_shows_each_cached_configuration_s_tiers(results, tmp_path):
    _file(tmp_path / "blocks" / "b", 1024)
    _file(tmp_path / "fragments" / "e", 3 * 1024)
    tiers = report.disk_per_tier(str(tmp_path), table_bytes=2048)
    results["disk"] = {"table_bytes": 2048, "tables": ["lineitem"], "configs": {"remote": tiers}}
    markdown = report.render_markdown(results)
    assert "## Disk held per tier" in markdown
    assert "2.0 KiB of Parquet: lineitem" in markdown
    assert "| `remote` | 1.0 KiB (0.50x) | 0 B (0.00x) | 3.0 KiB (1.50x) | 4.0 KiB (2.00x) |" in (
        markdown
    )
    del results["disk"]
    assert "## Disk held per tier" not in report.render_markdown(results)


def test_table_object_bytes_sums_the_objects_under_each_table():
    from benchmarks.tpch_suite import table_object_bytes

    objects = {
        "b/warehouse/tpch.db/lineitem/part-0.parquet": {"size": 100},
        "b/warehouse/tpch.db/lineitem/part-1.parquet": {"size": 50},
        "b/warehouse/tpch.db/nation/part-0.parquet": {"size": 7},
        "b/warehouse/region/part-0.parquet": {"size": 3},
        "b/warehouse/tpch.db/_marker": {"size": 1},
    }
    assert table_object_bytes(objects, "b/warehouse") == {
        "lineitem": 150,
        "nation": 7,
        "region": 3,
    }


def test_tables_read_names_the_tables_a_query_reads():
    from raptorx_py.tpch.queries import query_text, tables_read

    assert tables_read(query_text(6, 1)) == {"lineitem"}
    assert tables_read(query_text(9, 1)) == {
        "part",
        "supplier",
        "lineitem",
        "partsupp",
        "orders",
        "nation",
    }
