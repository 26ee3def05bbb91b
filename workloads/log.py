"""The `log` workload, after Jepsen's Kafka workload, over any system's
`harness.sut.LogClient`.

K keys, C client processes, a send/poll mix at a target rate over all of them
(each free client takes the next time of one schedule: workloads/pacing.py). Every op is an
invoke and a completion in the history: `ok`; `fail` only when the write
definitely did not happen (DefiniteError); `info` when it may have
(IndefiniteError, timeouts, anything unexpected). A process that got `info`
is never reused: the client continues as a new process number (Jepsen's
rule). Sends carry unique integers.

Scripted writes (scenario `write` steps) go through `write()`, the same
send and the same history records. The final phase (after the nemesis healed
everything) waits until every key has a leader and a full set of in-sync
replicas and its end offset has settled, then polls every key to its end;
offsets the system no longer serves (a remote segment the store lost) are
read past and listed per key as `unreadable`.
A key whose log the system says does not exist (AbsentError), on every probe
for ABSENT_STABLE seconds while every other key is healthy, is settled as
gone at once (no waiting out the recovery timeout): its final poll is
recorded `ok` with no records and `"absent": {key: the system's answer}`,
and the checkers count every acknowledged send to it as lost
(the `absent` column of the flat end rows, checkers/log_anomalies.py).
"""
from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field

from harness.steps import StepError
from harness.sut import AbsentError, ClientError, DefiniteError
from workloads.pacing import Pacer

ABSENT_STABLE = 2.0  # s: a key's log must stay absent this long, on every probe, before it counts as gone
STUCK_S = 10.0       # s: a final read stuck at one offset below the key's end this long looks past it


@dataclass
class WorkloadConfig:
    keys: int = 3
    concurrency: int = 10
    rate: float = 100.0
    send_fraction: float = 0.5
    acks: str = "all"
    replication_factor: int = 3
    topic_config: dict = field(default_factory=dict)  # the system's settings; its client picks what it needs
    request_timeout: float = 5.0
    seed: int = 0

    @classmethod
    def from_spec(cls, spec, acks: str | None = None) -> "WorkloadConfig":
        """The run's spec (TestSpec) as a workload's settings; `acks` overrides the spec's."""
        return cls(keys=spec.keys, concurrency=spec.concurrency, rate=spec.rate,
                   send_fraction=spec.send_fraction, acks=acks or spec.acks,
                   replication_factor=spec.replication_factor, topic_config=dict(spec.settings),
                   seed=spec.seed, request_timeout=spec.request_timeout)


def meta_views_line(views: dict[str, str | None]) -> str:
    """'; metadata leader as each node names it: n1 none, n2 n2, n3 no answer' ('' for no views)."""
    named = ", ".join(f"{n} {'no answer' if v is None else v or 'none'}" for n, v in views.items())
    return f"; metadata leader as each node names it: {named}" if named else ""


def _err(e: BaseException) -> str:
    if isinstance(e, ClientError):
        return str(e)[:200]
    return (type(e).__name__ + (f": {e}" if str(e) else ""))[:200]


