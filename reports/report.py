"""Build ``report.html`` for one run store: the page a person reviews.

The page is a single self-contained file (inline CSS, inline SVG data URIs, no
script or font from elsewhere) so it opens from ``file://`` anywhere.  All text
that came from the history or the system under test passes through jinja2's
autoescaping; nothing from the store is marked safe.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
from contextlib import contextmanager
import logging
from pathlib import Path
from typing import Any

from . import anomalies as anomalies_mod
from .clock import run_clock
from .diff_grid import differences_by_key, divergent_records, grids, replica_logs
from .ops import fault_intervals, fault_table, mark_referenced, nemesis_label, pair_ops
from .ops_table import select_rows
from .perf_plots import latency_plot, overview_plot, throughput_plot
from .rate import rate_held
from .render import render
from .replica_plots import partition_series, replica_plot
from .scenario import OP_COLUMNS, read_scenario, scenario_ops, scenario_verdict
from .linear_page import COLOURS as LINEAR_COLOURS
from .linear_page import ROW as LINEAR_ROW
from .linear_page import WIDTH as LINEAR_WIDTH
from .linear_page import panels as linear_panels
from .node_events import read_node_events
from .store_reader import read_store
from .story import focus_offsets, held_records, held_values, plot_marks, stories
from . import config as run_config
from .timeline import windows
from .transactions import section as transactions_section
from .topology import topologies

log = logging.getLogger(__name__)
DETAIL_PARTITIONS = 8  # partitions drawn when no partition has an anomaly
STANDARD_FIELDS = {"valid", "counts", "examples"}


def _same_key(a: Any, key: int) -> bool:
    try:
        return int(a) == key
    except (TypeError, ValueError):
        return False


def scenario_keys(scenario) -> set[int]:
    """Partitions that a scenario's unread acknowledged writes or divergence name."""
    keys = set()
    for table in scenario.tables if scenario else []:
        if table.field in ("unread_acknowledged", "divergence"):
            for row in table.rows:
                try:
                    keys.add(int(row.get("key")))
                except (TypeError, ValueError):
                    continue
    return keys


def _variant_option(test: dict) -> Any:
    """The run's variant as its system's variant option (stores written before test.json kept
    `variant`); None when the system is unknown here."""
    from harness import registry

    options = test.get("system_options")
    try:
        name = registry.system(test.get("system")).variant_option
    except registry.RegistryError:
        return None
    return options.get(name) if isinstance(options, dict) and name else None


def test_summary(test: dict, store_dir: Path, scenario: str | None = None) -> dict[str, str]:
    """Name, variant and nemesis of a run, read tolerantly from test.json and the path
    (older stores: `era`, or only the system's variant option)."""
    def pick(*names: str) -> Any:
        for n in names:
            if test.get(n) not in (None, ""):
                return test[n]
        return None

    nemesis = pick("nemesis", "faults")
    if isinstance(nemesis, dict):
        nemesis = nemesis.get("name") or nemesis.get("faults") or nemesis.get("scenario") or nemesis
    if isinstance(nemesis, (list, dict)):
        nemesis = ",".join(map(str, nemesis)) if isinstance(nemesis, list) else json.dumps(nemesis)
    if not nemesis and scenario:
        nemesis = f"scenario {scenario}"
    return {"name": str(pick("name", "test", "scenario") or store_dir.parent.name),
            "variant": str(pick("variant", "era", "generation") or _variant_option(test) or "?"),
            "nemesis": str(nemesis or "none"),
            "start": str(pick("start_time", "start") or store_dir.name)}


def checker_details(results: dict | None) -> list[tuple[str, str]]:
    """Extra fields of each checker (truncation points, per-replica offsets ...), as JSON."""
    out = []
    for name, section in anomalies_mod.checker_sections(results).items():
        extra = {k: v for k, v in section.items() if k not in STANDARD_FIELDS}
        if extra:
            text = json.dumps(extra, indent=1, default=str)
            out.append((name, text if len(text) < 20000 else text[:20000] + "\n..."))
    return out


