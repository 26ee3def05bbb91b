"""The `log` workload, after Jepsen's Kafka workload.

K keys (= partitions of topic `log`), C client processes, a send/poll mix at
a target rate. Every op is an invoke and a completion in the history:
`ok`; `fail` only when the write definitely did not happen (DefiniteError);
`info` when it may have (IndefiniteError, timeouts, anything unexpected). A
process that got `info` is never reused: the client continues as a new
process number (Jepsen's rule). Sends carry unique integers.

The final phase (after the nemesis healed everything) waits until every
partition has a leader and a full ISR, then polls every key to its end.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from dataclasses import dataclass, field

TOPIC = "log"


def _client_mod():
    import replica.client as rc  # noqa: PLC0415 - built in parallel; imported when used
    return rc


@dataclass
class WorkloadConfig:
    keys: int = 3
    concurrency: int = 10
    rate: float = 100.0
    send_fraction: float = 0.5
    acks: str = "all"
    replication_factor: int = 3
    topic_config: dict = field(default_factory=dict)
    request_timeout: float = 5.0
    seed: int = 0


def _acks(a: str):
    return a if a == "all" else int(a)


def _err(e: BaseException) -> str:
    return (type(e).__name__ + (f": {e}" if str(e) else ""))[:200]


class LogWorkload:
    def __init__(self, cfg: WorkloadConfig, bootstrap: list[tuple[str, int]], history, log=lambda m: None):
        self.cfg = cfg
        self.bootstrap = bootstrap
        self.history = history
        self.log = log
        self.rng = random.Random(cfg.seed)
        self._values = itertools.count(1)
        self._next_process = cfg.concurrency  # 0..C-1 are the first processes
        self.rc = _client_mod()

    def client(self):
        return self.rc.Client(bootstrap=self.bootstrap, request_timeout=self.cfg.request_timeout)

    def _new_process(self) -> int:
        p = self._next_process
        self._next_process += 1
        return p

    # -- setup -------------------------------------------------------------
    async def setup(self, timeout: float = 60.0, dead=lambda: None) -> None:
        """Create the topic (retrying until the controller and brokers are up)
        and wait for every partition to have a leader. `dead()` names a
        replica process that exited (then there is no point in waiting)."""
        client = self.client()
        deadline = time.monotonic() + timeout
        try:
            last = None
            while True:
                problem = dead()
                if problem:
                    raise RuntimeError(problem)
                try:
                    await client.create_topic(TOPIC, partitions=self.cfg.keys,
                                              replication_factor=self.cfg.replication_factor,
                                              config=self.cfg.topic_config)
                    break
                except Exception as e:  # not up yet, or already exists after a retry
                    if "EXISTS" in str(e).upper():
                        break
                    last = e
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not create topic {TOPIC!r}: {_err(last)}")
                await asyncio.sleep(0.5)
            await self.wait_healthy(client, deadline - time.monotonic(), full_isr=True)
        finally:
            await client.close()

    async def wait_healthy(self, client, timeout: float, full_isr: bool) -> bool:
        """Every partition has a leader (and, if asked, ISR == replicas)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                meta = await asyncio.wait_for(client.metadata(TOPIC), self.cfg.request_timeout)
                if len(meta) >= self.cfg.keys and all(
                        m.get("leader") is not None
                        and (not full_isr or set(m.get("isr", [])) >= set(m.get("replicas", [])))
                        for m in meta.values()):
                    return True
            except Exception:
                pass
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.25)

    async def leader_node(self) -> str | None:
        """The host of a random partition's leader (for leader-targeted faults)."""
        client = self.client()
        try:
            meta = await client.metadata(TOPIC)
            leaders = [m["leader"] for _, m in sorted(meta.items()) if m.get("leader") is not None]
            return f"n{self.rng.choice(leaders)}" if leaders else None
        finally:
            await client.close()

    # -- main phase --------------------------------------------------------
    async def run(self, deadline: float) -> None:
        async with asyncio.TaskGroup() as tg:
            for p in range(self.cfg.concurrency):
                tg.create_task(self._worker(p, deadline))

    async def _worker(self, process: int, deadline: float) -> None:
        rng = random.Random(self.rng.random())
        mean_gap = self.cfg.concurrency / self.cfg.rate
        client = self.client()
        positions: dict[int, int] = {}
        try:
            while True:
                await asyncio.sleep(rng.expovariate(1.0 / mean_gap))
                if time.monotonic() >= deadline:
                    return
                if rng.random() < self.cfg.send_fraction:
                    ok = await self._send(client, process, rng.randrange(self.cfg.keys))
                else:
                    ok = await self._poll(client, process, rng, positions)
                if not ok:  # info: this process is done; continue as a new one
                    await _close(client)
                    process, client, positions = self._new_process(), self.client(), {}
        finally:
            await _close(client)

    async def _send(self, client, process: int, key: int) -> bool:
        value = next(self._values)
        op = self.history.invoke(process, "send", [key, value])
        try:
            offset = await asyncio.wait_for(client.produce(TOPIC, key, value, acks=_acks(self.cfg.acks)),
                                            self.cfg.request_timeout + 2)
        except self.rc.DefiniteError as e:
            self.history.complete(op, "fail", [key, value], error=_err(e))
            return True
        except asyncio.CancelledError:
            self.history.complete(op, "info", [key, value], error="cancelled")
            raise
        except Exception as e:  # IndefiniteError, timeouts, anything else: unknown
            self.history.complete(op, "info", [key, value], error=_err(e))
            return False
        self.history.complete(op, "ok", [key, [offset, value]])
        return True

    async def _poll(self, client, process: int, rng: random.Random, positions: dict[int, int]) -> bool:
        keys = sorted(rng.sample(range(self.cfg.keys), min(self.cfg.keys, rng.choice((1, 2)))))
        op = self.history.invoke(process, "poll", None)
        result: dict[str, list] = {}
        new_pos = dict(positions)
        try:
            for key in keys:
                recs, _hw = await asyncio.wait_for(
                    client.fetch(TOPIC, key, new_pos.get(key, 0), max_records=200), self.cfg.request_timeout + 2)
                result[str(key)] = [[o, v] for o, v in recs]
                if recs:
                    new_pos[key] = recs[-1][0] + 1
        except asyncio.CancelledError:
            self.history.complete(op, "fail", None, error="cancelled")
            raise
        except Exception as e:
            if "OUT_OF_RANGE" in str(e).upper():
                # Our position is past the log end (it was truncated): a new
                # consumer process starts over, as Kafka's offset reset would.
                self.history.complete(op, "info", None, error=_err(e))
                return False
            self.history.complete(op, "fail", None, error=_err(e))  # reads change nothing
            return True
        positions.update(new_pos)
        self.history.complete(op, "ok", result)
        return True

    # -- final phase -------------------------------------------------------
    async def final_reads(self, recovery_timeout: float) -> dict:
        """Wait for recovery, then read every key from 0 to its end."""
        client = self.client()
        try:
            healthy = await self.wait_healthy(client, recovery_timeout, full_isr=True)
            if not healthy:
                self.log("final: not every partition has a leader and a full ISR; reading anyway")
                await self.wait_healthy(client, recovery_timeout / 2, full_isr=False)
            process = self._new_process()
            complete = True
            for key in range(self.cfg.keys):
                process, done = await self._read_key(client, process, key, deadline=time.monotonic() + recovery_timeout)
                complete &= done
            return {"healthy": healthy, "complete": complete}
        finally:
            await _close(client)

    async def _read_key(self, client, process: int, key: int, deadline: float) -> tuple[int, bool]:
        pos = 0
        while time.monotonic() < deadline:
            op = self.history.invoke(process, "poll", None)
            try:
                recs, hw = await asyncio.wait_for(client.fetch(TOPIC, key, pos, max_records=1000),
                                                  self.cfg.request_timeout + 2)
                end = await asyncio.wait_for(client.list_offsets(TOPIC, key, "latest"), self.cfg.request_timeout)
            except Exception as e:
                self.history.complete(op, "fail", None, error=_err(e))
                await asyncio.sleep(0.5)
                continue
            self.history.complete(op, "ok", {str(key): [[o, v] for o, v in recs]})
            if recs:
                pos = recs[-1][0] + 1
            if not recs and pos >= min(hw, end):
                return process, True
        return process, False


