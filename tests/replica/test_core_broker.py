"""The broker core driven directly (no simulator): roles, produce, fetch, fencing,
the conditional ISR update and robustness against malformed requests."""

from hypothesis import given, settings, strategies as st

from replica import config as cfg
from replica import protocol as P
from replica.core import actions as A
from replica.core.broker import BrokerCore
import pytest

pytestmark = pytest.mark.unit

PART = {"topic": "log", "partition": 0}


def replies(actions):
    return [a.message for a in actions if isinstance(a, A.Reply)]


def sends(actions, api=None):
    return [a.message for a in actions if isinstance(a, A.Send) and (api is None or a.message["api"] == api)]


def push(core, now, leader=1, epoch=2, isr=(1, 2, 3), version=5, seq=1):
    update = dict(PART, leader=leader, leader_epoch=epoch, isr=list(isr), replicas=[1, 2, 3],
                  version=version, config={})
    return core.on_request("ctl", {"api": P.LEADER_AND_ISR, "corr": 100 + seq, "seq": seq,
                                   "brokers": {}, "partitions": [update]}, now)


def leader_core(era="epoch", isr=(1, 2, 3), min_isr=1, **overrides):
    core = BrokerCore(1, era, cfg.build(era, dict({"min.insync.replicas": min_isr}, **overrides)))
    core.start(0, {})
    push(core, 1, isr=isr)
    return core


def produce(core, now, values, acks="all", corr=7):
    return core.on_request("c", dict(PART, api=P.PRODUCE, corr=corr, values=values, acks=acks), now)


def fetch(core, now, offset, replica_id, corr=8, **extra):
    return core.on_request("f", dict(PART, api=P.FETCH, corr=corr, offset=offset, replica_id=replica_id,
                                     **extra), now)


def test_start_registers_and_asks_for_a_timer():
    core = BrokerCore(1, "hw", cfg.defaults("hw"))
    actions = core.start(0, {})
    assert sends(actions, P.REGISTER)[0]["broker"] == 1
    assert any(isinstance(a, A.SetTimer) for a in actions)


def test_fetch_fencing_only_in_era_epoch():
    core = leader_core("epoch")
    assert replies(fetch(core, 2, 0, 2, current_leader_epoch=1))[0]["error"] == P.FENCED_LEADER_EPOCH
    assert replies(fetch(core, 2, 0, 2, current_leader_epoch=3))[0]["error"] == P.UNKNOWN_LEADER_EPOCH
    assert replies(fetch(core, 2, 0, 2, current_leader_epoch=2, max_wait_ms=0))[0]["error"] is None
    old = leader_core("kip101")
    assert replies(fetch(old, 2, 0, 2, current_leader_epoch=1))[0]["error"] is None


def test_epoch_era_leader_assigns_its_epoch_at_once_kip101_on_first_write():
    assert leader_core("epoch").partitions[("log", 0)].epoch_cache.entries == [(2, 0)]
    core = leader_core("kip101")
    assert core.partitions[("log", 0)].epoch_cache.entries == []
    actions = produce(core, 2, ["a"], acks=1)
    assert core.partitions[("log", 0)].epoch_cache.entries == [(2, 0)]
    assert any(isinstance(a, A.WriteEpochCheckpoint) for a in actions)


def test_not_enough_replicas_before_append():
    core = leader_core(isr=(1,), min_isr=2)
    assert replies(produce(core, 2, [1, 2]))[0]["error"] == P.NOT_ENOUGH_REPLICAS
    assert core.partitions[("log", 0)].leo == 0
    ok = replies(produce(core, 3, [1, 2], acks=1))[0]
    assert ok["error"] is None and (ok["offset"], ok["last_offset"]) == (0, 1)


def test_consumers_read_below_hw_followers_up_to_leo():
    core = leader_core(isr=(1, 2))
    produce(core, 2, ["a", "b", "c"], acks=1)
    assert replies(fetch(core, 3, 0, -1))[0]["records"] == []
    answer = replies(fetch(core, 4, 0, 2))[0]
    assert [r[3] for r in answer["records"]] == ["a", "b", "c"] and answer["hw"] == 0
    answer = replies(fetch(core, 5, 3, 2, max_wait_ms=500))
    assert answer == []                                   # parked: no new data
    assert core.partitions[("log", 0)].hw == 3
    assert [r[3] for r in replies(fetch(core, 6, 1, -1))[0]["records"]] == ["b", "c"]
    woke = replies(produce(core, 7, ["d"], acks=1, corr=9))
    assert [m["corr"] for m in woke] == [8, 9]             # the parked fetch answered at once
    assert replies(fetch(core, 8, 9, 2))[0]["error"] == P.OFFSET_OUT_OF_RANGE


def test_parked_fetch_times_out_after_wait_max():
    core = leader_core(isr=(1, 2))
    assert replies(fetch(core, 10, 0, 2, max_wait_ms=500)) == []
    assert replies(core.on_timer(509)) == []
    answer = replies(core.on_timer(510))
    assert answer and answer[0]["records"] == []


