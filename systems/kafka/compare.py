"""`harness scenario --compare NAME` (harness/cli.py): the replica's model of each replication
era against the Kafka release of that era, on the same scenario.

Eras and releases: `hw` (high-watermark truncation) = Kafka 0.10.2.2,
`kip101` (leader epochs) = 0.11.0.3, `epoch` (KIP-279) = 2.8.2 and 4.1.1. The
model's script is NAME (system `replica`), the real one `kafka-NAME`
(systems/kafka/scenarios/). Each pair runs `runs` times (one cluster at a time; a
release that two eras share runs once a round)
unless `from_store` is set, and the table is built from every run of them in
the store: per era and release, both verdicts (invalid runs / runs), the
acknowledged writes the final reads did not return (the scenario's
`unread_acknowledged`; "?" for a run without a final phase) and the divergent
offsets per run, and the truncation
points (node: to) of the last run.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ERA_RELEASES = {"hw": ("0.10.2.2",), "kip101": ("0.11.0.3",), "epoch": ("2.8.2", "4.1.1")}
TIERED = ("tiered-fresh-follower", "tiered-out-of-sync-follower", "tiered-multiple-hard-failures")
PAIRS = ("hw-data-loss", "hw-divergence", "fast-failover", *TIERED, "replaced-disk")
# KIP-903 (Kafka 3.5, KRaft) is the model's epoch era's rule isr_broker_epochs: the eras without it
# against 2.8.2 (ZooKeeper, no KIP-903), the epoch era against 4.1.1
REPLACED_DISK = {"hw": ("2.8.2",), "kip101": ("2.8.2",), "epoch": ("4.1.1",)}


def eras_of(name: str) -> dict[str, tuple[str, ...]]:
    """The eras and releases a pair is compared in: tiered storage (KIP-405) exists only in
    the model's epoch era and on Kafka 4.x; replaced-disk (KIP-903) in every era against the release
    with or without the fix."""
    if name == "replaced-disk":
        return REPLACED_DISK
    return {"epoch": ("4.1.1",)} if name in TIERED else ERA_RELEASES


def summary(run_dir: Path) -> dict | None:
    """One finished run: {scenario, variant, verdict, as_expected, unread, divergent, truncations, store}."""
    from harness.run_store import read_results

    res = read_results(run_dir)
    if res is None:
        return None
    sc = res.get("scenario") or {}
    checkers = res.get("checkers") or {}
    diff = (checkers.get("replica-diff") or {}).get("counts") or {}
    log = (checkers.get("log") or {}).get("counts") or {}
    truncs = [(t.get("node"), t.get("to")) for t in sc.get("truncations") or []] or \
             [(t.get("node"), t.get("to")) for t in sc.get("leo_drops") or []]
    unread = sc.get("unread_acknowledged")   # None: the run had no final phase
    return {"scenario": sc.get("name"), "variant": sc.get("variant"), "verdict": sc.get("verdict", res.get("valid")),
            "as_expected": sc.get("as_expected"),
            "unread": len(unread) if isinstance(unread, list) else "?",
            "divergent": diff.get("divergence", 0) or len(sc.get("divergence") or []),
            "inconsistent": log.get("inconsistent-offsets", 0), "truncations": truncs, "store": str(run_dir),
            "error": sc.get("error")}


def runs_of(store_root: Path, scenario: str, variant: str) -> list[dict]:
    """The finished runs of the scenario in that variant: in `store_root/<scenario>-<variant>/`
    (`harness scenario --store`) or anywhere below it (a campaign's store nests them as
    runs/<cell>/run-N/attempt-K/<scenario>-<variant>/)."""
    name = f"{scenario}-{variant}"
    dirs = sorted(d for d in store_root.glob(f"**/{name}") if d.is_dir() and not d.is_symlink())   # ** matches
    # no folder too: store_root/<name> itself
    out = []
    for d in dirs:
        for run in sorted(p for p in d.iterdir() if p.is_dir() and not p.is_symlink()):
            s = summary(run)
            if s is not None and not s["error"]:
                out.append(s)
    return out


def _cell(runs: list[dict]) -> tuple[str, str, str]:
    if not runs:
        return "not run", "-", "-"
    bad = sum(1 for r in runs if r["verdict"] is False)
    verdict = f"invalid {bad}/{len(runs)}" if bad else f"valid {len(runs)}/{len(runs)}"
    unread = ",".join(str(r["unread"]) for r in runs)
    div = ",".join(str(r["divergent"]) for r in runs)
    return verdict, unread, div


def table(store_root: Path, names=PAIRS) -> list[dict]:
    rows = []
    for name in names:
        for era, releases in eras_of(name).items():
            model = runs_of(store_root, name, era)
            for version in releases:
                real = runs_of(store_root, f"kafka-{name}", version)
                mv, ml, md = _cell(model)
                kv, kl, kd = _cell(real)
                agree = None
                if model and real:
                    agree = (any(r["verdict"] is False for r in model) == any(r["verdict"] is False for r in real))
                rows.append({"scenario": name, "era": era, "kafka": version, "model": mv, "model_unread": ml,
                             "model_divergent": md, "real": kv, "real_unread": kl, "real_divergent": kd,
                             "agree": agree,
                             "real_truncations": real[-1]["truncations"] if real else [],
                             "model_truncations": model[-1]["truncations"] if model else []})
    return rows


def render(rows: list[dict]) -> str:
    head = ("| scenario | replica era | Kafka | model verdict | model unread | model divergent | Kafka verdict "
            "| Kafka unread | Kafka divergent | agree |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        agree = {True: "yes", False: "NO", None: "-"}[r["agree"]]
        lines.append(f"| {r['scenario']} | {r['era']} | {r['kafka']} | {r['model']} | {r['model_unread']} | "
                     f"{r['model_divergent']} | {r['real']} | {r['real_unread']} | {r['real_divergent']} | {agree} |")
    return "\n".join(lines)


def compare_command(name: str | None, store_root: str, runs: int = 1, from_store: bool = False,
                    subnet: str | None = None, backend: str = "netns") -> int:
    names = PAIRS if name in (None, "all") else (name,)
    for n in names:
        if n not in PAIRS:
            print(f"harness: error: --compare {n!r}: scenarios with both a replica and a kafka variant: "
                  f"{', '.join(PAIRS)}", file=sys.stderr)
            return 2
    if not from_store:   # each run as the CLI runs it (this layer does not import the scenario runner)
        for n in names:
            for _ in range(runs):
                ran = set()   # a release that stands for two eras (replaced-disk's 2.8.2) runs once a round
                for era, releases in eras_of(n).items():
                    _scenario(n, era, store_root, backend, subnet)
                    for version in releases:
                        if version not in ran:
                            ran.add(version)
                            _scenario(f"kafka-{n}", version, store_root, backend, subnet)
    print(render(table(Path(store_root), names)))
    return 0


def _scenario(name: str, variant: str, store_root: str, backend: str, subnet: str | None) -> int:
    argv = [sys.executable, "-m", "harness", "scenario", name, "--variant", variant, "--store", store_root,
            "--backend", backend, *(["--subnet", subnet] if subnet else [])]
    return subprocess.run(argv).returncode
