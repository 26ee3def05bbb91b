"""The `queue` workload: Jepsen's Kafka queue test (transactions and consumer
groups) over a system's `harness.sut.QueueClient` (capability TRANSACTIONS).

C client processes, each with its own producer (a transactional id of its own:
a new one for a new process) and consumer (`read_committed`). Ops:

- `txn=true`: `txn` ops of 1..max_txn_len micro-ops `["send", key, value]` /
  `["poll"]`, completed as `["send", key, [offset, value]]` /
  `["poll", {key: [[offset, value], ...]}]`; the polled positions are committed
  inside the transaction. A fraction `abort_p` is aborted on purpose at the end.
- `txn=false`: single `send` (`[key, value]` -> `[key, [offset, value]]`, an
  idempotent producer) and `poll` (`{key: pairs}`, positions committed after it) ops.
- `consumer=subscribe`: every process joins one consumer group (a `subscribe` op
  of every key); each rebalance the group makes is an `assign` op of the keys the
  process holds after it (a revocation: the keys it kept, often none), recorded
  when the op during which the group made it completes (callbacks run inside a poll).
  `consumer=assign`: an `assign` op of random keys at the start and now and then
  (positions from a group of the process's own).

Outcomes (Jepsen's rules): committed = `ok`; aborted on purpose or refused before
the commit = `fail` (the process goes on; its consumer is back at its committed
position, since Kafka does not rewind a consumer whose transaction aborted); a
fenced producer = `fail` and the process retires; a commit whose outcome is
unknown = `info` and the process retires. A retired process continues as a new
process number with a new client.

The final phase (after the nemesis healed everything) waits for every key to
have a leader and full in-sync replicas, then until no transaction is open on
it (its last stable offset = its high watermark: a retired process's open
transaction is aborted by its coordinator's timeout), then reads every key
from offset 0 to its end with a `read_committed` consumer (`poll` ops of a new
process, as the `log` workload's final reads). The final reads' record also names the
client library and the transaction protocol it negotiated, where the DB says
(`client_info`, harness.sut).
"""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.steps import StepError
from harness.sut import TRANSACTIONS, DefiniteError, Fenced
from workloads.log import LogWorkload, WorkloadConfig, _err

READY_S = 120.0     # s: how long the system may take to serve transactions and groups at first
REASSIGN_P = 0.05   # consumer=assign: the chance per op that a process assigns itself new keys


class QueueOptions(BaseModel):
    """The spec's `workload_options` of the queue workload (`--workload-option k=v`)."""

    model_config = ConfigDict(extra="forbid")
    txn: bool = True
    consumer: Literal["subscribe", "assign"] = "subscribe"
    abort_p: float = Field(0.1, ge=0, le=1, description="the fraction of transactions aborted on purpose")
    max_txn_len: int = Field(4, ge=1, le=16, description="micro-ops per transaction at most")


