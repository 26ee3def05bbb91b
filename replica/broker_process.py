"""The broker process: ``python3 -m replica.broker_process --id N --listen HOST:PORT
--controller HOST:PORT --data-dir DIR --era hw|kip101|epoch --cluster-secret-file F
[--config F] [--set k=v]``.

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
from . import protocol as P
from . import storage as S
from .core import actions as A
from .core.broker import HW_CHECKPOINT, BrokerCore
from .remote_store import StoreClient
from .shell import Shell, parse_address, process_arguments, read_cluster_secret

NO_SIZE_ROLL = 1 << 62          # segments roll when the core says so (Roll actions)


class BrokerShell(Shell):
    def __init__(self, core: BrokerCore, listen, controller, data_dir: str, config: dict,
                 remote_store: tuple[str, int] | None = None):
        super().__init__(core, listen)
        self.store = StoreClient(remote_store) if remote_store else None
        self.name = f"broker-{core.id}"
        self.controller = controller
        self.data_dir = data_dir
        self.config = config
        self.logs: dict[tuple[str, int], S.PartitionLog] = {}
        # HW / recovery-point checkpoints: written off the event loop (see S.CheckpointWriter).
        self.checkpoints = S.CheckpointWriter(on_error=self.log)

    def recover(self) -> dict:
        """Open every partition log (dropping torn tails) and read the checkpoints."""
        hws = self._read_offsets(HW_CHECKPOINT)
        starts = self._read_offsets(S.LOG_START_OFFSET_CHECKPOINT)
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
                                             "hw": hws.get((topic, partition)), "epoch_cache": epochs,
                                             "local_start": log.log_start,
                                             "log_start": starts.get((topic, partition), log.log_start),
                                             "segments": [s.base_offset for s in log.segments()]}
        return recovered

    def _read_offsets(self, name: str) -> dict:
        path = os.path.join(self.data_dir, name)
        try:
            return S.read_offset_checkpoint(path)
        except S.CheckpointError as e:
            self.log(f"ignoring unreadable {path}: {e}")
            return {}

    def _open(self, topic: str, partition: int) -> S.PartitionLog:
        log = self.logs.get((topic, partition))
        if log is None:
            path = os.path.join(self.data_dir, S.partition_dir_name(topic, partition))
            log = self.logs[(topic, partition)] = S.PartitionLog(path, segment_bytes=NO_SIZE_ROLL)
        return log

    def address_of(self, dest: Any):
        if dest == A.CONTROLLER:
            return self.controller
        address = self.core.brokers.get(str(dest))
        return (address[0], int(address[1])) if address else None

    def apply(self, actions: list) -> None:
        """Requests to the remote store go over HTTP on a worker thread; the rest as usual."""
        rest = []
        for a in actions:
            if isinstance(a, A.Send) and a.dest == A.REMOTE_STORE:
                self._call_store(a.message)
            else:
                rest.append(a)
        super().apply(rest)

    def _call_store(self, message: dict) -> None:
        if self.store is None:
            answer = {"corr": message.get("corr"), "error": P.KAFKA_STORAGE_ERROR,
                      "message": "no --remote-store given to this broker"}
            self.feed(lambda now: self.core.on_response(A.REMOTE_STORE, answer, now))
            return
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self.store.call, message)

        def done(f) -> None:
            if not self.stopping and not f.cancelled():
                answer = f.result()
                self.feed(lambda now: self.core.on_response(A.REMOTE_STORE, answer, now))
        future.add_done_callback(done)

    def apply_disk(self, a: Any) -> None:
        if isinstance(a, A.Append):
            self._open(a.topic, a.partition).append(a.records)
        elif isinstance(a, A.Roll):
            self._open(a.topic, a.partition).roll()
        elif isinstance(a, A.ResetLog):
            self._open(a.topic, a.partition).truncate_fully_and_start_at(a.offset)
        elif isinstance(a, A.DeleteSegments):
            self._open(a.topic, a.partition).delete_segments_before(a.offset)
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
    parser = process_arguments("python3 -m replica.broker_process")
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--controller", required=True)
    parser.add_argument("--remote-store", help="HOST:PORT of replica.remote_store (tiered storage)")
    return parser.parse_args(argv)


async def amain(args) -> int:
    config = cfg.load(args.era, args.config, args.set)
    secret = read_cluster_secret(args.cluster_secret_file)
    listen = parse_address(args.listen, "--listen")
    controller = parse_address(args.controller, "--controller")
    os.makedirs(args.data_dir, exist_ok=True)
    store = parse_address(args.remote_store, "--remote-store") if args.remote_store else None
    core = BrokerCore(args.id, args.era, config, host=listen[0], port=listen[1],
                      controller_address=list(controller), cluster_secret=secret)
    shell = BrokerShell(core, listen, controller, args.data_dir, config, store)
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