@contextmanager
def paused_gc():
    """No cyclic GC while a report is built: it would rescan millions of history dicts, repeatedly.

    Nothing built here forms cycles worth collecting; reference counting frees it all."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
            gc.collect()  # the figures' reference cycles, once the history is gone


def _leo_drops(samples: list[dict]) -> list[dict]:
    """Truncations the sampler saw, for runs that no scenario analysed."""
    try:
        from scenarios.results import leo_drops
    except ImportError:
        return []
    try:
        return leo_drops(samples)
    except (KeyError, TypeError, ValueError):
        return []


def build_report(store_dir: str | Path) -> str:
    """Read the store, draw everything, write ``report.html``; returns its path."""
    with paused_gc():
        return _build(Path(store_dir))


def _build(store_dir: Path) -> str:
    store = read_store(store_dir)
    ops = pair_ops(store.history)
    end_of_test = max((op.end for op in ops), default=0)
    faults, markers = fault_intervals(ops, end_of_test, fault_table(store.test))
    found = anomalies_mod.collect(store.results)
    clock = run_clock(store.test, store.results)
    scenario = read_scenario(store.results, store.path, clock)
    referenced = anomalies_mod.referenced_ops(found) | scenario_ops(scenario)
    mark_referenced(ops, referenced)
    keys = sorted(set(anomalies_mod.anomaly_keys(found)) | scenario_keys(scenario))
    summary = test_summary(store.test, store.path, scenario.name if scenario else None)
    if scenario is not None:
        css, sentence = scenario_verdict(store.results, scenario)
    else:
        css, sentence = anomalies_mod.verdict(store.results, found, len(store.history))

    drops = scenario.leo_drops if scenario else _leo_drops(store.samples)
    logs = replica_logs(store.dumps)
    differing = differences_by_key(store.results, store.dumps)
    told = stories(store.history, faults, store.samples, found, read_node_events(store.path, clock),
                   drops, divergent_records(differing), held_values(logs) if logs else None,
                   held_records(logs) if logs else None)
    keys = sorted(set(keys) | {s.key for s in told})
    marks = plot_marks(told)
    series = partition_series(store.samples, set(keys))
    if not keys:
        series = dict(sorted(series.items())[:DETAIL_PARTITIONS])
    replica_figs = [(k, replica_plot(s, faults, [d for d in drops if _same_key(d.get("key"), k)], marks.get(k, [])))
                    for k, s in sorted(series.items())]
    diff = grids(store.dumps, keys, differing, focus_offsets(told), logs)
    if not diff and not keys:
        diff = grids(store.dumps, list(range(DETAIL_PARTITIONS)), differing, logs=logs)
    rate = rate_held(ops, faults, store.test) if scenario is None else None
    timeline = windows(ops, faults)
    in_timeline = {i for w in timeline for b in w.boxes for i in b.indices}
    rows, total = select_rows(store.history, ops, referenced, also=in_timeline)
    table_anchors = {f"op-{r.index}" for r in rows}
    for box in (b for w in timeline for b in w.boxes):
        box.target = next((f"op-{i}" for i in box.indices if f"op-{i}" in table_anchors), "ops")
    nodes = store.test.get("nodes")
    if isinstance(nodes, int) and not isinstance(nodes, bool):  # the spec gives a count: n1..nN
        nodes = [f"n{i}" for i in range(1, min(nodes, 64) + 1)]
    nodes = nodes if isinstance(nodes, list) else []

    context = {
        "summary": summary,
        "store_path": str(store.path),
        "verdict_css": css,
        "verdict": sentence,
        "problems": store.problems,
        "config": run_config.summary(store.test, scenario.name if scenario else None) if store.test else [],
        "config_rest": run_config.rest(store.test) if store.test else "",
        "stats": (store.results or {}).get("stats") if isinstance((store.results or {}).get("stats"), dict) else {},
        "anomalies": found,
        "transactions": transactions_section(store.results),
        "panels": linear_panels(store.history, anomalies_mod.checker_sections(store.results).get("linearizability") or {}),
        "colours": LINEAR_COLOURS,
        "width": LINEAR_WIDTH,
        "row": LINEAR_ROW,
        "stories": told,
        "clock": clock,
        "scenario": scenario,
        "op_columns": OP_COLUMNS,
        "checker_details": checker_details(store.results),
        "timeline_of": {i: b.anchor for w in timeline for b in w.boxes for i in b.indices},
        "table_anchors": table_anchors,
        "latency": latency_plot(ops, faults),
        "throughput": throughput_plot(ops, faults, rate),
        "rate": rate,
        "overview": overview_plot(ops, faults),
        "windows": timeline,
        "faults": faults,
        "markers": markers,
        "replica_figs": replica_figs,
        "grids": diff,
        "grid_anchors": {g.anchor for g in diff},
        "nemesis_label": nemesis_label,
        "topologies": topologies(ops, [str(n) for n in nodes]),
        "rows": rows,
        "total_rows": total,
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cell_text": anomalies_mod.cell_text,
        "example_ops": anomalies_mod.example_ops,
    }
    out = store.path / "report.html"
    out.write_text(render("report.html.j2", context), encoding="utf-8")
    log.info("wrote %s", out)
    return str(out)
