"""The store: one directory per run, `store/<test>/<YYYYmmddTHHMMSS>/`, with
`latest` links per test and for the whole store (docs/interfaces.md).

This module owns the layout (file names below), the readers of what a run
leaves (history, dumps, samples, results), atomic writes, and the one writer
of results.json (`write_results`, called by harness.verdict only).
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent

TEST = "test.json"
HISTORY = "history.jsonl"
HARNESS_LOG = "harness.log"
SAMPLES = "samples.jsonl"
RESULTS = "results.json"
SCENARIO = "scenario.json"
LEGACY_SCENARIO_RESULTS = "scenario-results.json"  # stores written before results.json kept the scenario part
NODES = "nodes"
DUMP = "dump.json"
PAST = "past"          # nodes/<node>/past/<n>.json: the node's replica as it was before restart n
PAST_MARK = "@past"    # a past copy's name among the dumps: "n1@past2" (history.flatten.is_past)
DATA_NODE = re.compile(r"n\d+\Z")


class StoreError(ValueError):
    """A path that should be a store is not one."""


def create_run_dir(root: str | os.PathLike, test_name: str, when: float | None = None) -> Path:
    """Make a fresh run directory (never reuses an existing one)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(when or time.time()))
    test_dir = Path(root) / test_name
    test_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = test_dir / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        (path / NODES).mkdir()
        return path
    raise StoreError(f"cannot create a run directory under {test_dir}")


def link_latest(run_dir: Path) -> None:
    """Point `<test>/latest` and the root's `latest` at a run whose store is complete
    (not when it starts: `harness check store/latest` must not check a run in progress)."""
    run_dir = Path(run_dir)
    _link(run_dir.parent / "latest", run_dir.name)
    _link(run_dir.parent.parent / "latest", f"{run_dir.parent.name}/{run_dir.name}")


def _link(link: Path, target: str) -> None:
    """Point a `latest` symlink at target, replacing it atomically."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


def validate_store(path: str | os.PathLike) -> Path:
    """The resolved store directory, or StoreError naming what is wrong."""
    p = Path(path)
    if not p.exists():
        raise StoreError(f"{path}: no such directory; pass a run directory such as store/latest")
    if not p.is_dir():
        raise StoreError(f"{path}: not a directory; pass a run directory such as store/latest")
    p = p.resolve()
    if not (p / HISTORY).is_file():
        raise StoreError(f"{path}: not a store (no {HISTORY}); pass a run directory such as store/latest")
    return p


def node_dir(store: str | os.PathLike, node: str) -> Path:
    return Path(store) / NODES / node


# -- writing -----------------------------------------------------------------
def write_json(path: Path, data, indent: int | None = 2, sort_keys: bool = False) -> None:
    """Write a JSON file atomically (a reader never sees half a file)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=indent, sort_keys=sort_keys, default=str)
        handle.write("\n")
    os.replace(tmp, path)


def write_dump(store: str | os.PathLike, node: str, dump: dict) -> None:
    d = node_dir(store, node)
    d.mkdir(parents=True, exist_ok=True)
    write_json(d / DUMP, dump, indent=None)


def write_results(store: str | os.PathLike, results: dict) -> None:
    """results.json: the only writer (harness.verdict decides what goes in)."""
    write_json(Path(store) / RESULTS, results, sort_keys=True)


# -- reading -----------------------------------------------------------------
# Tolerant readers (a crashed run's store must still be read): a missing file is
# empty, lines that do not parse are skipped and, when asked, counted into
# `problems` once per file. The strict history reader for the checkers, which
# names a bad line, is history.formats.
try:  # several times faster on million-line histories
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a project dependency
    _loads = json.loads


def read_json(path: str | os.PathLike, problems: list[str] | None = None):
    """A JSON document, or None if the file is missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return _loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        if problems is not None:
            problems.append(f"{path.name}: cannot parse ({exc})")
        return None


def read_jsonl(path: str | os.PathLike, problems: list[str] | None = None, want=dict) -> list:
    """The lines of a JSONL file that parse to a `want` (a torn last line of a killed run is skipped)."""
    path = Path(path)
    if not path.is_file():
        return []
    rows, bad, first_bad = [], 0, None
    with open(path, "rb") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = _loads(line)
            except ValueError:
                row = None
            if isinstance(row, want):
                rows.append(row)
            else:
                bad += 1
                first_bad = first_bad or lineno
    if bad and problems is not None:
        problems.append(f"{path.name}: skipped {bad} unreadable line(s), first at line {first_bad}")
    return rows


def read_samples(store: str | os.PathLike, problems: list[str] | None = None) -> list[dict]:
    return read_jsonl(Path(store) / SAMPLES, problems)


def read_history(store: str | os.PathLike, problems: list[str] | None = None) -> list[dict]:
    return read_jsonl(Path(store) / HISTORY, problems)


def read_dumps(store: str | os.PathLike, problems: list[str] | None = None) -> tuple[dict[str, dict], list[str]]:
    """-> (node -> dump, data nodes whose dump is missing or unreadable)."""
    nodes = Path(store) / NODES
    dumps, missing = {}, []
    if not nodes.is_dir():
        return dumps, missing
    for d in sorted(p for p in nodes.iterdir() if p.is_dir()):
        f = d / DUMP
        if not f.exists():
            if DATA_NODE.match(d.name):
                missing.append(d.name)
            continue
        dump = read_json(f, problems)
        if isinstance(dump, dict):
            dumps[d.name] = dump
        else:
            missing.append(d.name)
    return dumps, missing


def write_past_copies(dest: str | os.PathLike, copies: list[dict]) -> None:
    """A node's past copies into its collected folder: past/1.json, past/2.json, ..."""
    if copies:
        (Path(dest) / PAST).mkdir(parents=True, exist_ok=True)
    for n, copy in enumerate(copies, 1):
        write_json(Path(dest) / PAST / f"{n}.json", copy, indent=None)


