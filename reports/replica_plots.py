"""Per-replica LEO and HW over time for one partition, from ``samples.jsonl``.

This is the picture behind most replication bugs: which replica was ahead, when
the HW moved, when a leader was elected (epoch bump) and when the ISR changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .figures import SECONDS, figure, outside_legend, shade_faults, to_data_uri
from .ops import Fault

NODE_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


@dataclass
class PartitionSeries:
    """Samples of one partition: per node (time, leo, hw), plus elections and ISR changes."""

    key: int
    by_node: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    elections: list[tuple[int, Any, Any]] = field(default_factory=list)  # (time, epoch, leader)
    isr_changes: list[tuple[int, tuple]] = field(default_factory=list)  # (time, isr)
    # tiered storage: per node (time, log start, local log start, remote end or -1)
    tiers: dict[str, list[tuple[int, int, int, int]]] = field(default_factory=dict)

    @property
    def tiered(self) -> bool:
        return any(ls < local or remote >= 0 for pts in self.tiers.values() for _t, ls, local, remote in pts)


def _int(x: Any) -> int | None:
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def partition_series(samples: list[dict], keys: set[int]) -> dict[int, PartitionSeries]:
    """Series for the partitions in ``keys`` (every partition when ``keys`` is empty)."""
    out: dict[int, PartitionSeries] = {}
    rows = []
    for s in samples:
        state = s.get("state") if isinstance(s.get("state"), dict) else {}
        parts = state.get("partitions") if isinstance(state.get("partitions"), list) else []
        t = _int(s.get("time"))
        if t is None:
            continue
        node = str(s.get("node", state.get("broker", "?")))
        for p in parts:
            if isinstance(p, dict) and (key := _int(p.get("partition"))) is not None and (not keys or key in keys):
                rows.append((t, node, key, p))
    rows.sort(key=lambda r: r[0])
    last_epoch: dict[int, Any] = {}
    last_leader: dict[int, str] = {}
    last_isr: dict[int, tuple] = {}
    for t, node, key, p in rows:
        ser = out.setdefault(key, PartitionSeries(key))
        leo, hw = _int(p.get("leo")), _int(p.get("hw"))
        if leo is not None and hw is not None:
            ser.by_node.setdefault(node, []).append((t, leo, hw))
        local, start = _int(p.get("local_log_start")), _int(p.get("log_start"))
        if local is not None and start is not None:
            remote = _int(p.get("remote_end"))
            ser.tiers.setdefault(node, []).append((t, start, local, -1 if remote is None else remote))
        epoch = _int(p.get("leader_epoch"))
        if epoch is not None and (key not in last_epoch or epoch > last_epoch[key]):
            if key in last_epoch:
                ser.elections.append((t, epoch, p.get("leader")))
            last_epoch[key] = epoch
        elif epoch is None and p.get("role") == "leader":  # no epochs (NATS): a new leader's own sample
            if key in last_leader and last_leader[key] != node:
                ser.elections.append((t, None, node))
            last_leader[key] = node
        isr = p.get("isr")
        if p.get("role") == "leader" and isinstance(isr, list):
            isr_t = tuple(sorted(map(str, isr)))
            if last_isr.get(key) != isr_t:
                if key in last_isr:
                    ser.isr_changes.append((t, isr_t))
                last_isr[key] = isr_t
    return out


def _with_gaps(pts: list[tuple[int, int, int]]) -> tuple[list[float], list[float], list[float]]:
    """Seconds, LEO, HW, with a break (NaN) where a node gave no sample for a while (it was down)."""
    gaps = sorted(b[0] - a[0] for a, b in zip(pts, pts[1:]))
    limit = 3 * gaps[len(gaps) // 2] if gaps else 0
    ts, leo, hw = [], [], []
    for j, (t, lo, h) in enumerate(pts):
        if j and limit and t - pts[j - 1][0] > limit:
            ts.append((pts[j - 1][0] + limit / 3) * SECONDS)
            leo.append(math.nan)
            hw.append(math.nan)
        ts.append(t * SECONDS)
        leo.append(lo)
        hw.append(h)
    return ts, leo, hw


def replica_plot(series: PartitionSeries, faults: list[Fault], drops: list[dict] = (),
                 marks: list[tuple[float, int, str]] = ()) -> str | None:
    """LEO and HW lines per node; ``drops`` are truncation points (time_ns, node, from, to);
    ``marks`` the anomaly stories' writes (ack time in s, offset, label)."""
    if not series.by_node:
        return None
    with figure(height=3.4) as (fig, ax):
        shade_faults(ax, faults)
        for i, (node, pts) in enumerate(sorted(series.by_node.items())):
            colour = NODE_COLOURS[i % len(NODE_COLOURS)]
            ts, leo, hw = _with_gaps(pts)
            ax.step(ts, leo, where="post", color=colour, lw=1.4, label=f"{node} LEO")
            ax.step(ts, hw, where="post", color=colour, lw=1.0, ls="--", label=f"{node} HW")
        if series.tiered:
            _draw_tiers(ax, series)
        top = ax.get_ylim()[1]
        for t, epoch, leader in series.elections:
            ax.axvline(t * SECONDS, color="black", lw=1.2)
            label = f" leader {leader}" if epoch is None else f" epoch {epoch}: leader {leader}"
            ax.text(t * SECONDS, top, label, rotation=90, va="top",
                    ha="right", fontsize=7)
        for t, isr in series.isr_changes:
            ax.axvline(t * SECONDS, color="#9467bd", lw=0.9, ls=":")
            ax.text(t * SECONDS, 0, f" ISR {','.join(isr)}", rotation=90, va="bottom", ha="left",
                    fontsize=7, color="#9467bd")
        for d in drops:
            t, to = _int(d.get("time_ns")), _int(d.get("to"))
            if t is not None and to is not None:
                ax.scatter([t * SECONDS], [to], marker="v", s=60, color="#d62728", zorder=4,
                           label="truncation")
                ax.annotate(f"{d.get('node', '')} truncates {d.get('from', '?')}->{to}",
                            (t * SECONDS, to), textcoords="offset points", xytext=(4, -12),
                            fontsize=7, color="#d62728")
        for t, offset, text in marks:
            ax.scatter([t], [offset], marker="X", s=70, color="black", zorder=5, label="lost/divergent write")
            if len(marks) <= 6:  # more labels would only hide each other
                ax.annotate(text, (t, offset), textcoords="offset points", xytext=(5, 4), fontsize=7)
        ax.set_xlabel("time since the start (s)")
        ax.set_ylabel("offset")
        ax.set_title(f"Partition {series.key}: LEO (solid) and HW (dashed) per replica; "
                     "black lines are elections, dotted purple lines ISR changes"
                     + ("\nlog start (dotted), local log start (dash-dot), remote end (thin); grey band: "
                        "remote segments" if series.tiered else ""))
        outside_legend(fig, ax)
        return to_data_uri(fig)


