"""The cluster soft-affinity benchmark's figures and report (benchmarks/cluster_affinity.py),
from counters alone: what a run on the cluster would have counted."""

from __future__ import annotations

import pytest

from benchmarks.cluster_affinity import cache_limit, executor_figures, parse_args, report


def test_figures_of_one_executor():
    f = executor_figures(
        {
            "affinity.preferred": 8,
            "affinity.preferred_host": 1,
            "affinity.fallback": 1,
            "block_cache.hits": 95,
            "block_cache.misses": 5,
            "block_cache.remote_requests": 5,
            "block_cache.bytes_from_remote": 5 * 2**20,
            "footer_cache.hits_memory": 3,
            "footer_cache.hits_disk": 1,
            "footer_cache.misses": 4,
            "fragment_cache.hits": 6,
            "fragment_cache.misses": 2,
        }
    )
    assert (f["tasks_preferred"], f["tasks_preferred_host"], f["tasks_fallback"]) == (8, 1, 1)
    assert f["preferred_share"] == 0.9 and f["block_hit_ratio"] == 0.95
    assert (f["footer_hits"], f["footer_misses"], f["footer_hit_ratio"]) == (4, 4, 0.5)
    assert (f["fragment_hits"], f["fragment_misses"], f["fragment_hit_ratio"]) == (6, 2, 0.75)
    assert (f["remote_requests"], f["remote_bytes"]) == (5, 5 * 2**20)


def test_no_reads_has_no_ratio():
    f = executor_figures({})
    assert f["preferred_share"] is None and f["block_hit_ratio"] is None
    assert f["fragment_hit_ratio"] is None


def test_arguments_name_what_is_wrong(capsys):
    args = parse_args(["--stores", "s3", "--cache-shares", "0.65,all"])
    assert args.store_list == ["s3"] and args.share_list == [0.65, "all"]
    for bad, message in (
        (["--stores", "hdfs"], "--stores"),
        (["--cache-shares", "lots"], "neither a number nor 'all'"),
        (["--cache-shares", "0"], "must be above 0"),
    ):
        with pytest.raises(SystemExit):
            parse_args(bad)
        assert message in capsys.readouterr().err
    assert cache_limit("all", 10 * 2**20)[0] >= 20 * 2**20
    assert cache_limit(0.5, 10 * 2**20) == (5 * 2**20, "5.0 MiB (0.5 of the data)")


def test_report_lists_each_store_strategy_and_executor(tmp_path):
    warm = executor_figures(
        {"affinity.preferred": 2, "block_cache.hits": 4, "fragment_cache.hits": 1}
    )
    none = executor_figures({"block_cache.hits": 2, "block_cache.misses": 2})
    results = {
        "command": "python -m benchmarks.cluster_affinity",
        "machine": "test",
        "started": "now",
        "scale": 0.1,
        "workers": 2,
        "locality_wait": "3s",
        "latency_ms": 20,
        "max_split_imbalance": 0,
        "data_bytes": 10 * 2**20,
        "queries": [1],
        "equal_duckdb": "yes, every query",
        "runs": [
            {
                "store": "s3",
                "cache_limit": "6.5 MiB (0.65 of the data)",
                "strategies": {
                    "SOFT_AFFINITY": {
                        "warm_seconds": 1.5,
                        "warm_query_seconds": {"1": 1.5},
                        "warm_total": warm,
                        "warm_store": {"requests": 3, "bytes": 2**20},
                        "warm_by_source": {"executor 0": warm, "executor 1": executor_figures({})},
                        "cached_bytes": {"node worker0": 3 * 2**20, "node worker1": 2**20},
                    },
                    "NO_PREFERENCE": {
                        "warm_seconds": 3.0,
                        "warm_query_seconds": {"1": 3.0},
                        "warm_total": none,
                        "warm_store": {"requests": 9, "bytes": 2 * 2**20},
                        "warm_by_source": {"executor 0": none},
                        "cached_bytes": {},
                    },
                },
            }
        ],
    }
    text = report(results, tmp_path)
    assert "## s3, cache limit 6.5 MiB (0.65 of the data): warm pass, all executors" in text
    assert (
        "| SOFT_AFFINITY | 1.50 | 3 | 1.0 | 2 / 0 / 0 | 4 / 0 | 100.0% | – | 1 / 0 | 3.0 + 1.0 |"
        in text
    )
    assert "| NO_PREFERENCE | 3.00 | 9 | 2.0 | 0 / 0 / 0 | 2 / 2 | 50.0% |" in text
    assert "NO_PREFERENCE / SOFT_AFFINITY warm time: **2.00x**" in text
    assert "| executor 0 | 2 / 0 / 0 | 0 | 4 / 0 | 100.0% | 0 / 0 | 1 / 0 | 0 | 0.0 | 0 |" in text
    assert "| Q1 | 1.500 | 3.000 |" in text
    assert (tmp_path / "results.json").exists() and (tmp_path / "results.md").read_text() == text
