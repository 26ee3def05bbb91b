"""The controller process: ``python3 -m replica.controller_process --listen HOST:PORT
--data-dir DIR --era hw|kip101|epoch --cluster-secret-file F [--config F] [--set k=v]``.

A thin shell around ``ControllerCore``; its metadata (our ZooKeeper) is kept in
``DIR/controller-state.json``, replaced atomically on every change.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from . import config as cfg
from .core import actions as A
from .core.controller import ControllerCore
from .shell import Shell, parse_address, process_arguments, read_cluster_secret

STATE_FILE = "controller-state.json"


class ControllerShell(Shell):
    name = "controller"

    def __init__(self, core: ControllerCore, listen, data_dir: str):
        super().__init__(core, listen)
        self.data_dir = data_dir

    def load(self) -> dict | None:
        path = os.path.join(self.data_dir, STATE_FILE)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def address_of(self, dest: Any):
        b = self.core.brokers.get(dest)
        return (b["host"], int(b["port"])) if b else None

    def apply_disk(self, a: Any) -> None:
        if isinstance(a, A.Persist):
            path = os.path.join(self.data_dir, STATE_FILE)
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(a.state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        else:
            self.log(f"unexpected action {a!r}")


def parse_args(argv):
    return process_arguments("python3 -m replica.controller_process").parse_args(argv)


async def amain(args) -> int:
    config = cfg.load(args.era, args.config, args.set)
    secret = read_cluster_secret(args.cluster_secret_file)
    listen = parse_address(args.listen, "--listen")
    os.makedirs(args.data_dir, exist_ok=True)
    core = ControllerCore(args.era, config, address=list(listen), cluster_secret=secret)
    shell = ControllerShell(core, listen, args.data_dir)
    try:
        persisted = shell.load()
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {STATE_FILE} in {args.data_dir}: {e}") from None
    return await shell.run(lambda now: core.start(now, persisted))


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(amain(args))
    except (cfg.ConfigError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
