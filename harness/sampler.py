"""Every data node's state every `period` seconds into samples.jsonl, in the
system-independent form of harness.sut.ReplicaState (docs/interfaces.md)."""
from __future__ import annotations

import asyncio
import json
import time


class Sampler:
    def __init__(self, path: str, inspector, nodes: list[str], history, period: float = 0.25):
        self.path = path
        self.inspector = inspector
        self.nodes = nodes
        self.history = history
        self.period = period
        self.count = 0

    async def run(self) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            while True:
                t = time.monotonic()
                states = await asyncio.gather(*(self.inspector.state(n, timeout=self.period) for n in self.nodes))
                for node, state in zip(self.nodes, states):
                    if state is None:
                        continue
                    line = {"time": self.history.now(), "node": node,
                            "state": {"partitions": [s.as_json() for _, s in sorted(state.items())]}}
                    f.write(json.dumps(line, separators=(",", ":")) + "\n")
                    self.count += 1
                f.flush()
                await asyncio.sleep(max(0.0, self.period - (time.monotonic() - t)))