class Sampler:
    """Every broker's debug State every `period` s, appended to samples.jsonl."""

    def __init__(self, path: str, brokers: dict[str, int], bootstrap, history, period: float = 0.25):
        self.path = path
        self.brokers = brokers  # node -> broker id
        self.bootstrap = bootstrap
        self.history = history
        self.period = period
        self.count = 0

    async def run(self) -> None:
        rc = _client_mod()
        client = rc.Client(bootstrap=self.bootstrap, request_timeout=1.0)
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                while True:
                    t = time.monotonic()
                    results = await asyncio.gather(*(self._one(client, n, b) for n, b in self.brokers.items()))
                    for line in results:
                        if line:
                            f.write(line + "\n")
                            self.count += 1
                    f.flush()
                    await asyncio.sleep(max(0.0, self.period - (time.monotonic() - t)))
        finally:
            await _close(client)

    async def _one(self, client, node: str, broker_id: int) -> str | None:
        try:
            state = await asyncio.wait_for(client.state(broker_id), self.period)
        except Exception:
            return None
        return json.dumps({"time": self.history.now(), "node": node, "state": state}, separators=(",", ":"))


async def collect_dumps(bootstrap, brokers: dict[str, int], timeout: float = 10.0) -> dict[str, dict]:
    rc = _client_mod()
    client = rc.Client(bootstrap=bootstrap, request_timeout=timeout)
    out = {}
    try:
        for node, bid in brokers.items():
            try:
                out[node] = await asyncio.wait_for(client.dump(bid), timeout)
            except Exception:
                pass
    finally:
        await _close(client)
    return out


async def _close(client) -> None:
    try:
        await asyncio.wait_for(client.close(), 2.0)
    except Exception:
        pass
