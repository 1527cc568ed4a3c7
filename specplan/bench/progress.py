"""Progress reporting of a benchmark run: a minimal stderr bar and stderr notes."""

from __future__ import annotations

import sys
import time


class Progress:
    """Minimal stderr progress bar (uses tqdm when importable and ``use_tqdm``)."""

    def __init__(self, total: int, label: str, enabled: bool = True, use_tqdm: bool = False,
                 stream=None):
        self.total = max(int(total), 0)
        self.label = label
        self.enabled = enabled
        self.count = 0
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_draw = 0.0
        self._last_pct = -1
        self._tqdm = None
        if enabled and use_tqdm:
            try:
                from tqdm import tqdm

                self._tqdm = tqdm(total=self.total, desc=label, file=self.stream)
            except Exception:
                self._tqdm = None

    def update(self, n: int = 1, info: str = "") -> None:
        self.count += n
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.update(n)
            if info:
                self._tqdm.set_postfix_str(info, refresh=False)
            return
        now = time.monotonic()
        frac = self.count / self.total if self.total else 1.0
        elapsed = now - self.t0
        if self._tty:
            if now - self._last_draw < 0.1 and self.count < self.total:
                return
            width = 30
            fill = int(width * frac)
            bar = "#" * fill + "." * (width - fill)
            self.stream.write(f"\r{self.label} [{bar}] {self.count}/{self.total} {elapsed:6.1f}s {info[:40]:<40}")
            self.stream.flush()
            self._last_draw = now
        else:
            pct = int(frac * 20) * 5  # a line every 5 %
            if pct != self._last_pct or self.count == self.total:
                self._last_pct = pct
                self.stream.write(f"{self.label}: {self.count}/{self.total} ({pct}%) {elapsed:.1f}s {info}\n")
                self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._tty:
            self.stream.write("\n")
            self.stream.flush()


def note(notes: list | None, msg: str) -> None:
    """Append ``msg`` to ``notes`` (when given) and echo it to stderr."""
    if notes is not None:
        notes.append(msg)
    sys.stderr.write(f"[specplan.bench] {msg}\n")

