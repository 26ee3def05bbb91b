"""Fault `corrupt`: flip bits in, or truncate, the data files a system
adapter declares (`DB.data_files`: the replica's segments, indexes and
checkpoints; NATS's message blocks and indexes) while the node's process is
down. The process is killed first if it runs and stays down until the
fault's stop (`corrupt-restart`), `restart`, or the final phase.

Random schedule: one node or a minority (never a majority: the point is
whether the others' copies win), bitflip of 1-8 bits or a truncation.
Scenario step: `corrupt: {node: A, files: data, mode: bitflip, bits: 3}`;
`files`: `data` (every declared data file) or a file-name pattern among
them (`"*.log"`); `mode`: bitflip (`bits: N` or `probability: p`) or
truncate (`bytes: N`, or a random length when left out); `seed` optional.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from harness.sut import DATA_FILES, PROCESS, require
from nemesis.fault import MINORITY, ONE, FaultKind, Target, kill_and_wait, parse_model, pick

SOURCE = (Path(__file__).with_name("corrupt_files.py")).read_text()


class CorruptArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node: str | list[str]
    files: str = "data"
    mode: Literal["bitflip", "truncate"] = "bitflip"
    bits: int | None = None
    probability: float | None = None
    bytes: int | None = None
    seed: int | None = None

    @model_validator(mode="after")
    def _check(self):
        if self.mode == "bitflip" and self.bits is not None and self.probability is not None:
            raise ValueError("give bits or probability, not both")
        if self.probability is not None and not 0 < self.probability <= 1:
            raise ValueError("probability must be in (0, 1]")
        if self.mode == "bitflip" and self.bytes is not None:
            raise ValueError("bytes is for mode truncate")
        if self.mode == "truncate" and (self.bits is not None or self.probability is not None):
            raise ValueError("bits and probability are for mode bitflip")
        return self

    def refs(self) -> list[str]:
        return [self.node] if isinstance(self.node, str) else list(self.node)

    def resolve(self, node, plan) -> Target:
        return Target([node(r) for r in self.refs()], detail=self.model_dump(exclude={"node"}))


def parse_start(arg) -> CorruptArgs:
    return parse_model(CorruptArgs, arg)


class Corrupt:
    def __init__(self, env):
        self.db = env.db
        self.process = require(env.db, PROCESS, "fault corrupt")
        require(env.db, DATA_FILES, "fault corrupt")
        self.remotes = env.remotes
        self.python = (env.cluster or env.db.cluster).layout.python
        self.log = env.log
        self.victims: list[str] = []

    def choose(self, rng, view):
        spec = rng.choice([ONE, ONE, MINORITY])
        nodes = pick(spec, view.plan.nodes, rng, None)
        if rng.random() < 0.5:
            detail = {"files": "data", "mode": "bitflip", "bits": rng.randint(1, 8)}
        else:
            detail = {"files": "data", "mode": "truncate", "bytes": rng.choice([None, 1, 16, 100])}
        detail["seed"] = rng.randrange(2 ** 31)
        return Target(nodes, detail=detail, spec=spec)

    def start(self, target: Target):
        d = dict(target.detail or {"files": "data", "mode": "bitflip"})
        kill_and_wait(self.process, target.nodes)
        done = {}
        for i, n in enumerate(target.nodes):
            arg = {"globs": self.db.data_files(n), "match": None if d.get("files", "data") == "data" else d["files"],
                   "mode": d.get("mode", "bitflip"), "bits": d.get("bits"), "probability": d.get("probability"),
                   "bytes": d.get("bytes"), "seed": None if d.get("seed") is None else d["seed"] + i}
            out = self.remotes[n].run([self.python, "-c", SOURCE, json.dumps(arg)], timeout=120)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            done[n] = res["changes"]
            self.log(f"corrupt {n}: {len(res['changes'])} changes in {len({c['file'] for c in res['changes']})} of "
                     f"{res['files']} data files (the history op lists them)")
        self.victims += [n for n in target.nodes if n not in self.victims]
        return {"nodes": list(target.nodes), "mode": d.get("mode", "bitflip"), "files": d.get("files", "data"),
                "changes": done}

    def stop(self, target, rng, record):
        nodes = list(self.victims) if target is None else list(target.nodes)
        started = [n for n in nodes if not self.process.running(n)]
        for n in started:
            self.process.start(n)
        self.victims = [n for n in self.victims if n not in nodes]
        record(CORRUPT.stop, started)

    def heal(self) -> None:
        self.victims = []


CORRUPT = FaultKind(name="corrupt", start="corrupt", stop="corrupt-restart", stop_step="corrupt-restart",
                    colour="#e377c2", needs=(PROCESS, DATA_FILES), make=Corrupt, targets=(ONE, ONE, MINORITY),
                    parse_start=parse_start,
                    description="bitflip or truncate the declared data files of one node or a minority "
                                "while the process is down; corrupt-restart starts it again")
