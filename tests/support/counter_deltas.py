"""The one way the tests measure what a piece of code counted: counter deltas.

``CounterDeltas()`` reads this process's counters (``raptorx_py.metrics.counters``: their
totals, which a flush does not drain, so a flush on another thread, such as the driver
planner's timer, cannot make a delta negative);
``CounterDeltas(read=sink_totals(directory))`` reads every process's, through the metrics
sink (what Spark's Python workers counted)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from raptorx_py.metrics import MetricsSink, counters, flush


def sink_totals(metrics_dir: str | None) -> Callable[[], dict[str, int]]:
    """A reading of every process's totals in the sink of ``metrics_dir``, after flushing
    this process's own counts there (so what it counted so far is included); no directory
    reads nothing."""

    def read() -> dict[str, int]:
        if not metrics_dir:
            return {}
        flush(metrics_dir)
        return MetricsSink(metrics_dir).totals()

    return read


class CounterDeltas(Mapping[str, int]):
    """How much each counter moved since this object was made (or since ``with`` entered).

    ``deltas[name]`` is the difference for one counter, 0 for one that did not move;
    iterating, ``len``, ``==`` and ``delta`` see only the counters that moved. While it is
    open the readings are live; once the ``with`` block exits they are frozen at that
    moment:

        deltas = CounterDeltas()                    with CounterDeltas() as c:
        ...                                              ...
        assert deltas["block_cache.hits"] == 2      assert c == {"block_cache.misses": 1}
    """

    def __init__(self, read: Callable[[], Mapping[str, int]] = counters.totals):
        self._read = read
        self._before: Mapping[str, int] = read()
        self._after: Mapping[str, int] | None = None

    def __enter__(self) -> CounterDeltas:
        self._before, self._after = self._read(), None
        return self

    def __exit__(self, *exc: object) -> None:
        self._after = self._read()

    @property
    def delta(self) -> dict[str, int]:
        """The counters that moved, by name, with how much."""
        after = self._read() if self._after is None else self._after
        before = self._before
        return {
            k: after.get(k, 0) - before.get(k, 0)
            for k in sorted(set(after) | set(before))
            if after.get(k, 0) != before.get(k, 0)
        }

    def __getitem__(self, name: str) -> int:
        return self.delta.get(name, 0)

    def get(self, name: str, default: int | None = None) -> int | None:  # type: ignore[override]
        return self.delta.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self.delta

    def __iter__(self) -> Iterator[str]:
        return iter(self.delta)

    def __len__(self) -> int:
        return len(self.delta)

    def __repr__(self) -> str:
        return f"CounterDeltas({self.delta!r})"
