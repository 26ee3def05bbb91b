"""The broker core's next wake-up (kept in a heap of parked deadlines) equals the
minimum over every live deadline, as the plain scan it replaced computed it,
whatever order parked produces and fetches are completed, timed out or dropped in."""

from hypothesis import given, settings, strategies as st

from replica import config as cfg
from replica import protocol as P
from replica.core.broker import BrokerCore
import pytest

pytestmark = pytest.mark.unit

PART = {"topic": "log", "partition": 0}


def scanned_wake(core: BrokerCore):
    """The reference: every deadline the core may have to act on, scanned."""
    times = list(core._periodic.values())
    times.extend(p.deadline for p in core._pending.values())
    for table in (core._produces, core._fetches):
        for parked in table.values():
            times.extend(x.deadline for x in parked)
    for p in core.partitions.values():
        times.extend(t for t in (p.retry_at, p.pending_isr_retry_at) if t is not None)
    return min(times) if times else None


def leader_core():
    core = BrokerCore(1, "epoch", cfg.build("epoch", {"min.insync.replicas": 1}))
    core.start(0, {})
    update = dict(PART, leader=1, leader_epoch=2, isr=[1, 2], replicas=[1, 2], version=5, config={})
    core.on_request("ctl", {"api": P.LEADER_AND_ISR, "corr": 1, "seq": 1, "brokers": {},
                            "partitions": [update]}, 1)
    return core


steps = st.lists(st.one_of(
    st.tuples(st.just("produce"), st.integers(0, 3), st.integers(1, 20_000)),
    st.tuples(st.just("consume"), st.integers(0, 3), st.integers(1, 20_000)),
    st.tuples(st.just("follow"), st.integers(0, 3), st.integers(0, 1)),
    st.tuples(st.just("close"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("wait"), st.integers(0, 15_000), st.just(0)),
), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_next_wake_is_the_minimum_live_deadline(plan):
    core = leader_core()
    now, corr = 2, 10
    for kind, a, b in plan:
        corr += 1
        conn = f"c{a}"
        if kind == "produce":
            core.on_request(conn, dict(PART, api=P.PRODUCE, corr=corr, values=[corr], acks="all",
                                       timeout_ms=b), now)
        elif kind == "consume":
            p = core.partitions[("log", 0)]
            core.on_request(conn, dict(PART, api=P.FETCH, corr=corr, offset=p.hw, replica_id=-1,
                                       max_wait_ms=b), now)
        elif kind == "follow":            # follower 2 fetches from its LEO (all, or all but one record)
            p = core.partitions[("log", 0)]
            offset = max(p.hw, p.leo - b)
            core.on_request("f2", dict(PART, api=P.FETCH, corr=corr, offset=offset, replica_id=2,
                                       max_wait_ms=a * 100, current_leader_epoch=2), now)
        elif kind == "close":
            core.on_connection_closed(conn, now)
        else:
            now += a
            core.on_timer(now)
        assert core._timer_at == scanned_wake(core), (kind, a, b)
    # Every parked request still has its entry in the heap.
    live = {id(x) for t in (core._produces, core._fetches) for parked in t.values() for x in parked}
    assert live <= {id(x) for _, _, x in core._deadlines if not x.done}
