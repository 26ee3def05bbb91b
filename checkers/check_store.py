"""Check a store directory: the log checker, the replica diff and linearizability ->
the checkers' part of results.json (written by harness.verdict, the one writer).

This is what the harness runs after every run (and `harness check` on an
old store). It must work on what a crashed or interrupted run left:
a history whose last line was cut off mid-write is read without that line
(noted in the results), and missing or unreadable replica dumps make the
replica diff partial ("unknown" unless it finds divergence) instead of
failing the whole check.

Engines: "local" runs the in-process kernels; "spark" writes the run to
Parquet under `<store>/parquet/` and runs `checkers.spark.engine` (on
`master`, default local[2]). Both give identical checker results. The
Parquet tables are written once: `parquet/made.json` records the sources
they came from (history and dump sizes and times), and a later check reuses
them while those are unchanged (`history.jsonl_parquet` converts a 10M-op history in
under 30 s; bench/history_to_parquet.py).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

from checkers import applicable, linearizability
from checkers.checker import StoreData, data_checkers, merge_valid
from history.flatten import flatten, flatten_dumps
from history.formats import HistoryError, iter_jsonl
from harness import registry
from harness.run_store import HISTORY, read_dumps as _read_dumps, read_past_copies


class StoreError(ValueError):
    """A store that cannot be checked at all; the message names the problem and the fix."""


def check_store(store_dir: str, engine: str = "local", master: str | None = None) -> dict:
    """Check one store dir; -> the checkers' results (harness.verdict writes them)."""
    if engine == "spark":
        return check_campaign([store_dir], master=master)[store_dir]
    if engine != "local":
        raise StoreError(f"unknown engine {engine!r}: use --engine local or --engine spark")
    history = iter_jsonl(history_path(store_dir))
    flat = flatten(history)  # streamed: no list of all ops
    sends, reads, stats = flat
    truncated = history.truncated
    dumps, missing = read_dumps(store_dir)
    records, replicas = flatten_dumps(dumps)
    data = StoreData(sends, reads, records, replicas, dumps_complete=not missing, ends=flat.ends)
    registered = data_checkers(registry.load_all(registry.CHECKERS))
    names = [name for name in applicable.for_store(store_dir, history_path(store_dir)) if name in registered]
    checkers = {name: registered[name].check(data) for name in names}
    add_times(store_dir, checkers.get("linearizability") or {})
    return judge_run(store_dir, data, assemble(checkers, stats, engine, truncated, missing, store_dir))


def judge_run(store_dir: str, data: StoreData | None, results: dict) -> dict:
    """The judging checkers (Checker.judge) over the other checkers' results, both engines."""
    for checker in registry.load_all(registry.CHECKERS).values():
        if getattr(checker, "judge", None) is not None:
            judged = checker.judge(store_dir, data, results)
            if judged is not None:
                results = judged
    return results


def check_history_file(path: str, engine: str = "local", master: str | None = None) -> dict:
    """Check a lone history file: a `history.jsonl`, or a Jepsen `history.edn` (a Kafka
    queue history with assign/subscribe ops and multi-key sends reads as the harness's
    own, see `history.flatten`). -> the checkers' results, as for a store.

    Why beside check_store: an imported history comes without a store around it. The
    checkers that read replica dumps (their `needs`) have nothing to read: they stay
    in the results as not applicable and do not make the verdict unknown.
    """
    from history.formats import read_history

    if path.endswith((".jsonl", ".json")):
        history = iter_jsonl(path)
        transactional = applicable.jsonl_has_txn(path)
    else:
        history = read_history(path)
        transactional = any(op.get("f") == applicable.TXN for op in history)
    names = applicable.names_for(None, transactional)
    registered = {name: checker for name, checker in data_checkers(registry.load_all(registry.CHECKERS)).items()
                  if name in names}
    workload = applicable.workload_of(None, transactional)
    skipped = {name: f"workload {workload.name!r}: {why}"
               for name, why in (getattr(workload, "not_checked", None) or {}).items() if name in registered}
    skipped.update({name: f"{os.path.basename(path)} is a lone history, without the "
                          f"{', '.join(checker.needs)} this checker reads"
                    for name, checker in registered.items() if getattr(checker, "needs", ())})
    if engine == "spark":
        from checkers.spark.engine import check_runs
        from checkers.spark.session import check_driver, resolve_master

        check_driver(resolve_master(master))
        run = os.path.abspath(path)
        with tempfile.TemporaryDirectory(prefix="replog-check-") as tmp:
            stats = write_parquet(tmp, run, history, {})
            checkers = check_runs([tmp], [run], master=master, complete={run: True}, names=set(names))[run]
    elif engine == "local":
        flat = flatten(history)
        sends, reads, stats = flat
        data = StoreData(sends, reads, [], [], dumps_complete=True, ends=flat.ends)
        checkers = {name: checker.check(data) for name, checker in registered.items()}
    else:
        raise StoreError(f"unknown engine {engine!r}: use --engine local or --engine spark")
    truncated = bool(getattr(history, "truncated", False))
    return assemble(checkers, stats, engine, truncated, [], skipped=skipped)