class QueueWorkload(LogWorkload):
    def __init__(self, cfg: WorkloadConfig, opts: QueueOptions, db, history, log=lambda m: None):
        super().__init__(cfg, db, history, log)
        self.opts = opts
        self.tag = uuid.uuid4().hex[:8]            # transactional ids and groups of this run
        self.group = f"replog-queue-{self.tag}"
        self.counts = {"committed": 0, "aborted": 0, "indefinite": 0, "rebalances": 0}
        self.transactional = opts.txn   # the targeted nemesis draws its late-commit plays (nemesis/targeted.py)
        self.txn_in_flight: dict[str, int] = {}   # transactional id -> its transactions running (the same)
        # the scenario's transactional writer (txn steps): its client, process, transactional id and coordinator
        self._txn_writer = None
        self._txn_writer_info: dict = {}
        self._txn_avoid: tuple[str, str] | None = None   # ("not" | "is", node): the writer's coordinator (coordinator_not / coordinator)
        self._txn_background: asyncio.Task | None = None   # the writer's background transaction (a txn step's)

    def transactional_id(self, process: int) -> str:
        return f"replog-{self.tag}-p{process}"

    def queue_client(self, process: int, transactional_id: str | None = None):
        group = self.group if self.opts.consumer == "subscribe" else f"{self.group}-p{process}"
        return self.db.queue_client(self.cfg.request_timeout, transactional_id or self.transactional_id(process),
                                    group, self.opts.txn)

    async def setup(self, timeout: float = 60.0) -> None:
        """The log (as the log workload makes it), then until the system serves
        transactions and consumer groups (their internal state is made on first use)."""
        start = time.monotonic()
        await super().setup(timeout)
        client = self.queue_client(self.new_process())
        try:
            await client.ready(READY_S)
        finally:
            await client.close()
        self.log(f"transactions and consumer groups served after {time.monotonic() - start:.1f}s")

    # -- main phase ------------------------------------------------------------
    async def _worker(self, process: int, deadline: float) -> None:
        rng = random.Random(self.rng.random())
        client = await self._start(process, rng)
        try:
            while True:
                await self.pacer.wait()
                if time.monotonic() >= deadline:
                    return
                if self.opts.consumer == "assign" and rng.random() < REASSIGN_P:
                    await self._assign(client, process, rng)
                if self.opts.txn:
                    goes_on = await self._txn(client, process, rng)
                elif rng.random() < self.cfg.send_fraction:
                    goes_on = await self._send(client, process, rng.randrange(self.cfg.keys))
                else:
                    goes_on = await self._poll(client, process)
                self._record_rebalances(client, process)
                if not goes_on:   # info or fenced: this process is done; continue as a new one
                    await client.close()
                    process = self.new_process()
                    client = await self._start(process, rng)
        finally:
            await client.close()

    async def _start(self, process: int, rng: random.Random):
        client = self.queue_client(process)
        if self.opts.consumer == "subscribe":
            keys = list(range(self.cfg.keys))
            op = self.history.invoke(process, "subscribe", keys)
            try:
                await client.subscribe(keys)
            except Exception as e:
                self.history.complete(op, "fail", keys, error=_err(e))
            else:
                self.history.complete(op, "ok", keys)
        else:
            await self._assign(client, process, rng)
        return client

    async def _assign(self, client, process: int, rng: random.Random) -> None:
        keys = sorted(rng.sample(range(self.cfg.keys), rng.randint(1, self.cfg.keys)))
        op = self.history.invoke(process, "assign", keys)
        try:
            await asyncio.wait_for(client.assign(keys), self.cfg.request_timeout + 2)
        except Exception as e:
            self.history.complete(op, "fail", keys, error=_err(e))
        else:
            self.history.complete(op, "ok", keys)

    def _record_rebalances(self, client, process: int) -> None:
        for kind, keys in client.rebalances():
            op = self.history.invoke(process, "assign", keys)
            self.history.complete(op, "ok", keys)
            if kind == "assign":
                self.counts["rebalances"] += 1

    def _mops(self, rng: random.Random) -> list[list]:
        mops = []
        for _ in range(rng.randint(1, self.opts.max_txn_len)):
            if rng.random() < self.cfg.send_fraction:
                mops.append(["send", rng.randrange(self.cfg.keys), next(self._values)])
            else:
                mops.append(["poll"])
        return mops

    async def _txn(self, client, process: int, rng: random.Random) -> bool:
        """One transaction; -> whether the process goes on. While it runs, the keys it sends
        to count as in flight (`in_flight`: the targeted nemesis's leader-in-flight moment)."""
        mops = self._mops(rng)
        abort = rng.random() < self.opts.abort_p
        op = self.history.invoke(process, "txn", mops)
        keys = sorted({m[1] for m in mops if m[0] == "send"})
        for key in keys:   # in flight until the txn ends: its sends, its commit and the markers it waits for
            self.in_flight[key] = self.in_flight.get(key, 0) + 1
        tid = self.transactional_id(process)
        self.txn_in_flight[tid] = self.txn_in_flight.get(tid, 0) + 1
        try:
            return (await self._end_txn(client, op, mops, abort))[1]
        finally:
            for key in keys:
                self.in_flight[key] -= 1
            self.txn_in_flight[tid] -= 1

    async def _end_txn(self, client, op: dict, mops: list[list], abort: bool,
                       abort_after: float | None = None) -> tuple[dict, bool]:
        """Run the transaction and record its completion -> (the completion, whether the process goes on)."""
        client.transaction_producer = None   # set by the client from this transaction's answer
        try:
            run = client.txn(mops, abort, abort_after) if abort_after else client.txn(mops, abort)
            done = await asyncio.wait_for(run, 3 * self.cfg.request_timeout + 5 + (abort_after or 0))
        except asyncio.CancelledError:
            self.history.complete(op, "info", mops, error="cancelled", producer=_producer(client))
            raise
        except DefiniteError as e:   # aborted: nothing of it is visible
            out = self.history.complete(op, "fail", getattr(e, "completed", None) or mops, error=_err(e),
                                        producer=_producer(client))
            self.counts["aborted"] += 1
            return out, not isinstance(e, Fenced)
        except Exception as e:       # the commit's outcome is unknown
            out = self.history.complete(op, "info", getattr(e, "completed", None) or mops, error=_err(e),
                                        producer=_producer(client))
            self.counts["indefinite"] += 1
            return out, False
        out = self.history.complete(op, "ok", done, producer=_producer(client))
        self.counts["committed"] += 1
        return out, True

    async def _send(self, client, process: int, key: int) -> bool:
        value = next(self._values)
        op = self.history.invoke(process, "send", [key, value])
        try:
            offset = await asyncio.wait_for(client.send(key, value), self.cfg.request_timeout + 2)
        except asyncio.CancelledError:
            self.history.complete(op, "info", [key, value], error="cancelled")
            raise
        except DefiniteError as e:
            self.history.complete(op, "fail", [key, value], error=_err(e))
            return not isinstance(e, Fenced)
        except Exception as e:
            self.history.complete(op, "info", [key, value], error=_err(e))
            return False
        self.history.complete(op, "ok", [key, [offset, value]])
        return True

    async def _poll(self, client, process: int) -> bool:
        op = self.history.invoke(process, "poll", None)
        try:
            polled = await asyncio.wait_for(client.poll(), self.cfg.request_timeout + 2)
        except asyncio.CancelledError:
            self.history.complete(op, "fail", None, error="cancelled")
            raise
        except Exception as e:   # reads change nothing
            self.history.complete(op, "fail", None, error=_err(e))
            return not isinstance(e, Fenced)
        self.history.complete(op, "ok", {str(k): [[o, v] for o, v in recs] for k, recs in sorted(polled.items())})
        return True

    # -- scripted writes -----------------------------------------------------------
    async def write(self, key: int, count: int, acks: str, expect: str = "ok", step: int | None = None,
                    via: str | None = None) -> list[dict]:
        raise StepError("the queue workload has no scripted writes; scenarios run with --workload log")

    async def write_parallel(self, key: int, count: int, acks: str, step: int | None = None) -> list[dict]:
        raise StepError("the queue workload has no scripted writes; scenarios run with --workload log")

    async def txn(self, key: int, count: int, expect: str = "ok", step: int | None = None,
                  coordinator_not: str | None = None, abort_after: float | None = None,
                  background: bool = False, coordinator: str | None = None) -> dict:
        """One transaction of the scenario's writer (a `txn` step): begin, `count` sends to key,
        commit, recorded as the random clients' `txn` op (same outcomes, same retirement: after
        an `info` or a fenced producer the next step's transaction is a new process's, with a new
        transactional id). `coordinator_not` (a node): the writer's transactional id is one whose
        transaction coordinator is another node (DB.transaction_coordinator), chosen when the
        writer is made. expect "ok": a transaction that did not commit raises StepError.
        `abort_after` (s): the writer aborts when a send is not acknowledged in that time.
        `background`: started and not waited for (the step returns at once, with the writer);
        the writer's next transaction, and close(), wait for it first."""
        await self.txn_settled()
        if coordinator_not is not None:
            self._txn_avoid = ("not", coordinator_not)   # for this writer and its successors
        if coordinator is not None:
            self._txn_avoid = ("is", coordinator)
        if self._txn_writer is None:
            await self._new_txn_writer(self._txn_avoid)
        client, info = self._txn_writer, self._txn_writer_info
        process = info["process"]
        mops = [["send", key, next(self._values)] for _ in range(count)]
        op = self.history.invoke(process, "txn", mops)
        self.in_flight[key] = self.in_flight.get(key, 0) + 1

        async def run() -> dict:
            try:
                done, goes_on = await self._end_txn(client, op, mops, abort=False, abort_after=abort_after)
            finally:
                self.in_flight[key] -= 1
            if not goes_on:   # Jepsen's rule: a process whose outcome is unknown or fenced is not reused
                await client.close()
                if self._txn_writer is client:
                    self._txn_writer = None
            return {"process": process, "transactional_id": info["transactional_id"], "type": done["type"],
                    "value": done["value"], **{k: done[k] for k in ("error", "producer") if k in done}}

        if background:
            self._txn_background = asyncio.ensure_future(run())
            self.log(f"txn of process {process} started in the background: {mops}")
            return {"txn": {"process": process, "transactional_id": info["transactional_id"], "background": True,
                            "value": mops}, "writer": dict(info)}
        record = await run()
        if expect == "ok" and record["type"] != "ok":
            raise StepError(f"transaction {record['type']}: {record.get('error') or 'not committed'}")
        return {"txn": record, "writer": dict(info)}

    async def txn_settled(self) -> None:
        """Wait for the writer's background transaction, if one is open (its outcome is in the
        history; how it ended does not stop the scenario: a background txn expects any)."""
        task, self._txn_background = self._txn_background, None
        if task is not None:
            try:
                record = await task
                self.log(f"background txn of process {record['process']}: {record['type']}"
                         f"{': ' + record['error'] if record.get('error') else ''}")
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - recorded by _end_txn; nothing to add
                self.log(f"background txn: {type(e).__name__}: {e}")

    async def _new_txn_writer(self, rule: tuple[str, str] | None) -> None:
        process = self.new_process()
        tid, why = self.transactional_id(process), {}
        if rule is not None:
            tid, why = await self._transactional_id_with(process, *rule)
        self._txn_writer = self.queue_client(process, tid)
        self._txn_writer_info = {"process": process, "transactional_id": tid, **why}

    async def _transactional_id_with(self, process: int, how: str, node: str, tries: int = 64) -> tuple[str, dict]:
        """A transactional id of this process whose coordinator is not `node` (how "not") or is
        `node` (how "is")."""
        word = "coordinator_not" if how == "not" else "coordinator"
        look = getattr(self.db, "transaction_coordinator", None)
        if look is None:
            raise StepError(f"{word}: this system does not name a transaction's coordinator; leave it out")
        seen = {}
        for i in range(tries):
            tid = f"{self.transactional_id(process)}-{i}"
            coordinator, why = await look(tid)
            if coordinator is not None and (coordinator != node if how == "not" else coordinator == node):
                return tid, why
            seen = why
        raise StepError(f"{word} {node}: {tries} transactional ids all had "
                        f"{'it' if how == 'not' else 'another node'} or no node as their coordinator (last: {seen})")

    async def close(self) -> None:
        await self.txn_settled()
        if self._txn_writer is not None:
            await self._txn_writer.close()
            self._txn_writer = None
        await super().close()

    # -- final phase ---------------------------------------------------------------
    async def final_reads(self, recovery_timeout: float) -> dict:
        """Every key read from 0 to its end with a read_committed consumer, once no
        transaction is open on it (see the module docstring)."""
        await self.txn_settled()   # a scenario's background transaction ends first (the faults are healed)
        client = self.client()
        process = self.new_process()
        reader = self.queue_client(process)
        try:
            healthy = await self.wait_healthy(client, recovery_timeout, full_isr=True)
            if not healthy:
                self.log("final: not every key has a leader and full in-sync replicas; reading anyway")
                await self.wait_healthy(client, recovery_timeout / 2, full_isr=False)
            deadline = time.monotonic() + recovery_timeout
            stable = {k: False for k in range(self.cfg.keys)}
            while not all(stable.values()) and time.monotonic() < deadline:
                for key in stable:
                    stable[key] = stable[key] or await reader.stable(key)
                if not all(stable.values()):
                    await asyncio.sleep(0.5)
            keys = {}
            for key in range(self.cfg.keys):
                done, pos = await self._read_committed(reader, process, key, time.monotonic() + recovery_timeout)
                why = "no open transaction" if stable[key] else "a transaction stayed open (last stable offset " \
                                                                 "below the high watermark)"
                keys[str(key)] = {"complete": done and stable[key], "read_to": pos,
                                  "why": why if done else f"{why}; reads did not reach the end"}
            final = {"healthy": healthy, "complete": all(k["complete"] for k in keys.values()), "keys": keys,
                     "counts": dict(self.counts)}
            info = getattr(self.db, "client_info", None)
            if info is not None:   # the client library and what it negotiated (harness.sut)
                final["client"] = info()
            return final
        finally:
            await reader.close()
            await client.close()

    async def _read_committed(self, reader, process: int, key: int, deadline: float) -> tuple[bool, int]:
        pos = 0
        while time.monotonic() < deadline:
            op = self.history.invoke(process, "poll", None)
            try:
                recs, end = await asyncio.wait_for(reader.committed_reads(key, pos), self.cfg.request_timeout + 3)
            except Exception as e:
                self.history.complete(op, "fail", None, error=_err(e))
                await asyncio.sleep(0.5)
                continue
            self.history.complete(op, "ok", {str(key): [[o, v] for o, v in recs]})
            if recs:
                pos = recs[-1][0] + 1
            if end:
                return True, pos
        return False, pos


def _producer(client):
    """The txn's producer id and epoch, where the client library says them (QueueClient, harness.sut)."""
    return getattr(client, "transaction_producer", None)


def make(spec, db, history, log=lambda m: None) -> QueueWorkload:
    cfg = WorkloadConfig.from_spec(spec, acks="all")   # transactions need acks=all
    return QueueWorkload(cfg, QueueOptions.model_validate(getattr(spec, "workload_options", None) or {}),
                         db, history, log=log)


def _declare():
    from workloads import Workload

    return Workload("queue", "Jepsen's queue test: transactions of sends and polls, consumer groups "
                             "(txn, consumer=subscribe|assign, abort_p, max_txn_len)", make,
                    needs=frozenset({TRANSACTIONS}), options=QueueOptions, not_checked=NOT_CHECKED,
                    checkers=("txn", "log", "replica-diff", "linearizability"))


NOT_CHECKED = {
    "replica-diff": "a transactional log holds aborted records and commit markers that no op of the history "
                    "acknowledges or reads, which this checker takes for missing committed records",
    "linearizability": "a txn op sends and polls several keys as one atomic unit; this checker models single "
                       "appends and reads (the log checker reads the flattened view, the txn checker the units)",
}


WORKLOAD = _declare()
