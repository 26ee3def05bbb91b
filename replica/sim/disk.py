"""A simulated disk for one broker: written (page cache) versus flushed data.

A process crash keeps written data (the OS page cache survives SIGKILL); a
power failure (``crash(lose_unflushed=True)``) falls back to what was flushed.
Checkpoint files are written with fsync + rename, so they are always durable.
Truncation, a log reset and segment deletion are treated as durable at once.
Logs are lists of records ``(offset, epoch, crc, value)``; ``starts`` keeps the
first local offset of each log and ``segments`` the bases of its segments.
"""

from __future__ import annotations

from ..core import actions as A


class SimDisk:
    def __init__(self):
        self.written: dict[tuple, list] = {}
        self.flushed: dict[tuple, list] = {}
        self.checkpoints: dict[str, dict] = {}
        self.epochs: dict[tuple, list] = {}
        self.starts: dict[tuple, int] = {}
        self.segments: dict[tuple, list] = {}

    def apply(self, action) -> bool:
        """Carry out a disk action; False when it is not one."""
        if isinstance(action, A.Append):
            key = (action.topic, action.partition)
            self.written.setdefault(key, []).extend(action.records)
            self.segments.setdefault(key, [self.starts.get(key, 0)])
        elif isinstance(action, A.Truncate):
            key = (action.topic, action.partition)
            self._keep(key, lambda r: r[0] < action.offset)
            if action.offset < self.starts.get(key, 0):
                self.starts[key] = action.offset
            bases = [b for b in self.segments.get(key, []) if b < action.offset] or [self.starts.get(key, 0)]
            self.segments[key] = bases
        elif isinstance(action, A.Roll):
            self.segments.setdefault((action.topic, action.partition), [0]).append(action.offset)
        elif isinstance(action, A.ResetLog):
            key = (action.topic, action.partition)
            self._keep(key, lambda r: False)
            self.starts[key] = action.offset
            self.segments[key] = [action.offset]
        elif isinstance(action, A.DeleteSegments):
            key = (action.topic, action.partition)
            self._keep(key, lambda r: r[0] >= action.offset)
            self.starts[key] = action.offset
            self.segments[key] = [b for b in self.segments.get(key, []) if b >= action.offset] or [action.offset]
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

    def _keep(self, key: tuple, keep) -> None:
        for table in (self.written, self.flushed):
            log = table.get(key)
            if log is not None:
                table[key] = [r for r in log if keep(r)]
        self.written.setdefault(key, [])

    def crash(self, lose_unflushed: bool) -> None:
        if lose_unflushed:
            self.written = {k: list(self.flushed.get(k, [])) for k in self.written}

    def recovered(self) -> dict:
        """What a restarting broker reads back, in ``BrokerCore.start`` form."""
        hws = self.checkpoints.get("replication-offset-checkpoint", {})
        starts = self.checkpoints.get("log-start-offset-checkpoint", {})
        keys = set(self.written) | set(self.epochs)
        out = {}
        for k in sorted(keys):
            records = list(self.written.get(k, []))
            local = records[0][0] if records else self.starts.get(k, 0)
            out[k] = {"records": records, "hw": hws.get(k), "epoch_cache": list(self.epochs.get(k, [])),
                      "local_start": local, "log_start": min(starts.get(k, local), local),
                      "segments": [b for b in self.segments.get(k, [local]) if b >= local]}
        return out
