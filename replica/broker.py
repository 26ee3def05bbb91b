"""The broker process: ``python3 -m replica.broker --id N --listen HOST:PORT
--controller HOST:PORT --data-dir DIR --era hw|kip101|epoch [--config F] [--set k=v]``.

A thin shell (``replica/shell.py``) around ``BrokerCore``: it recovers the
partition logs and checkpoints from the data dir with ``replica/storage.py``,
hands them to the core, and carries out the core's disk actions.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from . import config as cfg
from . import storage as S
from .core import actions as A
from .core.broker import HW_CHECKPOINT, BrokerCore
from .shell import Shell, parse_address, process_arguments


class BrokerShell(Shell):
    def __init__(self, core: BrokerCore, listen, controller, data_dir: str, config: dict):
        super().__init__(core, listen)
        self.name = f"broker-{core.id}"
        self.controller = controller
        self.data_dir = data_dir
        self.config = config
        self.logs: dict[tuple[str, int], S.PartitionLog] = {}
        # HW / recovery-point checkpoints: written off the event loop (see S.CheckpointWriter).
        self.checkpoints = S.CheckpointWriter(on_error=self.log)

    def recover(self) -> dict:
        """Open every partition log (dropping torn tails) and read the checkpoints."""
        hws: dict = {}
        hw_path = os.path.join(self.data_dir, HW_CHECKPOINT)
        if os.path.exists(hw_path):
            try:
                hws = S.read_offset_checkpoint(hw_path)
            except S.CheckpointError as e:
                self.log(f"ignoring unreadable {hw_path}: {e}")
        recovered = {}
        for topic, partition, path in S.list_partition_dirs(self.data_dir):
            log = self._open(topic, partition)
            epochs = []
            epoch_path = os.path.join(path, S.LEADER_EPOCH_CHECKPOINT)
            if os.path.exists(epoch_path):
                try:
                    epochs = S.read_leader_epoch_checkpoint(epoch_path)
                except S.CheckpointError as e:
                    self.log(f"ignoring unreadable {epoch_path}: {e}")
            recovered[(topic, partition)] = {"records": [tuple(r) for r in log.records],
                                             "hw": hws.get((topic, partition)),
                                             "epoch_cache": epochs, "log_start": log.log_start}
        return recovered

    def _open(self, topic: str, partition: int) -> S.PartitionLog:
        log = self.logs.get((topic, partition))
        if log is None:
            path = os.path.join(self.data_dir, S.partition_dir_name(topic, partition))
            log = self.logs[(topic, partition)] = S.PartitionLog(
                path, segment_bytes=self.config["log.segment.bytes"])
        return log

    def address_of(self, dest: Any):
        if dest == A.CONTROLLER:
            return self.controller
        address = self.core.brokers.get(str(dest))
        return (address[0], int(address[1])) if address else None

    def apply_disk(self, a: Any) -> None:
        if isinstance(a, A.Append):
            self._open(a.topic, a.partition).append(a.records)
        elif isinstance(a, A.Truncate):
            self._open(a.topic, a.partition).truncate_to(a.offset)
        elif isinstance(a, A.Flush):
            self._open(a.topic, a.partition).flush()
        elif isinstance(a, A.WriteOffsetCheckpoint):
            self.checkpoints.submit(S.write_offset_checkpoint, os.path.join(self.data_dir, a.name),
                                    dict(a.offsets))
            self.checkpoints.submit(S.write_offset_checkpoint,
                                    os.path.join(self.data_dir, S.RECOVERY_POINT_OFFSET_CHECKPOINT),
                                    {k: log.recovery_point for k, log in self.logs.items()})
        elif isinstance(a, A.WriteEpochCheckpoint):
            log = self._open(a.topic, a.partition)
            S.write_leader_epoch_checkpoint(os.path.join(log.path, S.LEADER_EPOCH_CHECKPOINT), a.entries)
        else:
            self.log(f"unexpected action {a!r}")

    def close(self) -> None:
        self.checkpoints.close()         # the shutdown checkpoint is on disk before we exit
        for log in self.logs.values():
            log.close()


def parse_args(argv):
    parser = process_arguments("python3 -m replica.broker")
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--controller", required=True)
    return parser.parse_args(argv)


async def amain(args) -> int:
    config = cfg.load(args.era, args.config, args.set)
    listen = parse_address(args.listen, "--listen")
    controller = parse_address(args.controller, "--controller")
    os.makedirs(args.data_dir, exist_ok=True)
    core = BrokerCore(args.id, args.era, config, host=listen[0], port=listen[1],
                      controller_address=list(controller))
    shell = BrokerShell(core, listen, controller, args.data_dir, config)
    recovered = shell.recover()
    return await shell.run(lambda now: core.start(now, recovered))


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(amain(args))
    except (cfg.ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
