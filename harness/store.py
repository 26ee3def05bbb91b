"""The store: one directory per run, `store/<test>/<YYYYmmddTHHMMSS>/`, with
`latest` links per test and for the whole store (docs/interfaces.md)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

STORE_MARKERS = ("test.json", "history.jsonl")


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
        (path / "nodes").mkdir()
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
    if not (p / "history.jsonl").is_file():
        raise StoreError(f"{path}: not a store (no history.jsonl); pass a run directory such as store/latest")
    return p


def write_json(path: Path, data) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)