def not_applicable(store_dir: str | None) -> dict[str, str]:
    """Checkers whose data the store's system cannot give (their `needs`
    against its capabilities; e.g. NATS has no per-replica dumps): name ->
    why. They stay in results.json as "unknown" with that reason and do not
    make the verdict unknown: the history alone decides for such a system."""
    if store_dir is None:
        return {}
    try:
        with open(os.path.join(store_dir, "test.json"), encoding="utf-8") as f:
            test = json.load(f)
        system = registry.system(test.get("system"))  # None: the default system
        name = system.name
    except (OSError, ValueError, AttributeError, registry.RegistryError):
        return {}
    try:
        capabilities = system.capabilities_in(test.get("settings"), test.get("system_options"))
    except ValueError:  # options this version no longer reads: the system's defaults
        capabilities = system.capabilities_in(test.get("settings"))
    out = {}
    try:
        named = test.get("workload")
        if isinstance(named, dict):   # older stores: the workload's settings, its name inside
            named = named.get("name")
        workload = registry.workload(named if isinstance(named, str) and named else "log")
        out.update({c: f"workload {workload.name!r}: {why}" for c, why in getattr(workload, "not_checked", {}).items()})
    except registry.RegistryError:
        pass
    for cname, checker in data_checkers(registry.load_all(registry.CHECKERS)).items():
        lacking = [n for n in getattr(checker, "needs", ()) if not capabilities.has(n)]
        if lacking:
            out[cname] = (f"system {name!r} cannot give what this checker reads ({', '.join(lacking)}): "
                          f"{capabilities[lacking[0]] or 'not a capability of the system'}")
    return out


def assemble(checkers: dict, stats: dict, engine: str, truncated: bool, missing: list,
             store_dir: str | None = None, skipped: dict[str, str] | None = None) -> dict:
    """The results.json document (docs/interfaces.md) plus notes on a partial store.

    skipped: checkers that do not apply (name -> why); default: those the store's system
    cannot feed (`not_applicable`)."""
    skipped = not_applicable(store_dir) if skipped is None else skipped
    for name, why in skipped.items():
        if name in checkers:
            checkers[name] = {**checkers[name], "valid": "unknown", "applies": False, "note": why}
    results = {"valid": merge_valid(c["valid"] for n, c in checkers.items() if n not in skipped),
               "checkers": checkers, "stats": stats, "engine": engine}
    if skipped:
        missing = []  # no dumps is what such a system leaves; not a partial store
    notes = []
    if truncated:
        notes.append(f"{HISTORY}: the last line was cut off and was skipped")
    if missing:
        notes.append("no readable dump.json for " + ", ".join(missing))
    if notes:
        results["notes"] = notes
    return results


def add_times(store_dir: str, found: dict) -> None:
    """Times (ns since the start) of the calls a linearizability counterexample lists.

    Only those few ops are decoded: the history is scanned line by line, and a
    line is parsed only when its position is a wanted index (the harness
    writes index = line number - 1; any other line is checked by its index).
    """
    wanted = linearizability.counterexample_indices(found)
    if not wanted:
        return
    times = {}
    with open(history_path(store_dir), "rb") as handle:
        for number, line in enumerate(handle):
            if number not in wanted:
                continue
            try:
                op = json.loads(line)
            except ValueError:
                continue
            if op.get("index", number) in wanted:
                times[op.get("index", number)] = op.get("time")
            if len(times) == len(wanted):
                break
    linearizability.add_times(found, times)


def history_path(store_dir: str) -> str:
    """The store's history.jsonl, or StoreError if the store has none."""
    path = os.path.join(store_dir, HISTORY)
    if not os.path.exists(path):
        raise StoreError(f"{path}: no history in this store; pass the store dir of a run "
                         f"(store/<test>/<time>/)")
    return path


def read_store_history(store_dir: str) -> tuple[list[dict], bool]:
    """-> (ops, whether a cut-off last line was dropped)."""
    reader = iter_jsonl(history_path(store_dir))
    ops = list(reader)
    return ops, reader.truncated


def read_dumps(store_dir: str) -> tuple[dict[str, dict], list[str]]:
    """-> (node -> dump, and each past copy as "<node>@past<n>"; data nodes whose dump is
    missing or unreadable)."""
    dumps, missing = _read_dumps(store_dir)
    return {**dumps, **read_past_copies(store_dir)}, missing


