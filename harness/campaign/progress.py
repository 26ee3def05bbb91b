"""Matrix progress: cells done, runs done, running, left and an ETA. A rich bar on a
terminal, plain lines (one per run start and end) in CI or without a TTY."""
from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.progress import fancy_output


class CampaignProgress:
    def __init__(self, total: int, done: int, parallel: int, fancy: bool | None = None,
                 cells_left: dict[str, int] | None = None):
        self.total, self.done, self.parallel = total, done, parallel
        self.cells_left = dict(cells_left or {})   # cell id -> runs not done yet
        self.running: set[str] = set()
        self.durations: list[float] = []
        self.fancy = fancy_output() if fancy is None else fancy
        self.console = Console(stderr=True, highlight=False)
        self.bar: Progress | None = None
        if self.fancy:
            self.bar = Progress(TextColumn("[bold]campaign"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.description}"), TimeElapsedColumn(),
                                console=self.console, transient=False)
            self.bar.start()
            self.task = self.bar.add_task("", total=total, completed=done)

    def eta_s(self) -> float | None:
        if not self.durations:
            return None
        left = self.total - self.done
        return sum(self.durations) / len(self.durations) * left / max(1, min(self.parallel, left or 1))

    def status(self) -> str:
        eta = self.eta_s()
        eta_txt = "?" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta))
        left = self.total - self.done - len(self.running)
        cells = f"cells {sum(1 for n in self.cells_left.values() if n == 0)}/{len(self.cells_left)} done, " \
            if self.cells_left else ""
        return f"{cells}runs done {self.done}, running {len(self.running)}, left {left}, ETA {eta_txt}"

    def message(self, text: str) -> None:
        if self.bar is not None:
            self.console.print(text)
        else:
            print(f"campaign: {text}", file=sys.stderr, flush=True)

    def _refresh(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, description=self.status())

    def run_started(self, run_id: str, attempt: int) -> None:
        self.running.add(run_id)
        again = f" (attempt {attempt})" if attempt > 1 else ""
        if self.bar is None:
            self.message(f"start {run_id}{again} [{self.status()}]")
        self._refresh()

    def run_ended(self, run_id: str, verdict: str, seconds: float, complete: bool = True) -> None:
        self.running.discard(run_id)
        if complete:
            self.done += 1
            self.durations.append(seconds)
            cell = run_id.rsplit("/", 1)[0]
            if cell in self.cells_left:
                self.cells_left[cell] -= 1
        self.message(f"{verdict:9} {run_id} ({seconds:.0f} s) [{self.status()}]")
        self._refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