def test_hw_uses_the_larger_isr_until_the_controller_confirms_a_shrink():
    core = leader_core(isr=(1, 2, 3), min_isr=2, **{"replica.lag.time.max.ms": 1000})
    p = core.partitions[("log", 0)]
    produce(core, 2, ["a", "b"])
    fetch(core, 3, 2, 2)                                  # follower 2 caught up, 3 silent
    assert p.hw == 0
    actions = core.on_timer(1600)                          # isr-expiration: 3 is out of sync
    alter = sends(actions, P.ALTER_ISR)
    assert alter and alter[0]["isr"] == [1, 2] and alter[0]["version"] == 5
    assert p.hw == 0 and p.isr == [1, 2, 3]                # not applied before confirmation
    # The controller says the version moved on (it removed nobody): adopt its state.
    core.on_response("controller", {"corr": alter[0]["corr"], "error": P.INVALID_UPDATE_VERSION,
                                    "leader": 1, "leader_epoch": 2, "isr": [1, 2, 3], "version": 6}, 1700)
    assert p.hw == 0 and p.version == 6 and p.pending_isr is None
    alter = sends(core.on_timer(2100), P.ALTER_ISR)
    assert alter[0]["version"] == 6
    actions = core.on_response("controller", {"corr": alter[0]["corr"], "error": None, "leader": 1,
                                              "leader_epoch": 2, "isr": [1, 2], "version": 7}, 2200)
    assert p.isr == [1, 2] and p.hw == 2
    assert replies(actions)[0]["error"] is None            # the acks=all produce completes


def test_unanswered_alter_isr_is_retried_with_the_proposal_still_counted():
    core = leader_core(isr=(1, 2), **{"replica.lag.time.max.ms": 1000})
    p = core.partitions[("log", 0)]
    alter = sends(fetch(core, 2, 0, 3), P.ALTER_ISR)     # 3 caught up (LEO 0 >= HW 0): expand
    assert alter[0]["isr"] == [1, 2, 3] and p.pending_isr == [1, 2, 3]
    corr = max(core._pending)
    core.on_peer_failed("controller", 3)
    assert p.pending_isr == [1, 2, 3]
    retry = sends(core.on_timer(3 + 1000), P.ALTER_ISR)
    assert retry and retry[0]["isr"] == [1, 2, 3] and retry[0]["corr"] != corr


def test_becoming_follower_in_era_hw_truncates_to_hw():
    core = BrokerCore(2, "hw", cfg.defaults("hw"))
    core.start(0, {("log", 0): {"records": [(i, 0, P.record_crc(i), i) for i in range(5)], "hw": 3,
                                "epoch_cache": [], "log_start": 0}})
    actions = push(core, 1, leader=1, epoch=0)
    assert any(isinstance(a, A.Truncate) and a.offset == 3 for a in actions)
    assert core.partitions[("log", 0)].leo == 3
    assert sends(actions, P.FETCH)[0]["offset"] == 3


def test_epoch_follower_asks_for_its_latest_epoch():
    core = BrokerCore(2, "epoch", cfg.defaults("epoch"))
    core.start(0, {("log", 0): {"records": [(i, 0, P.record_crc(i), i) for i in range(5)], "hw": 3,
                                "epoch_cache": [(0, 0)], "log_start": 0}})
    request = sends(push(core, 1, leader=1, epoch=1), P.OFFSETS_FOR_LEADER_EPOCH)[0]
    assert (request["leader_epoch"], request["current_leader_epoch"]) == (0, 1)
    core.on_response(1, {"corr": request["corr"], "error": None, "leader_epoch": 0, "end_offset": 4}, 2)
    assert core.partitions[("log", 0)].leo == 4


def test_stale_leader_and_isr_is_ignored():
    core = leader_core()
    push(core, 5, leader=2, epoch=1, version=4, seq=2)
    assert core.partitions[("log", 0)].role == "leader"


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5),
                                                                                       inner, max_size=3),
                           max_leaves=8)
fields = st.sampled_from(["topic", "partition", "offset", "replica_id", "values", "value", "acks",
                          "max_records", "max_wait_ms", "current_leader_epoch", "leader_epoch", "spec",
                          "seq", "brokers", "partitions", "timeout_ms"])
apis = st.sampled_from(list(P.BROKER_APIS) + ["Nope"])


@settings(max_examples=150, deadline=None)
@given(api=apis, body=st.dictionaries(fields, json_values, max_size=6), era=st.sampled_from(P.ERAS))
def test_malformed_requests_get_an_answer_not_an_exception(api, body, era):
    core = leader_core(era)
    message = dict(body, api=api, corr=42)
    out = replies(core.on_request("x", message, 3))
    assert all(m["corr"] == 42 for m in out)
    if api == "Nope":
        assert out[0]["error"] == P.UNSUPPORTED_API
