"""A tiny progress bar on stderr: silent when stderr is not a terminal, when disabled, or under
SPECPLAN_NO_PROGRESS=1."""

from __future__ import annotations

import os
import sys
import time


class Progress:
    """`with Progress(total, "sweep") as p: ... p.update(n)` draws `label [#####.....] 42% 3/7`."""

    def __init__(self, total: int, label: str = "", enabled: bool | None = None, stream=None, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)()) and not os.environ.get(
                "SPECPLAN_NO_PROGRESS")
        self.enabled = bool(enabled) and total > 0
        self.total = max(int(total), 1)
        self.label = label
        self.width = width
        self.done = 0
        self._last = 0.0

    def update(self, n: int = 1) -> None:
        """Advance by `n` steps and redraw (at most ~20 times a second, always at the end)."""
        self.done = min(self.total, self.done + n)
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done < self.total and now - self._last < 0.05:
            return
        self._last = now
        frac = self.done / self.total
        fill = int(round(frac * self.width))
        bar = "#" * fill + "." * (self.width - fill)
        self.stream.write(f"\r{self.label} [{bar}] {frac * 100:3.0f}% {self.done}/{self.total}")
        self.stream.flush()

    def close(self) -> None:
        """Finish the line (only if anything was drawn)."""
        if self.enabled and self._last:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
