"""`harness campaign run FILE` and `harness campaign check DIR`: the command
functions (harness/cli.py only parses flags). Each returns the exit code."""
from __future__ import annotations

import sys
from pathlib import Path

from harness.campaign.check import ENGINES
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


def check_command(path: str, master: str | None = None, engine: str = "auto") -> int:
    """A campaign folder: check its runs again and rewrite its page and JUnit.
    Any other folder: every run below it, in one job (a store root)."""
    p = Path(path)
    if not p.is_dir():
        return _err(f"{path} is not a directory; give a campaign folder (store/campaigns/NAME/TIME) or a store root")
    if engine not in ENGINES:
        return _err(f"--engine {engine!r}: use {', '.join(ENGINES)}")
    if (p / PLAN).is_file():
        return finish(CampaignFolder(p.resolve()), Options(store_root=str(p.resolve().parents[2]), master=master,
                                                           engine=engine))
    return check_root(p, master, engine)


def check_root(root: Path, master: str | None, engine: str = "auto") -> int:
    """Every run below a store root: a scenario run counts by its scenario's expectation
    (invalid as expected is a pass), any other run by its verdict."""
    from harness.campaign.check import CheckError, check_stores

    runs = sorted({h.parent for h in root.rglob("history.jsonl") if "latest" not in h.parts})
    if not runs:
        return _err(f"no runs (history.jsonl) under {root}; give the folder that `harness run --store` wrote")
    try:
        results = check_stores(runs, master=master, log=lambda m: print(f"campaign: {m}", file=sys.stderr),
                               engine=engine)
    except CheckError as e:  # an unreachable Spark master, no Java
        return _err(str(e))
    worst = 0
    for run, res in sorted(results.items()):
        code, word = run_code(res)
        worst = max(worst, code)
        print(f"{word:20} {run}")
    return worst


def run_code(results: dict) -> tuple[int, str]:
    """(exit code, word) of one run: a scenario's expectation decides a scenario run."""
    sc = results.get("scenario") if isinstance(results.get("scenario"), dict) else None
    if sc is not None and isinstance(sc.get("as_expected"), bool):
        return (0, "as expected") if sc["as_expected"] else (1, "NOT as expected")
    code = {True: 0, False: 1}.get(results.get("valid"), 2)
    return code, ["valid", "INVALID", "unknown"][code]
