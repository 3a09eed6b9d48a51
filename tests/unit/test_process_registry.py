"""The per-process registry every tier keeps its cache in: one instance per key, replaced
when it may not be reused, and nothing kept when it cannot be made."""

from __future__ import annotations

from raptorx_py.cache.process_registry import ProcessRegistry


def test_one_instance_per_key_made_once():
    registry: ProcessRegistry[object] = ProcessRegistry()
    made: list[object] = []

    def create() -> object:
        made.append(object())
        return made[-1]

    first = registry.get("a", create)
    assert registry.get("a", create) is first
    assert registry.get("b", create) is not first
    assert len(made) == 2


def test_an_instance_that_may_not_be_reused_is_replaced():
    registry: ProcessRegistry[list[int]] = ProcessRegistry()
    old = registry.get("a", lambda: [1])
    new = registry.get("a", lambda: [2], reuse=lambda kept: kept == [2])
    assert old == [1] and new == [2]
    assert registry.get("a", lambda: [3]) is new


def test_none_is_returned_and_not_kept():
    registry: ProcessRegistry[str] = ProcessRegistry()
    assert registry.get("a", lambda: None) is None
    assert registry.get("a", lambda: "made") == "made"
