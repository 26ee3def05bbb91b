"""`harness campaign run FILE` and `harness campaign check DIR`: the command
functions (harness/cli.py only parses flags). Each returns the exit code."""
from __future__ import annotations

import sys
from pathlib import Path

from harness.campaign.execute import Options, finish, run_campaign
from harness.campaign.folder import PLAN, CampaignFolder
from harness.campaign.spec import CampaignError


def _err(msg: str) -> int:
    print(f"harness: error: {msg}", file=sys.stderr, flush=True)
    return 2


def run_command(file: str, opts: Options) -> int:
    try:
        return run_campaign(file, opts)
    except CampaignError as e:
        return _err(str(e))


def check_command(path: str, master: str | None = None, engine: str = "spark") -> int:
    """A campaign folder: check its runs again and rewrite its page and JUnit.
    Any other folder: every run below it, in one Spark job (a store root)."""
    p = Path(path)
    if not p.is_dir():
        return _err(f"{path} is not a directory; give a campaign folder (store/campaigns/NAME/TIME) or a store root")
    if (p / PLAN).is_file():
        if engine not in ("spark", "local"):
            return _err(f"--engine {engine!r}: use spark or local")
        return finish(CampaignFolder(p.resolve()), Options(store_root=str(p.resolve().parents[2]), master=master,
                                                           engine=engine))
    return check_root(p, master)


def check_root(root: Path, master: str | None) -> int:
    from checkers.store import check_campaign

    runs = sorted({str(h.parent) for h in root.rglob("history.jsonl") if "latest" not in h.parts})
    if not runs:
        return _err(f"no runs (history.jsonl) under {root}; give the folder that `harness run --store` wrote")
    try:
        results = check_campaign(runs, master=master, skip_bad=True)
    except ValueError as e:  # an unreachable Spark master
        return _err(str(e))
    worst = 0
    for run, res in sorted(results.items()):
        code = {True: 0, False: 1}.get(res.get("valid"), 2)
        worst = max(worst, code)
        print(f"{['valid', 'INVALID', 'unknown'][code]:8} {run}")
    return worst