class LogWorkload:
    def __init__(self, cfg: WorkloadConfig, db, history, log=lambda m: None):
        self.cfg = cfg
        self.db = db
        self.history = history
        self.log = log
        self.rng = random.Random(cfg.seed)
        self._values = itertools.count(1)
        self._next_process = cfg.concurrency  # 0..C-1 are the first processes
        self.writes: list[dict] = []  # scripted writes, for the scenario's findings
        self._writer = None
        self._writer_process = None
        self._writer_via = None  # the node the writer was told to connect through (write via:)
        self._bursts: list[asyncio.Task] = []  # parallel writes still in flight
        self.in_flight: dict[int, int] = {}  # key -> sends awaiting an answer (the targeted nemesis reads it)

    def client(self, prefer: str | None = None):
        return self.db.client(self.cfg.request_timeout, prefer)

    def new_process(self) -> int:
        p = self._next_process
        self._next_process += 1
        return p

    # -- setup -------------------------------------------------------------
    async def setup(self, timeout: float = 60.0) -> None:
        """Create the log (retrying until the system is up) and wait for every
        key to have a leader. A process that exited makes this fail at once."""
        client = self.client()
        deadline = time.monotonic() + timeout
        try:
            last = None
            while True:
                problem = await asyncio.to_thread(self.db.startup_problem)
                if problem:
                    raise RuntimeError(problem)
                try:
                    await client.create(self.cfg.keys, self.cfg.replication_factor, self.cfg.topic_config)
                    break
                except Exception as e:  # not up yet
                    last = e
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not create the log: {_err(last)}{await self._meta_views()}")
                await asyncio.sleep(0.5)
            await self.wait_healthy(client, deadline - time.monotonic(), full_isr=True)
        finally:
            await client.close()

    async def _meta_views(self) -> str:
        """For a set-up that timed out on a system with a metadata group (NATS): the leader
        each node names, so that a node left outside the group shows as the server's state,
        e.g. "; metadata leader as each node names it: n1 none, n2 n2, n3 n2"."""
        from harness.sut import META_GROUP, capabilities_of

        if not capabilities_of(self.db).has(META_GROUP):
            return ""
        try:   # each node's answer is bounded by the inspector's own timeout
            group = await self.db.inspector.meta_group(list(self.db.nodes))
        except Exception:  # noqa: BLE001 - a diagnosis only: the timeout is the error
            return ""
        return meta_views_line((group or {}).get("views") or {})

    async def wait_healthy(self, client, timeout: float, full_isr: bool, absent: dict | None = None) -> bool:
        """Every key has a leader (and, if asked, in-sync replicas == replicas).

        With `absent` (a dict, filled in): a key the authority does not list
        counts as settled once the system has answered that its log does not
        exist (AbsentError) on every probe for ABSENT_STABLE seconds while the
        authority answers; `absent` then maps it to that answer. Any other
        answer for it (a timeout, no leader, its log) starts the wait over."""
        deadline = time.monotonic() + timeout
        since: dict[int, float] = {}   # key -> first of an unbroken run of absent answers
        while True:
            try:
                try:
                    meta = await asyncio.wait_for(client.metadata(), self.cfg.request_timeout)
                except AbsentError:  # the authority answered: no key at all (e.g. the whole topic)
                    meta = {}
                listed = [k for k in range(self.cfg.keys) if k in meta]
                healthy = all(meta[k].leader is not None and (not full_isr or set(meta[k].isr) >= set(meta[k].replicas))
                              for k in listed)
                missing = [k for k in range(self.cfg.keys) if k not in meta]
                if healthy and not missing:
                    return True
                if healthy and absent is not None:
                    gone = {}
                    answers = await asyncio.gather(*(self._absent(client, key) for key in missing))
                    for key, why in zip(missing, answers):
                        if why is None:
                            since.pop(key, None)
                            continue
                        start = since.setdefault(key, time.monotonic())
                        if time.monotonic() - start >= ABSENT_STABLE:
                            gone[key] = why
                    if len(gone) == len(missing):
                        absent.update(gone)
                        for key, why in gone.items():
                            self.log(f"final: key {key} is gone: {why} (on every probe for {ABSENT_STABLE:g}s, "
                                     f"the other keys healthy)")
                        return True
                else:
                    since.clear()
            except Exception:
                since.clear()
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.25)

    async def _absent(self, client, key: int) -> str | None:
        """The system's answer if it says the key's log does not exist; None for any other answer."""
        try:
            await asyncio.wait_for(client.end_offset(key), self.cfg.request_timeout)
        except AbsentError as e:
            return _err(e)
        except Exception:
            return None
        return None

    async def _metadata(self) -> dict:
        """The authority's view of every key, through a client opened for the question."""
        client = self.client()
        try:
            return await client.metadata()
        finally:
            await client.close()

    async def leader_node(self) -> str | None:
        """The leader of a random key (for leader-targeted faults)."""
        leaders = [m.leader for _, m in sorted((await self._metadata()).items()) if m.leader is not None]
        return self.rng.choice(leaders) if leaders else None

    async def under_replicated(self) -> list[int]:
        """Keys whose ISR lacks one of their assigned replicas (or that have no leader): a
        fault that destroys a copy waits until there are none (nemesis.schedule)."""
        return sorted(k for k, m in (await self._metadata()).items()
                      if m.leader is None or (m.replicas and set(m.isr) != set(m.replicas)))

    # -- main phase --------------------------------------------------------
    async def run(self, deadline: float) -> None:
        """C clients taking invocation times from one schedule at the configured rate
        (workloads/pacing.py) until the deadline."""
        self.pacer = Pacer(self.cfg.rate, random.Random(self.rng.random()))
        async with asyncio.TaskGroup() as tg:
            for p in range(self.cfg.concurrency):
                tg.create_task(self._worker(p, deadline))

    async def _worker(self, process: int, deadline: float) -> None:
        rng = random.Random(self.rng.random())
        client = self.client()
        positions: dict[int, int] = {}
        try:
            while True:
                await self.pacer.wait()
                if time.monotonic() >= deadline:
                    return
                if rng.random() < self.cfg.send_fraction:
                    outcome = await self.send(client, process, rng.randrange(self.cfg.keys), self.cfg.acks)
                    ok = outcome["type"] != "info"
                else:
                    ok = await self._poll(client, process, rng, positions)
                if not ok:  # info: this process is done; continue as a new one
                    await client.close()
                    process, client, positions = self.new_process(), self.client(), {}
        finally:
            await client.close()

    async def send(self, client, process: int, key: int, acks: str) -> dict:
        """One send of a fresh value; -> {type, key, value, invoke, complete, offset | error}."""
        value = next(self._values)
        op = self.history.invoke(process, "send", [key, value])
        out = {"key": key, "value": value, "acks": acks, "invoke": op["index"]}
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        try:
            offset = await asyncio.wait_for(client.send(key, value, acks=acks), self.cfg.request_timeout + 2)
        except DefiniteError as e:
            done = self.history.complete(op, "fail", [key, value], error=_err(e))
            return {**out, "type": "fail", "error": _err(e), "complete": done["index"]}
        except asyncio.CancelledError:
            self.history.complete(op, "info", [key, value], error="cancelled")
            raise
        except Exception as e:  # IndefiniteError, timeouts, anything else: unknown
            done = self.history.complete(op, "info", [key, value], error=_err(e))
            return {**out, "type": "info", "error": _err(e), "complete": done["index"]}
        finally:
            self.in_flight[key] -= 1
        done = self.history.complete(op, "ok", [key, [offset, value]])
        return {**out, "type": "ok", "offset": offset, "complete": done["index"]}

    async def _poll(self, client, process: int, rng: random.Random, positions: dict[int, int]) -> bool:
        keys = sorted(rng.sample(range(self.cfg.keys), min(self.cfg.keys, rng.choice((1, 2)))))
        op = self.history.invoke(process, "poll", None)
        result: dict[str, list] = {}
        new_pos = dict(positions)
        try:
            for key in keys:
                recs = await asyncio.wait_for(client.poll(key, new_pos.get(key, 0), 200),
                                              self.cfg.request_timeout + 2)
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

    # -- scripted writes -----------------------------------------------------
    async def write(self, key: int, count: int, acks: str, expect: str = "ok", step: int | None = None,
                    via: str | None = None) -> list[dict]:
        """`count` sends to key from the scenario's writer process. With expect
        "ok", a definite failure is retried twice after a metadata refresh (e.g.
        a stale leader; every try is in the history) and a send that is still
        not acknowledged raises StepError (the scenario stops there, verdict unknown).
        `via` (a node): the writer reconnects through that node first; later
        writes without `via` keep that connection (while it lasts)."""
        if via is not None and via != self._writer_via and self._writer is not None:
            await self._writer.close()
            self._writer = None
        if self._writer is None:
            self._writer, self._writer_process = self.client(via), self.new_process()
            self._writer_via = via
        await self._refresh_writer()
        done = []
        for _ in range(count):
            done.append(await self._write_one(key, acks, expect, step))
        return done

    async def write_parallel(self, key: int, count: int, acks: str, step: int | None = None) -> list[dict]:
        """`count` sends to key at once, each from a process of its own, none retried,
        and not waited for: the step goes on at once (a burst as the simulator's
        explorer sends it). They complete in the background; the final phase waits."""
        if self._writer is None:
            self._writer, self._writer_process = self.client(), self.new_process()
        await self._refresh_writer()

        async def one() -> None:
            record = await self.send(self._writer, self.new_process(), key, acks)
            record["step"] = step
            self.writes.append(record)
        self._bursts += [asyncio.get_running_loop().create_task(one()) for _ in range(count)]
        await asyncio.sleep(0)          # every send is invoked before the next step
        return []

    async def _drain_bursts(self) -> None:
        bursts, self._bursts = self._bursts, []
        if bursts:
            await asyncio.gather(*bursts, return_exceptions=True)

    async def _refresh_writer(self) -> None:
        try:
            await asyncio.wait_for(self._writer.metadata(), 3.0)
        except Exception:
            pass

    async def _write_one(self, key: int, acks: str, expect: str, step: int | None) -> dict:
        for attempt in range(3):
            record = await self.send(self._writer, self._writer_process, key, acks)
            record["step"] = step
            self.writes.append(record)
            if record["type"] == "ok":
                return record
            if record["type"] == "info":  # indefinite: a new process continues (Jepsen's rule)
                self._writer_process = self.new_process()
                break
            if expect == "ok" and attempt < 2:
                await asyncio.sleep(0.3)
                await self._refresh_writer()
                continue
            break
        if expect == "ok":
            raise StepError(f"send of {record['value']} to key {key} (acks={acks}) was not acknowledged: "
                              f"{record['type']} {record.get('error', '')}".rstrip())
        return record

    async def close(self) -> None:
        await self._drain_bursts()
        if self._writer is not None:
            await self._writer.close()
            self._writer = None

    # -- final phase -------------------------------------------------------
    async def final_reads(self, recovery_timeout: float) -> dict:
        """Wait for recovery, then read every key from 0 to its settled end.

        A full ISR is not enough: a leader that just restarted exposes the HW
        it checkpointed until its followers fetch again (Kafka's behaviour), so
        reading to `end_offset` at once stops below records every replica
        holds. Each key's end is settled first (`_settle`); `keys` says how far
        each key was read and why its end was taken as final."""
        await self._drain_bursts()
        client = self.client()
        try:
            absent: dict[int, str] = {}
            healthy = await self.wait_healthy(client, recovery_timeout, full_isr=True, absent=absent)
            if not healthy:
                self.log("final: not every key has a leader and full in-sync replicas; reading anyway")
                await self.wait_healthy(client, recovery_timeout / 2, full_isr=False)
            deadline = time.monotonic() + recovery_timeout
            settled = await self._settle(client, deadline, skip=absent)
            process = self.new_process()
            keys = {}
            for key in range(self.cfg.keys):
                if key in absent and await self._read_absent(client, process, key, absent[key]):
                    keys[str(key)] = {"complete": True, "read_to": 0, "absent": absent[key],
                                      "why": f"the log is gone: {absent[key]}"}
                    continue
                ok, why = settled[key]
                holes: list = []
                done, pos = await self._read_key(client, process, key, deadline=time.monotonic() + recovery_timeout,
                                                 unreadable=holes)
                keys[str(key)] = {"complete": ok and done, "read_to": pos,
                                  "why": why if done else f"{why}; reads did not reach the end"}
                if holes:
                    keys[str(key)]["unreadable"] = holes
            out = {"healthy": healthy, "complete": all(k["complete"] for k in keys.values()), "keys": keys}
            if any("absent" in k for k in keys.values()):
                out["absent"] = {k: v["absent"] for k, v in keys.items() if "absent" in v}
            return out
        finally:
            await client.close()

    async def _read_absent(self, client, process: int, key: int, why: str) -> bool:
        """The final poll of a key found gone: recorded `ok` with no records and
        `"absent": {key: answer}` when the system still says so (True); any
        other answer (False) and the key is read like the others."""
        op = self.history.invoke(process, "poll", None)
        try:
            recs = await asyncio.wait_for(client.poll(key, 0, 1000), self.cfg.request_timeout + 2)
        except AbsentError as e:
            self.history.append(op["process"], "ok", "poll", {str(key): []}, absent={str(key): _err(e)})
            return True
        except Exception as e:
            self.history.complete(op, "fail", None, error=_err(e))
            return False
        self.history.complete(op, "ok", {str(key): [[o, v] for o, v in recs]})
        self.log(f"final: key {key} was gone ({why}) but its log is back")
        return False

    async def _settle(self, client, deadline: float, stable_for: float = 2.0,
                      skip=()) -> dict[int, tuple[bool, str]]:
        """Per key (complete?, why): with an Inspector, until the leader's HW
        equals its log end (every record it holds is exposed) and the client's
        end offset reached it; without one, until the end offset stayed the same
        for `stable_for` seconds (longer than a follower's fetch backoff)."""
        from harness.sut import INSPECT, capabilities_of

        inspector = self.db.inspector if capabilities_of(self.db).has(INSPECT) else None
        keys = [k for k in range(self.cfg.keys) if k not in skip]
        last: dict[int, tuple] = {k: (None, time.monotonic()) for k in keys}
        why: dict[int, str] = {k: "end offset never read" for k in keys}
        done: dict[int, tuple[bool, str]] = {}
        while True:
            states = None
            if inspector is not None:
                states = await asyncio.gather(*(inspector.state(n) for n in self.db.nodes))
            for key in keys:
                if key in done:
                    continue
                try:
                    end = await asyncio.wait_for(client.end_offset(key), self.cfg.request_timeout)
                except Exception as e:
                    why[key] = f"end offset: {_err(e)}"
                    continue
                leaders = [(n, s[key]) for n, s in zip(self.db.nodes, states or []) if s and key in s
                           and s[key].role == "leader" and s[key].hw is not None and s[key].leo is not None]
                if inspector is not None and leaders:
                    node, st = max(leaders, key=lambda x: x[1].epoch or 0)
                    if st.hw >= st.leo and end >= st.leo:
                        done[key] = (True, f"leader {node}: end {end} == hw == leo {st.leo}")
                    else:
                        why[key] = f"leader {node}: hw {st.hw} < leo {st.leo} (end {end})"
                    continue
                value, since = last[key]
                if end != value:
                    last[key] = (end, time.monotonic())
                elif time.monotonic() - since >= stable_for:
                    done[key] = (True, f"end {end} stable for {stable_for:g}s")
                why[key] = f"end {end} not yet stable"
            if len(done) == len(keys) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.25)
        for key in skip:
            done[key] = (True, "absent")
        for key in keys:
            if key not in done:
                done[key] = (False, f"not settled: {why[key]}")
                self.log(f"final: key {key} {done[key][1]}; reading anyway")
        return done

    async def _read_key(self, client, process: int, key: int, deadline: float,
                        unreadable: list | None = None) -> tuple[bool, int]:
        """(reached the end?, next offset to read). A read that makes no progress at
        one offset for STUCK_S while the key's end is beyond it looks for the next
        offset the system does serve (`_next_readable`): when there is one, the
        offsets between are unreadable (a lost remote segment, a hole) and are
        appended to `unreadable` as [first, last, the error]; the read goes on
        from there as a new process (the harness skipped, not a consumer), so the
        checkers see what was read after the hole."""
        pos, stuck_since, error = 0, None, "no records"
        while time.monotonic() < deadline:
            op = self.history.invoke(process, "poll", None)
            try:
                recs = await asyncio.wait_for(client.poll(key, pos, 1000), self.cfg.request_timeout + 2)
                end = await asyncio.wait_for(client.end_offset(key), self.cfg.request_timeout)
            except Exception as e:
                self.history.complete(op, "fail", None, error=_err(e))
                error = _err(e)
                recs, end = None, None
            else:
                self.history.complete(op, "ok", {str(key): [[o, v] for o, v in recs]})
                if recs:
                    pos, stuck_since = recs[-1][0] + 1, None
                    continue
                if pos >= end:
                    return True, pos
            now = time.monotonic()
            stuck_since = stuck_since if stuck_since is not None else now
            if unreadable is not None and now - stuck_since >= STUCK_S:
                found = await self._next_readable(client, key, pos, deadline)
                if found is not None:
                    unreadable.append([pos, found - 1, error])
                    self.log(f"final: key {key}: offsets {pos}..{found - 1} unreadable ({error}); "
                             f"reading on from {found}")
                    pos, stuck_since = found, None
                    process = self.new_process()   # the harness skipped, not a consumer: no poll-skip
                    continue
                stuck_since = now   # nothing later is served either: the system is down, wait on
            await asyncio.sleep(0.5)
        return False, pos

    async def _next_readable(self, client, key: int, pos: int, deadline: float) -> int | None:
        """The first offset above `pos`, below the key's end, that a poll returns records
        at (None: none). Probes pos+1, pos+2, pos+4, ... then bisects between the last
        that failed and the first that answered; every probe is a poll in the history."""
        async def readable(offset: int) -> bool:
            op = self.history.invoke(self.new_process(), "poll", None)   # a probe: its own process
            try:
                recs = await asyncio.wait_for(client.poll(key, offset, 1), self.cfg.request_timeout + 2)
            except Exception as e:
                self.history.complete(op, "fail", None, error=_err(e))
                return False
            self.history.complete(op, "ok", {str(key): [[o, v] for o, v in recs]})
            return bool(recs)

        try:
            end = await asyncio.wait_for(client.end_offset(key), self.cfg.request_timeout)
        except Exception:
            return None
        low, step, high = pos, 1, None          # low: unreadable; high: readable
        while pos + step < end and time.monotonic() < deadline:
            if await readable(pos + step):
                high = pos + step
                break
            low, step = pos + step, step * 2
        if high is None:
            return None
        while high - low > 1 and time.monotonic() < deadline:
            mid = (low + high) // 2
            if await readable(mid):
                high = mid
            else:
                low = mid
        return high


def make(spec, db, history, log=lambda m: None) -> LogWorkload:
    return LogWorkload(WorkloadConfig.from_spec(spec), db, history, log=log)


def _declare():
    from workloads import Workload

    return Workload("log", "sends of unique integers and polls over K keys (Jepsen's Kafka workload)", make)


WORKLOAD = _declare()
