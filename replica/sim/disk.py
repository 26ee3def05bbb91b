"""A simulated disk for one broker: written (page cache) versus flushed data.

A process crash keeps written data (the OS page cache survives SIGKILL); a
power failure (``crash(lose_unflushed=True)``) falls back to what was flushed.
Checkpoint files are written with fsync + rename, so they are always durable.
Truncation is treated as durable at once.
"""

from __future__ import annotations

from ..core import actions as A


class SimDisk:
    def __init__(self):
        self.written: dict[tuple, list] = {}
        self.flushed: dict[tuple, list] = {}
        self.checkpoints: dict[str, dict] = {}
        self.epochs: dict[tuple, list] = {}

    def apply(self, action) -> bool:
        """Carry out a disk action; False when it is not one."""
        if isinstance(action, A.Append):
            self.written.setdefault((action.topic, action.partition), []).extend(action.records)
        elif isinstance(action, A.Truncate):
            key = (action.topic, action.partition)
            log = self.written.setdefault(key, [])
            del log[action.offset:]
            durable = self.flushed.get(key)
            if durable is not None:
                del durable[action.offset:]
        elif isinstance(action, A.Flush):
            key = (action.topic, action.partition)
            self.flushed[key] = list(self.written.get(key, []))
        elif isinstance(action, A.WriteOffsetCheckpoint):
            self.checkpoints[action.name] = dict(action.offsets)
        elif isinstance(action, A.WriteEpochCheckpoint):
            self.epochs[(action.topic, action.partition)] = [tuple(e) for e in action.entries]
        else:
            return False
        return True

    def crash(self, lose_unflushed: bool) -> None:
        if lose_unflushed:
            self.written = {k: list(self.flushed.get(k, [])) for k in self.written}

    def recovered(self) -> dict:
        """What a restarting broker reads back, in ``BrokerCore.start`` form."""
        hws = self.checkpoints.get("replication-offset-checkpoint", {})
        keys = set(self.written) | set(self.epochs)
        return {k: {"records": list(self.written.get(k, [])), "hw": hws.get(k),
                    "epoch_cache": list(self.epochs.get(k, [])), "log_start": 0} for k in sorted(keys)}
