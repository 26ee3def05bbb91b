"""The remote-store fault's scenario arguments and its choice of segment
(nemesis/remote_store.py): a bad step is one line naming the problem."""
from __future__ import annotations

import random

import pytest

from harness import registry
from nemesis.fault import FaultArgError
from nemesis.remote_store import REMOTE_STORE, RemoteStore, pick_segment

pytestmark = pytest.mark.unit

SEGMENTS = [{"key": 0, "base": 0, "name": "a"}, {"key": 0, "base": 3, "name": "b"},
            {"key": 0, "base": 6, "name": "c"}, {"key": 1, "base": 0, "name": "d"}]


def test_a_step_names_a_mode_and_what_it_needs():
    req = REMOTE_STORE.parse({"mode": "lose", "key": 0, "offset": 4}, stopping=False)
    assert req.refs() == [] and req.resolve(None, None).detail["offset"] == 4
    assert REMOTE_STORE.parse({"mode": "slow", "delay": 1.5}, stopping=False).delay == 1.5
    assert REMOTE_STORE.parse(None, stopping=True) is None
    for bad, words in (({"mode": "drop"}, "mode"), ({"mode": "unavailable", "offset": 3}, "for mode lose"),
                       ({"mode": "lose", "delay": 1}, "for mode slow"), ({"mode": "slow", "delay": 0}, "(0, 30]"),
                       ({"mode": "lose", "segment": 1}, "unknown field")):
        with pytest.raises(FaultArgError, match=words.replace("(", r"\(").replace("]", r"\]")) as e:
            REMOTE_STORE.parse(bad, stopping=False)
        assert "\n" not in str(e.value)
    with pytest.raises(FaultArgError, match="takes no arguments"):
        REMOTE_STORE.parse({"mode": "lose"}, stopping=True)


def test_the_segment_holding_an_offset_or_the_keys_first():
    assert pick_segment(SEGMENTS, 0, 4)["name"] == "b"
    assert pick_segment(SEGMENTS, 0, 6)["name"] == "c"
    assert pick_segment(SEGMENTS, 0, None)["name"] == "a"
    assert pick_segment(SEGMENTS, 1, 9)["name"] == "d"
    assert pick_segment(SEGMENTS, 2, None) is None


class Tier:
    """A remote tier that records what the fault asked of it (the fault's own logic under test)."""

    def __init__(self):
        self.calls = []

    def segments(self):
        return SEGMENTS

    def lose(self, seg):
        self.calls.append(("lose", seg["name"]))
        return {"key": seg["key"], "base": seg["base"], "end": seg["base"] + 2, "objects": [seg["name"]]}

    def set_available(self, available):
        self.calls.append(("available", available))
        return {"available": available}

    def set_delay(self, seconds):
        self.calls.append(("delay", seconds))
        return {"delay_s": seconds}


def test_the_stop_undoes_only_what_the_fault_did():
    class Env:
        log = staticmethod(lambda m: None)

        class db:
            remote_tier = Tier()
            system = registry.system("replica")
            settings = {"remote.storage.enable": True}   # a run with a remote tier
            options = None

    fault = RemoteStore(Env)
    tier = Env.db.remote_tier
    recorded = []
    fault.start(REMOTE_STORE.parse({"mode": "lose", "key": 0, "offset": 4}, False).resolve(None, None))
    fault.stop(None, random.Random(0), lambda f, v: recorded.append((f, v)))
    assert tier.calls == [("lose", "b")] and recorded == [("remote-store-heal", None)]
    fault.start(REMOTE_STORE.parse({"mode": "unavailable"}, False).resolve(None, None))
    fault.heal()
    fault.heal()
    assert tier.calls[1:] == [("available", False), ("available", True)]
    kinds = {fault.choose(random.Random(seed), None).detail["mode"] for seed in range(30)}
    assert kinds == {"lose", "unavailable", "slow"}
