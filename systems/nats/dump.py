"""Per-replica dumps of NATS JetStream, served by JetStream itself.

A running cluster answers reads from the stream leader only, so one chosen
replica's contents cannot be read through it. Once the servers are stopped,
each node's store directory is exactly that replica's copy: it is copied to
this machine, a standalone nats-server (no cluster, 127.0.0.1, a free port)
recovers the replica's message blocks (see dump_store), and nats-py reads
every message of every stream by sequence. The result has the shape of the replica's `Dump`
(docs/interfaces.md), so the replica diff compares the copies offset by
offset.

A JetStream replica stores a message only when it applies the committed Raft
entry, so `hw` = `leo` (the last sequence): two copies holding different
values at one offset below both is a divergence of committed data. Stored
messages carry no Raft term, so every record's epoch is 0.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
import tempfile
import zlib
from pathlib import Path

from systems.daemons import free_loopback_port
from systems.nats.client import key_of

START_TIMEOUT = 20.0


def _crc(value) -> int:
    return zlib.crc32(json.dumps(value, separators=(",", ":")).encode())


async def _read_streams(url: str) -> list[dict]:
    import nats
    import nats.js.errors

    nc = await nats.connect(url, connect_timeout=2, allow_reconnect=False)
    try:
        js = nc.jetstream(timeout=5)
        parts = []
        for info in await js.streams_info():
            key = key_of(info.config.name)
            if key is None:
                continue
            first, last = info.state.first_seq, info.state.last_seq
            records = []
            seq = first
            while info.state.messages and seq <= last:
                try:
                    msg = await js.get_msg(info.config.name, seq=seq, subject=info.config.subjects[0], next=True)
                except nats.js.errors.NotFoundError:
                    break
                value = json.loads(msg.data)
                records.append([msg.seq - 1, 0, _crc(value), value])  # epoch 0: no term per message
                seq = msg.seq + 1
            parts.append({"topic": "log", "partition": key, "hw": last, "leo": last,
                          "log_start": max(0, first - 1), "records": records})
        return sorted(parts, key=lambda p: p["partition"])
    finally:
        await nc.close()


def dump_store(data: str, binary: str = "nats-server", log: Path | None = None) -> dict:
    """The dump of one replica from a private copy of its JetStream store
    directory (the folder that holds `jetstream/`).

    A standalone server refuses to restore a stream configured with 3
    replicas, and the stream's metadata is checksummed, so the copy's
    streams are re-created by the standalone server itself (same names and
    subjects, one replica, file storage), the server is stopped, the
    replica's message blocks and indexes are put in place of the new
    streams' (empty) ones, and the server, started again, recovers them."""
    streams = _stream_configs(data)
    with tempfile.TemporaryDirectory(prefix="nats-dump-") as tmp:
        store = os.path.join(tmp, "store")
        out = open(log, "ab") if log else None
        try:
            with _standalone(store, binary, out) as url:
                asyncio.run(_create(url, streams))
            for name in streams:
                src = os.path.join(data, "jetstream", "$G", "streams", name, "msgs")
                dst = os.path.join(store, "jetstream", "$G", "streams", name, "msgs")
                if os.path.isdir(src):
                    shutil.rmtree(dst, ignore_errors=True)
                    shutil.copytree(src, dst)
            with _standalone(store, binary, out) as url:
                return {"partitions": asyncio.run(_read_streams(url))}
        finally:
            if out:
                out.close()


def _stream_configs(data: str) -> dict[str, list[str]]:
    """name -> subjects of the copy's streams of the log (their meta.inf)."""
    root = os.path.join(data, "jetstream", "$G", "streams")
    out = {}
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if key_of(name) is None:
            continue
        try:
            cfg = json.loads(Path(root, name, "meta.inf").read_text())
        except (OSError, ValueError):
            continue
        out[name] = list(cfg.get("subjects") or [])
    return out


async def _create(url: str, streams: dict[str, list[str]]) -> None:
    import nats
    from nats.js.api import StorageType, StreamConfig

    nc = await nats.connect(url, connect_timeout=2, allow_reconnect=False)
    try:
        js = nc.jetstream(timeout=5)
        for name, subjects in streams.items():
            await js.add_stream(StreamConfig(name=name, subjects=subjects, num_replicas=1, storage=StorageType.FILE))
    finally:
        await nc.close()


class _standalone:
    """A throwaway standalone nats-server on 127.0.0.1 over `store`; -> its URL."""

    def __init__(self, store: str, binary: str, out):
        self.store, self.binary, self.out = store, binary, out
        self.port = free_loopback_port()
        self.proc = None

    def __enter__(self) -> str:
        conf = self.store + ".conf"
        Path(conf).write_text(f'listen: "127.0.0.1:{self.port}"\njetstream {{\n  store_dir: "{self.store}"\n}}\n')
        self.proc = subprocess.Popen([self.binary, "-c", conf], stdout=self.out or subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        url = f"nats://127.0.0.1:{self.port}"
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the dump server exited ({self.proc.returncode})")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return url
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def __exit__(self, *exc) -> None:
        self.proc.terminate()  # graceful: JetStream writes its indexes
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def collect_dump(remote, data_dir: str, dest: Path, node: str, binary: str, keys: int = 0) -> dict | None:
    """Copy the node's (stopped) store here and dump it; None if it cannot be read.
    After a power fault the FUSE layer (nemesis/lazyfs) is unmounted and what
    the disk kept is in `<data_dir>.backing`, which is read instead. A key
    whose stream the disk no longer has (its metadata was never synced) is an
    empty copy, so acknowledged writes gone from every node are counted."""
    with tempfile.TemporaryDirectory(prefix="nats-copy-") as tmp:
        local = os.path.join(tmp, "data")
        readable = None
        for source in (data_dir, data_dir.rstrip("/") + ".backing"):
            shutil.rmtree(local, ignore_errors=True)
            try:
                remote.get(source, local)
            except Exception:
                continue
            readable = readable or source
            if os.path.isdir(os.path.join(local, "jetstream")):
                break
        else:
            if readable is None:
                return None
            local = None  # the folder is there, the store is not: an empty copy of every key
        try:
            dump = dump_store(local, binary, log=dest / "dump-server.log") if local else {"partitions": []}
        except Exception as e:
            (dest / "dump-error.txt").write_text(f"{type(e).__name__}: {e}\n")
            return None
    have = {p["partition"] for p in dump["partitions"]}
    empty = [{"topic": "log", "partition": k, "hw": 0, "leo": 0, "log_start": 0, "records": []}
             for k in range(keys) if k not in have]
    return {"broker": node, "partitions": sorted(dump["partitions"] + empty, key=lambda p: p["partition"])}
