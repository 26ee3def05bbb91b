"""The campaign page (`index.html` in a campaign folder) and the page that
lists every campaign of a store root with its pass rate over time
(`<store root>/campaigns/index.html`).

Both read only the campaigns' summary.json files (harness.campaign.outcome),
so they render quickly and the same way on a re-check.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from .figures import figure, to_data_uri
from .render import render

STATUS_CLASS = {"as-expected": "valid", "unexpected": "invalid", "unknown": "unknown", "not-run": "unknown"}


def _generated() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds_text(s) -> str:
    return "" if s is None else f"{s:.1f} s"


def build_campaign_page(folder: str | Path, summary: dict) -> str:
    """Write `index.html` in the campaign folder; returns its path."""
    folder = Path(folder)
    t = summary["totals"]
    banner = "valid" if summary.get("exit_code") == 0 else "unknown" if summary.get("exit_code") == 2 else "invalid"
    by_id = {c["id"]: c for c in summary["cells"]}
    comparison = summary.get("comparison") or {}
    context = {"s": summary, "t": t, "banner": banner, "status_class": STATUS_CLASS,
               "seconds": seconds_text, "generated": _generated(),
               "new_failures": [by_id[i] for i in comparison.get("new_failures", [])],
               "fixed": [by_id[i] for i in comparison.get("fixed", [])],
               "flaky": [by_id[i] for i in comparison.get("flaky", [])],
               "comparison": comparison}
    out = folder / "index.html"
    out.write_text(render("campaign.html.j2", context), encoding="utf-8")
    return str(out)


def campaign_rows(campaigns_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(campaigns_dir.glob("*/*/summary.json")):
        try:
            s = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        t = s.get("totals", {})
        cmp_ = s.get("comparison") or {}
        rows.append({"name": s.get("name", path.parent.parent.name), "stamp": s.get("stamp", path.parent.name),
                     "link": f"{path.parent.parent.name}/{path.parent.name}/index.html",
                     "cells": t.get("cells", 0), "as_expected": t.get("as_expected", 0),
                     "pass_rate": t.get("pass_rate"), "runs": t.get("runs", 0), "invalid": t.get("invalid", 0),
                     "unknown": t.get("unknown", 0), "new_failures": len(cmp_.get("new_failures", [])),
                     "fixed": len(cmp_.get("fixed", [])), "flaky": len(cmp_.get("flaky", [])),
                     "ttfa": t.get("ttfa_median_s"), "exit": s.get("exit_code")})
    return rows


def pass_rate_plot(rows: list[dict]) -> str | None:
    """Pass rate (cells as expected) of each campaign name over its campaigns, as an SVG data URI."""
    names = sorted({r["name"] for r in rows})
    if not rows:
        return None
    with figure(7.0, 2.2) as (fig, ax):
        for name in names:
            mine = [r for r in rows if r["name"] == name and r["pass_rate"] is not None]
            if mine:
                ax.plot([r["stamp"][:15] for r in mine], [100 * r["pass_rate"] for r in mine],
                        marker="o", label=name)
        ax.set_ylim(-5, 105)
        ax.set_ylabel("cells as expected (%)")
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.legend(fontsize=7, loc="lower left")
        return to_data_uri(fig)


def build_campaigns_index(campaigns_dir: str | Path) -> str:
    """Write `<store root>/campaigns/index.html`: every campaign, newest first, and the plot."""
    campaigns_dir = Path(campaigns_dir)
    rows = campaign_rows(campaigns_dir)
    context = {"rows": sorted(rows, key=lambda r: (r["stamp"], r["name"]), reverse=True),
               "plot": pass_rate_plot(sorted(rows, key=lambda r: r["stamp"])), "root": str(campaigns_dir.parent),
               "generated": _generated(), "seconds": seconds_text}
    out = campaigns_dir / "index.html"
    out.write_text(render("campaigns.html.j2", context), encoding="utf-8")
    return str(out)
