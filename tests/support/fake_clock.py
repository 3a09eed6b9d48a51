"""The one fake clock of the tests: time that moves only when a test says so."""

from __future__ import annotations


class FakeClock:
    """A clock to pass where code takes ``clock=`` (``time.time`` / ``time.monotonic``
    shaped): calling it returns ``now``, after first adding ``step`` (0 by default, so it
    stands still; ``step=1.0`` gives every reading its own, increasing time). A test moves
    it with ``advance(seconds)`` or by setting ``now``."""

    def __init__(self, start: float = 1_700_000_000.0, *, step: float = 0.0):
        self.now = start
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
