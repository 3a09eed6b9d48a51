"""What a command shows while it works and in its summary: a progress bar of bytes
on a terminal, and byte counts for people (``1.5 KiB``)."""

from __future__ import annotations

from typing import Any


def human_bytes(n: int | None) -> str:
    """``1536`` -> ``1.5 KiB``."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # not reached


class ProgressBar:
    """A ``rich`` bar of bytes on a terminal (none when stdout is not one, or not
    ``enabled``); as a context manager, it gives ``warm_table`` its ``progress``."""

    def __init__(self, label: str, *, enabled: bool) -> None:
        self.label, self.enabled = label, enabled
        self._bar: Any = None  # a rich Progress while on a terminal
        self._task: Any = None

    def __enter__(self):
        from rich.console import Console

        if not self.enabled or not Console().is_terminal:
            return None
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

        self._bar = Progress(TextColumn(self.label), BarColumn(), DownloadColumn())
        self._bar.__enter__()
        self._task = self._bar.add_task(self.label, total=None)
        return self._advance

    def _advance(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