def _draw_tiers(ax, series: PartitionSeries) -> None:
    """Tiered storage: each replica's log start and local log start, and the remote
    tier as a band from the lowest log start to the highest remote end seen."""
    band_t, band_lo, band_hi = [], [], []
    for t, values in sorted(_by_time(series.tiers).items()):
        ends = [remote for _ls, _local, remote in values if remote >= 0]
        if ends:
            band_t.append(t * SECONDS)
            band_lo.append(min(ls for ls, _l, _r in values))
            band_hi.append(max(ends))
    if band_t:
        ax.fill_between(band_t, band_lo, band_hi, step="post", color="#7f7f7f", alpha=0.25, lw=0,
                        label="remote segments (log start..remote end)")
    for i, (node, pts) in enumerate(sorted(series.tiers.items())):
        colour = NODE_COLOURS[i % len(NODE_COLOURS)]
        ts = [t * SECONDS for t, *_ in pts]
        ax.step(ts, [ls for _t, ls, _l, _r in pts], where="post", color=colour, lw=0.9, ls=":",
                label=f"{node} log start")
        ax.step(ts, [local for _t, _ls, local, _r in pts], where="post", color=colour, lw=0.9, ls="-.",
                label=f"{node} local log start")
        ax.step(ts, [math.nan if r < 0 else r for _t, _ls, _l, r in pts], where="post", color=colour, lw=0.6,
                alpha=0.6, label=f"{node} remote end (as it knows it)")


def _by_time(tiers: dict) -> dict[int, list[tuple[int, int, int]]]:
    """time -> the (log start, local log start, remote end) of the nodes sampled then,
    each node carried forward to later times until its next sample."""
    times = sorted({t for pts in tiers.values() for t, *_ in pts})
    out: dict[int, list] = {t: [] for t in times}
    for pts in tiers.values():
        j = 0
        for t in times:
            while j + 1 < len(pts) and pts[j + 1][0] <= t:
                j += 1
            if pts and pts[j][0] <= t:
                out[t].append(pts[j][1:])
    return out