def read_past_copies(store: str | os.PathLike, problems: list[str] | None = None) -> dict[str, dict]:
    """Every node's past copies, named "<node>@past<n>" (unreadable ones are left out and noted)."""
    out = {}
    for f in sorted(Path(store, NODES).glob(f"*/{PAST}/*.json")):
        copy = read_json(f, problems)
        if isinstance(copy, dict) and f.stem.isdigit():
            out[f"{f.parent.parent.name}{PAST_MARK}{f.stem}"] = copy
    return out


# Scenario findings renamed since stores were first written: old key -> new key. The
# readers below give an old store's results under the new names (a later `harness
# check` then writes them). `lost_writes` meant "acknowledged sends the final reads did
# not return", not the log checker's `lost-write` (issue 25: one meaning per name);
# `era` was the replica's word for what every system calls its variant.
RENAMED_SCENARIO_KEYS = {"lost_writes": "unread_acknowledged", "era": "variant"}


def _current_names(doc):
    """A results document with its scenario section's old keys renamed (in place, same order)."""
    section = doc.get("scenario") if isinstance(doc, dict) else None
    if isinstance(section, dict) and any(old in section for old in RENAMED_SCENARIO_KEYS):
        renamed = {}
        for key, value in section.items():
            new = RENAMED_SCENARIO_KEYS.get(key)
            renamed[new if new and new not in section else key] = value
        section.clear()
        section.update(renamed)
    return doc


def _history_ops(history: Path, must_contain: bytes | None = None):
    """The op dicts of a history file, one line at a time (a torn or bad line is
    skipped); with `must_contain`, only lines holding those bytes are parsed."""
    try:
        from orjson import loads
    except ImportError:  # pragma: no cover - orjson is a project dependency
        loads = json.loads
    with open(history, "rb") as f:
        for line in f:
            if must_contain is not None and must_contain not in line:
                continue
            try:
                op = loads(line)
            except ValueError:
                continue
            if isinstance(op, dict):
                yield op


FINAL_READS_MARK = b'"f":"final-reads"'   # history.writer.FINAL_READS as HistoryWriter writes it


def final_reads(store: str | os.PathLike) -> dict | None:
    """The run's final-read outcome: the history's `final-reads` op (one byte search from the
    end, then that line alone), or an old store's test.json `final_reads`; None without one."""
    import mmap

    path = Path(store) / HISTORY
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size:
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    at = data.rfind(FINAL_READS_MARK)
                    if at >= 0:
                        start = data.rfind(b"\n", 0, at) + 1
                        end = data.find(b"\n", at)
                        op = json.loads(data[start:end if end >= 0 else len(data)])
                        return op.get("value") if isinstance(op.get("value"), dict) else None
    except (OSError, ValueError):
        pass
    test = read_json(Path(store) / TEST)
    final = test.get("final_reads") if isinstance(test, dict) else None
    return final if isinstance(final, dict) else None


def op_times(history: Path, wanted: set[int]) -> dict[int, int]:
    """index -> time (ns) of the wanted ops, reading the history once and stopping when all are found."""
    found: dict[int, int] = {}
    try:
        for op in _history_ops(history):
            if op.get("index") in wanted and isinstance(op.get("time"), int):
                found[op["index"]] = op["time"]
                if len(found) == len(wanted):
                    break
    except OSError:
        return {}
    return found


def faults_drawn(history: Path, starts: set[str]) -> dict:
    """What the nemesis did in a run: {"faults": {start op: count}, "plays": {targeted play: count}}.

    `starts` are the fault kinds' start ops (kill, pause, partition, ...), so heals
    and the final phase are not counted; a targeted play counts once (its first step).
    Only nemesis lines are parsed.
    """
    faults: dict[str, int] = {}
    plays: dict[str, int] = {}
    try:
        for op in _history_ops(history, b'"nemesis"'):
            if op.get("process") != "nemesis" or op.get("f") not in starts:
                continue
            faults[op["f"]] = faults.get(op["f"], 0) + 1
            why = op.get("why") if isinstance(op.get("why"), dict) else {}
            if why.get("play") and why.get("step") in (None, 1):
                plays[why["play"]] = plays.get(why["play"], 0) + 1
    except OSError:
        return {"faults": {}, "plays": {}}
    return {"faults": faults, "plays": plays}


def read_results(store: str | os.PathLike, problems: list[str] | None = None) -> dict | None:
    """results.json (the one reader every other module uses), or None if the run has none."""
    results = _current_names(read_json(Path(store) / RESULTS, problems))
    return results if isinstance(results, dict) else None


def has_results(store: str | os.PathLike) -> bool:
    """Whether the run finished (its results.json is written last)."""
    return (Path(store) / RESULTS).is_file()


def read_legacy_scenario_results(store: str | os.PathLike) -> dict | None:
    """An old store's scenario-results.json (before results.json kept the scenario part)."""
    doc = _current_names(read_json(Path(store) / LEGACY_SCENARIO_RESULTS))
    return doc if isinstance(doc, dict) else None


def read_scenario_section(store: str | os.PathLike) -> dict | None:
    """The scenario part of the results (results.json, or an old store's scenario-results.json)."""
    for name in (RESULTS, LEGACY_SCENARIO_RESULTS):
        doc = _current_names(read_json(Path(store) / name))
        if isinstance(doc, dict) and isinstance(doc.get("scenario"), dict):
            return doc["scenario"]
    return None