def check_campaign(store_dirs: list[str], master: str | None = None,
                   skip_bad: bool = False) -> dict[str, dict]:
    """Check many stores in one Spark job (harness.verdict writes each results.json).

    -> {store_dir: results}. Each store's history and dumps are first written
    to `<store>/parquet/` (streamed, chunked), then one job checks them all.
    With skip_bad, a store without a readable history gets results
    {"valid": "unknown", "error": ...} instead of stopping the campaign.
    """
    from checkers.spark.engine import check_runs
    from checkers.spark.session import check_driver, resolve_master

    check_driver(resolve_master(master))  # before any conversion: fail fast, in one line
    prepared, out, names = {}, {}, {}
    for store_dir in store_dirs:
        run = os.path.abspath(store_dir)
        out_dir = os.path.join(store_dir, "parquet")
        try:
            made = reusable_parquet(store_dir, run)
            if made is None:
                made = convert_to_parquet(store_dir, run)
        except (StoreError, HistoryError) as err:
            if not skip_bad:
                raise
            out[store_dir] = {"valid": "unknown", "error": str(err), "engine": "spark"}
            continue
        prepared[run] = (store_dir, out_dir, made["stats"], made["truncated"], made["missing"])
        names[run] = applicable.for_store(store_dir, history_path(store_dir))
    runs = list(prepared)
    if not runs:
        return out
    found = check_runs([p[1] for p in prepared.values()], runs, master=master,
                       complete={run: not p[4] for run, p in prepared.items()},
                       names={name for chosen in names.values() for name in chosen})
    for run, (store_dir, _out, stats, truncated, missing) in prepared.items():
        add_times(store_dir, found[run].get("linearizability") or {})
        mine = {name: result for name, result in found[run].items() if name in names[run]}
        out[store_dir] = judge_run(store_dir, None, assemble(mine, stats, "spark", truncated, missing, store_dir))
    return out


PARQUET_MADE = "made.json"
PARQUET_FORMAT = 5  # bump when the tables' columns or their meaning change (5: ends.absent)


def parquet_sources(store_dir: str) -> dict:
    """What the Parquet tables are made from: (size, mtime) of the history, every dump and
    every past copy."""
    nodes = sorted(_listdir(os.path.join(store_dir, "nodes")))
    paths = [HISTORY] + [os.path.join("nodes", node, "dump.json") for node in nodes] + [
        os.path.join("nodes", node, "past", name) for node in nodes
        for name in sorted(_listdir(os.path.join(store_dir, "nodes", node, "past")))]
    sources = {}
    for path in paths:
        try:
            info = os.stat(os.path.join(store_dir, path))
        except OSError:
            sources[path] = None
            continue
        sources[path] = [info.st_size, info.st_mtime_ns]
    return sources


def _listdir(path: str) -> list[str]:
    return os.listdir(path) if os.path.isdir(path) else []


def reusable_parquet(store_dir: str, run: str) -> dict | None:
    """The record of an earlier conversion if its tables still match the store, else None."""
    try:
        with open(os.path.join(store_dir, "parquet", PARQUET_MADE), encoding="utf-8") as handle:
            made = json.load(handle)
    except (OSError, ValueError):
        return None
    current = {"format": PARQUET_FORMAT, "run": run, "sources": parquet_sources(store_dir)}
    if any(made.get(field) != value for field, value in current.items()):
        return None
    return made


def convert_to_parquet(store_dir: str, run: str) -> dict:
    """Stream the store's history and dumps into `<store>/parquet/`; -> the made.json record."""
    sources = parquet_sources(store_dir)
    history = iter_jsonl(history_path(store_dir))
    dumps, missing = read_dumps(store_dir)
    out_dir = os.path.join(store_dir, "parquet")
    stats = write_parquet(out_dir, run, history, dumps)
    made = {"format": PARQUET_FORMAT, "run": run, "sources": sources, "stats": stats,
            "truncated": history.truncated, "missing": missing}
    tmp = os.path.join(out_dir, PARQUET_MADE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(made, handle)
    os.replace(tmp, os.path.join(out_dir, PARQUET_MADE))
    return made


def write_parquet(out_dir: str, run: str, history, dumps: dict) -> dict:
    """Stream the history into `out_dir` (memory stays flat); -> history stats.

    A bad line found midway removes the tables written so far, so no half run
    is left to be read later.
    """
    from history import parquet

    try:
        return parquet.write_run(out_dir, run, history, dumps)
    except HistoryError:
        shutil.rmtree(out_dir, ignore_errors=True)
        raise
