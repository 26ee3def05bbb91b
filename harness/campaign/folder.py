"""The campaign folder: `<store root>/campaigns/<name>/<YYYYmmddTHHMMSS>/`.

What it holds, written as the campaign goes so that a kill at any moment
loses nothing but the runs in flight:
- `campaign.yaml`: the file as it was when the campaign started;
- `plan.json`: the cells and runs (seeds fixed), written once, first;
- `events.jsonl`: one line per event, appended and fsynced: `run-start`
  (run, attempt, pid), `run-end` (exit code, whether the run completed, its
  store), `run-partial` (an attempt cut off: its store is kept, marked with
  `PARTIAL.json`, and the run is started again), `stop`, `checked`,
  `finished`;
- `runs/<cell>/<seed>/attempt-<k>/`: the store root of one attempt (the run
  dir is `attempt-<k>/<test>/<time>/`);
- at the end `summary.json`, `index.html`, `junit.xml`.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

CAMPAIGNS = "campaigns"
PLAN = "plan.json"
EVENTS = "events.jsonl"
SUMMARY = "summary.json"
PARTIAL = "PARTIAL.json"


def campaigns_root(store_root: str | os.PathLike) -> Path:
    return Path(store_root) / CAMPAIGNS


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class RunState:
    """What the event log says about one planned run."""
    attempts: list[dict] = field(default_factory=list)   # run-start events
    end: dict | None = None                               # the run-end event, once complete
    partial: list[int] = field(default_factory=list)      # attempts cut off

    @property
    def done(self) -> bool:
        return self.end is not None

    @property
    def open_attempt(self) -> dict | None:
        """The last attempt if it neither ended nor was marked partial."""
        if self.end is not None or not self.attempts:
            return None
        last = self.attempts[-1]
        return None if last["attempt"] in self.partial else last


class CampaignFolder:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).resolve()  # the page, JUnit and events name absolute stores
        self.plan: dict = json.loads((self.path / PLAN).read_text())

    # ------------------------------------------------------------ making one
    @classmethod
    def create(cls, store_root: str | os.PathLike, name: str, file_path: str, plan: dict) -> "CampaignFolder":
        parent = campaigns_root(store_root) / name
        parent.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        for n in range(1, 1000):
            path = parent / (stamp if n == 1 else f"{stamp}-{n}")
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise OSError(f"cannot create a campaign folder under {parent}")
        shutil.copyfile(file_path, path / "campaign.yaml")
        plan = {**plan, "stamp": path.name, "created": now_iso()}
        tmp = path / (PLAN + ".tmp")
        tmp.write_text(json.dumps(plan, indent=2))
        os.replace(tmp, path / PLAN)
        folder = cls(path)
        folder.append({"event": "campaign-start", "pid": os.getpid()})
        return folder

    # ------------------------------------------------------------ the plan
    @property
    def name(self) -> str:
        return self.plan["name"]

    @property
    def stamp(self) -> str:
        return self.path.name

    def cells(self) -> list[dict]:
        return self.plan["cells"]

    def planned_runs(self) -> list[tuple[dict, dict]]:
        """(cell, run) in plan order."""
        return [(cell, run) for cell in self.cells() for run in cell["runs"]]

    def attempt_dir(self, run_id: str, attempt: int) -> Path:
        return self.path / "runs" / run_id / f"attempt-{attempt}"

    # ------------------------------------------------------------ the event log
    def append(self, event: dict) -> None:
        line = json.dumps({"time": now_iso(), **event}, default=str) + "\n"
        with open(self.path / EVENTS, "a+b") as f:
            if f.tell() > 0:  # a line cut off by a kill stays a line of its own
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    line = "\n" + line
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())

    def events(self) -> list[dict]:
        """Every complete line; a last line cut off by a kill is skipped."""
        out = []
        try:
            with open(self.path / EVENTS, encoding="utf-8") as f:
                for line in f:
                    if not line.endswith("\n"):
                        break
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
        except FileNotFoundError:
            pass
        return out

    def run_states(self) -> dict[str, RunState]:
        states = {run["id"]: RunState() for _cell, run in self.planned_runs()}
        for ev in self.events():
            st = states.get(ev.get("run"))
            if st is None:
                continue
            if ev["event"] == "run-start":
                st.attempts.append(ev)
            elif ev["event"] == "run-end":
                st.end = ev
            elif ev["event"] == "run-partial":
                st.partial.append(ev["attempt"])
        return states

    def finished(self) -> dict | None:
        ends = [e for e in self.events() if e.get("event") == "finished"]
        return ends[-1] if ends else None

    def summary(self) -> dict | None:
        try:
            return json.loads((self.path / SUMMARY).read_text())
        except (OSError, ValueError):
            return None

    def write_summary(self, summary: dict) -> None:
        tmp = self.path / (SUMMARY + ".tmp")
        tmp.write_text(json.dumps(summary, indent=2, default=str))
        os.replace(tmp, self.path / SUMMARY)


def run_store(attempt_dir: Path) -> Path | None:
    """The run directory a `harness run --store attempt_dir` made (the one with test.json)."""
    if not attempt_dir.is_dir():
        return None
    found = sorted(p.parent for p in attempt_dir.glob("*/*/test.json") if not p.parent.is_symlink()
                   and "latest" not in p.parts)
    return found[-1] if found else None


def mark_partial(attempt_dir: Path, why: str) -> None:
    """Keep a cut-off attempt's store and say so in it (and in the run dir for the report index)."""
    attempt_dir.mkdir(parents=True, exist_ok=True)
    note = {"partial": True, "why": why, "time": now_iso()}
    (attempt_dir / PARTIAL).write_text(json.dumps(note, indent=2))
    store = run_store(attempt_dir)
    if store is not None:
        (store / PARTIAL).write_text(json.dumps(note, indent=2))


def campaign_folders(store_root: str | os.PathLike, name: str | None = None) -> list[CampaignFolder]:
    """Every campaign folder (of one name), oldest first."""
    root = campaigns_root(store_root)
    parents = [root / name] if name else sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    out = []
    for parent in parents:
        if not parent.is_dir():
            continue
        for path in sorted(parent.iterdir()):
            if (path / PLAN).is_file():
                try:
                    out.append(CampaignFolder(path))
                except (OSError, ValueError):
                    continue
    return sorted(out, key=lambda f: (f.stamp, f.name))


def latest_unfinished(store_root, name: str) -> CampaignFolder | None:
    """The last campaign of this name with planned runs not done: killed before its end, or
    ended by its budget (or a stop) with runs left, which `--resume` continues."""
    open_ = [f for f in campaign_folders(store_root, name)
             if f.finished() is None or any(not st.done for st in f.run_states().values())]
    return open_[-1] if open_ else None


def previous_finished(store_root, name: str, before: str) -> CampaignFolder | None:
    """The last finished campaign of this name that started before `before` (a stamp)."""
    done = [f for f in campaign_folders(store_root, name)
            if f.stamp < before and f.finished() is not None and f.summary() is not None]
    return done[-1] if done else None
