"""The cluster soft-affinity benchmark's figures and report (benchmarks/cluster_affinity.py),
from counters alone: what a run on the cluster would have counted."""

from __future__ import annotations

from benchmarks.cluster_affinity import executor_figures, report


def test_figures_of_one_executor():
    f = executor_figures(
        {
            "affinity.preferred": 9,
            "affinity.fallback": 1,
            "block_cache.hits": 95,
            "block_cache.misses": 5,
            "footer_cache.hits_memory": 3,
            "footer_cache.hits_disk": 1,
            "footer_cache.misses": 4,
        }
    )
    assert (f["tasks_preferred"], f["tasks_fallback"]) == (9, 1)
    assert f["preferred_share"] == 0.9 and f["block_hit_ratio"] == 0.95
    assert (f["footer_hits"], f["footer_misses"], f["footer_hit_ratio"]) == (4, 4, 0.5)


def test_no_reads_has_no_ratio():
    f = executor_figures({})
    assert f["preferred_share"] is None and f["block_hit_ratio"] is None


def test_report_lists_each_strategy_and_executor(tmp_path):
    warm = executor_figures({"affinity.preferred": 2, "block_cache.hits": 4})
    results = {
        "command": "python -m benchmarks.cluster_affinity",
        "machine": "test",
        "started": "now",
        "scale": 0.1,
        "workers": 2,
        "locality_wait": "3s",
        "data_bytes": 10 * 2**20,
        "cache_limit": "6.5 MiB (0.65 of the data)",
        "queries": [1],
        "equal_duckdb": "yes, every query",
        "strategies": {
            "SOFT_AFFINITY": {
                "warm_seconds": 1.5,
                "warm_query_seconds": {"1": 1.5},
                "warm_total": warm,
                "warm_by_source": {"executor 0": warm, "executor 1": executor_figures({})},
                "cached_bytes": {"executor 0": 3 * 2**20, "executor 1": 2**20},
            }
        },
    }
    text = report(results, tmp_path)
    assert "| SOFT_AFFINITY | 1.50 | 2 / 0 | 100.0% | 4 / 0 | 100.0% | – | 3.0 + 1.0 |" in text
    assert "each executor's cache limit: 6.5 MiB" in text
    assert "| executor 0 | 2 / 0 | 4 / 0 | 100.0% |" in text
    assert "| executor 1 | 0 / 0 | 0 / 0 | – |" in text
    assert (tmp_path / "results.json").exists() and (tmp_path / "results.md").read_text() == text
