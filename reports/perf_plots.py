"""Latency, throughput and the whole-run timeline overview, with nemesis bands.

Point clouds are downsampled to a fixed budget (keeping every failed, unknown and
anomaly-referenced op) so that a million-op history still gives a small page.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.ticker import FuncFormatter

from .figures import SECONDS, figure, outside_legend, shade_faults, to_data_uri
from .ops import NEMESIS, Fault, Op
from .rate import RateHeld

POINT_BUDGET = 20_000
TYPE_COLOURS = {"ok": "#2ca02c", "fail": "#d62728", "info": "#ff7f0e"}
F_MARKERS = ["o", "s", "^", "D", "v", "P"]


def _client_ops(ops: list[Op]) -> list[Op]:
    return [op for op in ops if op.process != NEMESIS]


def _keep(ops: list[Op], budget: int, rng: np.random.Generator) -> list[Op]:
    """At most ``budget`` ops: every non-ok and referenced op, then a uniform sample of the rest."""
    if len(ops) <= budget:
        return ops
    must = [op for op in ops if op.type != "ok" or op.ref]
    rest = [op for op in ops if op.type == "ok" and not op.ref]
    room = max(0, budget - len(must))
    if room < len(rest):
        pick = rng.choice(len(rest), size=room, replace=False)
        rest = [rest[i] for i in sorted(pick)]
    return must[:budget] + rest


def latency_plot(ops: list[Op], faults: list[Fault]) -> str | None:
    client = _client_ops(ops)
    if not client:
        return None
    rng = np.random.default_rng(0)
    shown = _keep(client, POINT_BUDGET, rng)
    fs = sorted({str(op.f) for op in client})
    with figure(height=3.6) as (fig, ax):
        shade_faults(ax, faults)
        for fi, f in enumerate(fs):
            for kind, colour in TYPE_COLOURS.items():
                pts = [op for op in shown if str(op.f) == f and op.type == kind]
                if pts:
                    ax.scatter([op.start * SECONDS for op in pts],
                               [max(op.latency, 1000) / 1e6 for op in pts],
                               s=4, marker=F_MARKERS[fi % len(F_MARKERS)], color=colour,
                               alpha=0.5, lw=0, label=f"{f} {kind}", rasterized=True)
        _quantile_lines(ax, client)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        # Minor log ticks would otherwise print raw mathtext (text.parse_math is off):
        # label 2x and 5x each decade plainly, leave the rest blank.
        ax.yaxis.set_minor_formatter(FuncFormatter(_two_and_five))
        ax.set_xlabel("time since the start (s)")
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"Latency of {len(client):,} client ops"
                     + (f" ({len(shown):,} points drawn)" if len(shown) < len(client) else ""))
        outside_legend(fig, ax)
        return to_data_uri(fig)


def _two_and_five(value: float, _pos) -> str:
    """Minor-tick label on a log axis: only 2 and 5 times a power of ten."""
    if value <= 0:
        return ""
    leading = value / 10 ** math.floor(math.log10(value))
    return f"{value:g}" if round(leading, 6) in (2.0, 5.0) else ""


def _quantile_lines(ax, client: list[Op], buckets: int = 60) -> None:
    """p50 / p95 / p99 of ok-op latency per time bucket."""
    ok = [op for op in client if op.type == "ok"]
    if len(ok) < 10:
        return
    t = np.fromiter((op.start for op in ok), dtype=np.int64, count=len(ok))
    lat = np.fromiter((op.latency for op in ok), dtype=np.int64, count=len(ok)) / 1e6
    edges = np.linspace(t.min(), t.max() + 1, buckets + 1)
    which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, buckets - 1)
    order = np.argsort(which, kind="stable")
    splits = np.searchsorted(which[order], np.arange(buckets + 1))
    mids, qs = [], []
    for b in range(buckets):
        chunk = lat[order[splits[b]:splits[b + 1]]]
        if len(chunk):
            mids.append((edges[b] + edges[b + 1]) / 2 * SECONDS)
            qs.append(np.percentile(chunk, [50, 95, 99]))
    if not qs:
        return
    qs = np.array(qs)
    for col, (name, style) in enumerate([("p50", "-"), ("p95", "--"), ("p99", ":")]):
        ax.plot(mids, np.maximum(qs[:, col], 1e-3), style, color="black", lw=1, label=f"ok {name}")


def throughput_plot(ops: list[Op], faults: list[Fault], rate: RateHeld | None = None) -> str | None:
    """Completions per second by type; with the run's rate figure (reports/rate.py), the
    invocations per second beside the configured rate and the rate achieved outside faults."""
    client = _client_ops(ops)
    if not client:
        return None
    end = np.fromiter((op.end for op in client), dtype=np.int64, count=len(client))
    span = max(int(end.max() - end.min()), 1)
    buckets = int(min(200, max(10, span * SECONDS)))
    edges = np.linspace(0, end.max() + 1, buckets + 1)
    width_s = (edges[1] - edges[0]) * SECONDS
    kinds = np.array([op.type for op in client])
    with figure(height=3.0) as (fig, ax):
        shade_faults(ax, faults)
        for kind, colour in TYPE_COLOURS.items():
            sel = end[kinds == kind]
            if len(sel):
                counts, _ = np.histogram(sel, bins=edges)
                ax.step(edges[:-1] * SECONDS, counts / width_s, where="post", color=colour, label=kind)
        if rate is not None:
            _rate_lines(ax, client, edges, width_s, rate)
        ax.set_xlabel("time since the start (s)")
        ax.set_ylabel("ops / s")
        ax.set_title("Throughput by completion type" + ("" if rate is None else ", invocations against the configured rate"))
        outside_legend(fig, ax)
        return to_data_uri(fig)


def _rate_lines(ax, client: list[Op], edges, width_s: float, rate: RateHeld) -> None:
    """Invocations per bucket, the configured rate over the main phase, and the rate
    achieved outside fault windows (the summary's figure) as a line over the same span."""
    invoked = np.fromiter((op.start for op in client if op.invoke_index is not None), dtype=np.int64)
    if len(invoked):
        counts, _ = np.histogram(invoked, bins=edges)
        ax.step(edges[:-1] * SECONDS, counts / width_s, where="post", color="#555555", lw=0.8, label="invoked")
    lo, hi = rate.phase[0] * SECONDS, rate.phase[1] * SECONDS
    ax.hlines(rate.configured, lo, hi, colors="black", linestyles=(0, (4, 3)), lw=1.0,
              label=f"configured {rate.configured:g} ops/s")
    if rate.achieved is not None:
        word = "held" if rate.held else "not held"
        ax.hlines(rate.achieved, lo, hi, colors="black", lw=1.8,
                  label=f"invoked outside faults {rate.achieved:.1f} ops/s ({word})")


def overview_plot(ops: list[Op], faults: list[Fault]) -> str | None:
    """Every process as a row: each op a line from invoke to completion, or, for a long
    history, a strip of time buckets coloured by the worst outcome in each (info > fail > ok)."""
    client = _client_ops(ops)
    if not client:
        return None
    procs = sorted({op.process for op in client}, key=lambda p: (not isinstance(p, int), p if isinstance(p, int) else 0, str(p)))
    row = {p: i for i, p in enumerate(procs)}
    height = min(6.0, 1.6 + 0.12 * len(procs))
    with figure(height=height) as (fig, ax):
        if len(client) <= POINT_BUDGET:
            shade_faults(ax, faults)
            for kind, colour in TYPE_COLOURS.items():
                pts = [op for op in client if op.type == kind]
                if pts:
                    ax.hlines([row[op.process] for op in pts], [op.start * SECONDS for op in pts],
                              [op.end * SECONDS for op in pts], colors=colour, lw=3, label=kind,
                              rasterized=True)
        else:
            _outcome_strips(ax, client, row)
            shade_faults(ax, faults, zorder=2)  # over the opaque strips
        refs = [op for op in client if op.ref]
        if refs:
            ax.scatter([op.start * SECONDS for op in refs], [row[op.process] for op in refs],
                       marker="v", s=30, color="black", label="in an anomaly", zorder=3)
        ax.set_xlabel("time since the start (s)")
        ax.set_ylabel("process")
        if len(procs) <= 40:
            ax.set_yticks(range(len(procs)), [str(p) for p in procs])
        ax.set_ylim(len(procs) - 0.5, -0.5)
        ax.set_title(f"Overview of all {len(client):,} client ops")
        outside_legend(fig, ax)
        return to_data_uri(fig)


def _outcome_strips(ax, client: list[Op], row: dict, buckets: int = 600) -> None:
    """All ops binned by (process, start time); each cell takes its worst outcome."""
    rank = {"ok": 1, "fail": 2, "info": 3}
    start = np.fromiter((op.start for op in client), dtype=np.int64, count=len(client))
    rows = np.fromiter((row[op.process] for op in client), dtype=np.int64, count=len(client))
    outcome = np.fromiter((rank.get(op.type, 3) for op in client), dtype=np.int8, count=len(client))
    t0, t1 = int(start.min()), int(start.max()) + 1
    col = ((start - t0) * buckets // max(t1 - t0, 1)).astype(np.int64)
    grid = np.zeros((len(row), buckets), dtype=np.int8)
    np.maximum.at(grid, (rows, col), outcome)
    colours = ["#ffffff00", TYPE_COLOURS["ok"], TYPE_COLOURS["fail"], TYPE_COLOURS["info"]]
    cmap = ListedColormap(colours)
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=3, aspect="auto", interpolation="nearest",
              extent=(t0 * SECONDS, t1 * SECONDS, len(row) - 0.5, -0.5), rasterized=True)
    for kind in ("ok", "fail", "info"):
        ax.plot([], [], color=TYPE_COLOURS[kind], lw=6, label=f"{kind} (worst in bucket)")
