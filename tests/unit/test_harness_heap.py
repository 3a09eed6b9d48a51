"""benchmarks.harness_heap: the harness's heap frozen for a timed run, and given back."""

from __future__ import annotations

import gc

import pytest

from benchmarks.harness_heap import frozen_heap


def test_the_heap_is_frozen_during_the_block_and_unfrozen_after():
    held = [[i] for i in range(1000)]  # objects the harness holds, tracked by the collector
    with frozen_heap():
        frozen = gc.get_freeze_count()
    assert frozen >= len(held)
    assert gc.get_freeze_count() == 0


def test_collections_during_the_block_are_counted():
    with frozen_heap() as spent:
        gc.collect(2)
        gc.collect(0)
    assert spent["full_collections"] == 1
    assert spent["gc_ms"] >= 0.0
    assert all(getattr(cb, "__name__", "") != "timed" for cb in gc.callbacks)


def test_an_error_in_the_block_still_unfreezes():
    with pytest.raises(RuntimeError), frozen_heap():
        raise RuntimeError("the query failed")
    assert gc.get_freeze_count() == 0
