"""Progress output: a rich live display on a terminal, plain lines otherwise
(not a TTY, or CI=true). Every message also goes to the store's harness.log."""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn


def fancy_output() -> bool:
    return sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("true", "1", "yes")


class Progress:
    """Phase messages and a run bar. Thread-safe."""

    def __init__(self, log_file: TextIO | None = None, fancy: bool | None = None):
        self.fancy = fancy_output() if fancy is None else fancy
        self.console = Console(stderr=True, highlight=False)
        self.log_file = log_file
        self._lock = threading.Lock()
        self._bar: RichProgress | None = None
        self._task = None
        self._last_plain = 0.0

    def message(self, text: str) -> None:
        with self._lock:
            if self.log_file and not self.log_file.closed:
                self.log_file.write(time.strftime("%H:%M:%S ") + text + "\n")
                self.log_file.flush()
            if self.fancy:
                self.console.print(text)
            else:
                print(f"harness: {text}", file=sys.stderr, flush=True)

    def message_to_log(self, text: str) -> None:
        """Only into harness.log (details nobody needs on the terminal)."""
        with self._lock:
            if self.log_file and not self.log_file.closed:
                self.log_file.write(time.strftime("%H:%M:%S ") + text + "\n")
                self.log_file.flush()

    def start_run(self, total_s: float) -> None:
        if self.fancy:
            self._bar = RichProgress(TextColumn("[bold]workload"), BarColumn(), TextColumn("{task.description}"),
                                     TimeElapsedColumn(), console=self.console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task("", total=total_s)

    def update(self, elapsed_s: float, counts: dict, note: str = "") -> None:
        desc = f"ok {counts.get('ok', 0)}  fail {counts.get('fail', 0)}  info {counts.get('info', 0)} {note}"
        if self._bar is not None:
            self._bar.update(self._task, completed=elapsed_s, description=desc)
        elif time.monotonic() - self._last_plain >= 10:
            self._last_plain = time.monotonic()
            self.message(f"{elapsed_s:5.0f}s {desc}")

    def end_run(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
