"""Fault `remote-store`: tiered storage's remote store (KIP-405) misbehaves.

Three modes, on every system with the `remote-tier` capability (the replica's
replica.remote_store, Kafka's LocalTieredStorage; how each system does it:
its `RemoteTier`, harness.sut):

- `lose`: one remote segment's objects are deleted (the store lost them).
  Records below every replica's local log start then exist nowhere: a reader
  from offset 0 gets an error there, and the final reads go past it (the
  workload's final phase) so the checkers report the acknowledged writes
  there as lost-write. Nothing to undo.
- `unavailable`: every operation on the store fails until the fault stops:
  copies are retried, reads below the local log start fail.
- `slow`: each operation takes about `delay` seconds longer.

Random schedule: a mode at random (lose: a random stored segment; slow: a
delay of 0.2-1.5 s); `remote-store-heal` makes the store available and fast
again. Scenario steps: `remote-store: {mode: lose, key: 0, offset: 3}` (the
segment holding offset 3 of key 0; without `offset`, the key's first
segment), `remote-store: {mode: unavailable}`, `remote-store: {mode: slow,
delay: 0.5}`, then `remote-store-heal:`. The start op's value says what was
done (the lost segment's key, offsets and objects).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from harness.sut import REMOTE_TIER, require
from nemesis.fault import FaultArgError, FaultKind, Target, parse_model

MODES = ("lose", "unavailable", "slow")


class RemoteStoreArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["lose", "unavailable", "slow"]
    key: int = 0
    offset: int | None = None
    delay: float = 0.5

    @model_validator(mode="after")
    def _check(self):
        if self.mode != "lose" and (self.offset is not None or "key" in self.model_fields_set):
            raise ValueError("key and offset are for mode lose")
        if self.mode != "slow" and "delay" in self.model_fields_set:
            raise ValueError("delay is for mode slow")
        if not 0 < self.delay <= 30:
            raise ValueError("delay must be in (0, 30] seconds")
        return self

    def refs(self) -> list[str]:
        return []

    def resolve(self, node, plan) -> Target:
        return Target([], detail=self.model_dump(), spec="scripted")


def parse_start(arg) -> RemoteStoreArgs:
    return parse_model(RemoteStoreArgs, arg)


def parse_stop(arg) -> None:
    if arg not in (None, {}, True, "all"):
        raise FaultArgError("takes no arguments (write `- remote-store-heal:`)")
    return None


def pick_segment(segments: list[dict], key: int, offset: int | None) -> dict | None:
    """The segment of `key` holding `offset` (the latest base at or below it), or the key's first."""
    mine = [s for s in segments if s["key"] == key]
    if offset is not None:
        mine = [s for s in mine if s["base"] <= offset][-1:]
    return mine[0] if mine else None


class RemoteStore:
    def __init__(self, env):
        self.tier = require(env.db, REMOTE_TIER, "fault remote-store")
        self.log = env.log
        self.unavailable = False   # what the stop has to undo
        self.slow = False

    def choose(self, rng, view):
        mode = rng.choice(MODES)
        if mode == "lose":
            segments = self.tier.segments()
            seg = rng.choice(segments) if segments else None
            detail = {"mode": mode, "key": seg["key"] if seg else 0, "offset": seg["base"] if seg else None}
        elif mode == "slow":
            detail = {"mode": mode, "delay": round(rng.uniform(0.2, 1.5), 2)}
        else:
            detail = {"mode": mode}
        return Target([], detail=detail, spec=mode)

    def start(self, target: Target):
        d = target.detail or {"mode": "unavailable"}
        mode = d["mode"]
        if mode == "lose":
            seg = pick_segment(self.tier.segments(), d.get("key", 0), d.get("offset"))
            if seg is None:
                self.log(f"remote-store: key {d.get('key', 0)} has no remote segment to lose yet")
                return {"mode": mode, "lost": None}
            lost = self.tier.lose(seg)
            self.log(f"remote-store: lost key {lost['key']} offsets {lost['base']}..{lost['end']} "
                     f"({len(lost['objects'])} objects)")
            return {"mode": mode, "lost": lost}
        if mode == "unavailable":
            self.unavailable = True
            return {"mode": mode, **self.tier.set_available(False)}
        self.slow = True
        return {"mode": mode, **self.tier.set_delay(float(d.get("delay", 0.5)))}

    def _restore(self) -> dict:
        """Undo unavailable and slow (whichever is on): what was undone."""
        out = {}
        if self.slow:
            out.update(self.tier.set_delay(0))
            self.slow = False
        if self.unavailable:
            out.update(self.tier.set_available(True))
            self.unavailable = False
        return out

    def stop(self, target, rng, record):
        record(REMOTE_STORE.stop, self._restore() or None)

    def heal(self) -> None:
        try:
            self._restore()
        except Exception as e:  # noqa: BLE001  (the final phase goes on; the run's cleanup removes the rest)
            self.log(f"remote-store: could not make the store whole again ({type(e).__name__}: {e})")


REMOTE_STORE = FaultKind(name="remote-store", start="remote-store", stop="remote-store-heal",
                         stop_step="remote-store-heal", colour="#17becf", needs=(REMOTE_TIER,), make=RemoteStore,
                         targets=("store",), parse_start=parse_start, parse_stop=parse_stop,
                         description="tiered storage's remote store loses a segment's objects, is unavailable "
                                     "(every operation fails) or slow; remote-store-heal makes it whole again")
