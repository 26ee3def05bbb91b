"""Matplotlib figures rendered to self-contained data URIs.

Figures are embedded as ``<img src="data:image/svg+xml;base64,...">``: the page
needs no external file, and an SVG inside ``<img>`` cannot run script, so text that
came from the system under test (node names, values) can never become markup.
Dense point clouds are rasterized inside the SVG to keep the page small.
"""

from __future__ import annotations

import base64
import io
from contextlib import contextmanager

import matplotlib

matplotlib.use("Agg")  # never a display; networkx drawing imports pyplot

from matplotlib.figure import Figure  # noqa: E402

from .ops import SECONDS, Fault  # noqa: E402

STYLE = {"text.parse_math": False, "svg.hashsalt": "report", "font.size": 9,
         "axes.spines.top": False, "axes.spines.right": False}


@contextmanager
def figure(width: float = 10.0, height: float = 3.2):
    """A figure under the report style; yields (figure, axes)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width, height), layout="constrained")
        yield fig, fig.add_subplot()


def to_data_uri(fig: Figure, fmt: str = "svg") -> str:
    buf = io.BytesIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(buf, format=fmt, dpi=110, metadata={"Date": None} if fmt == "svg" else None)
    mime = "image/svg+xml" if fmt == "svg" else "image/png"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def shade_faults(ax, faults: list[Fault], label: bool = True, zorder: float = 0) -> None:
    """Nemesis activity as translucent vertical bands, one colour per fault kind, and one bar
    per fault in a lane along the top (overlapping faults take different lanes), labelled
    with what it did (``kill n2 .. start n2``, ``partition n1 | n2 n3``)."""
    from .timeline import lanes  # the same lane rule as the HTML timeline

    seen = set()
    lane_of = lanes([(f.start, f.end) for f in faults])
    depth = 0.045
    for fault, lane in zip(faults, lane_of):
        colour = fault.colour
        name = fault.kind if label and fault.kind not in seen else None
        seen.add(fault.kind)
        start, end = fault.start * SECONDS, max(fault.end, fault.start + 1) * SECONDS
        ax.axvspan(start, end, color=colour, alpha=0.12 if zorder == 0 else 0.25, lw=0, label=name, zorder=zorder)
        top = 1 - lane * depth
        ax.axvspan(start, end, ymin=top - depth * 0.8, ymax=top, color=colour, alpha=0.85, lw=0, zorder=zorder + 1)
        ax.text(start, top - depth * 0.4, " " + fault.label, transform=ax.get_xaxis_transform(), fontsize=6,
                va="center", ha="left", color="black", zorder=zorder + 2, clip_on=True)


def outside_legend(fig: Figure, ax) -> None:
    """The legend right of the axes, where it cannot hide data."""
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))  # one entry per label
    if unique:
        fig.legend(list(unique.values()), list(unique), loc="outside right upper", fontsize=7,
                   markerscale=2, frameon=False)
