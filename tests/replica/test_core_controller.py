"""The controller core driven directly: registration, sessions, election order,
unclean election, the conditional AlterIsr and topic creation."""

from replica import config as cfg
from replica import protocol as P
from replica.core import actions as A
from replica.core.controller import ControllerCore
import pytest

pytestmark = pytest.mark.unit


def replies(actions):
    return [a.message for a in actions if isinstance(a, A.Reply)]


def cluster(**overrides):
    c = ControllerCore("epoch", cfg.build("epoch", overrides))
    c.start(0)
    epochs = {}
    for b in (1, 2, 3):
        epochs[b] = replies(c.on_request(b, {"api": P.REGISTER, "corr": 1, "broker": b, "host": "h",
                                             "port": b}, 0))[0]["broker_epoch"]
    answer = replies(c.on_request("cl", {"api": P.CREATE_TOPIC, "corr": 2, "topic": "log", "partitions": 2,
                                         "replication_factor": 3}, 0))[0]
    assert answer["error"] is None
    return c, epochs


def beat(c, epochs, brokers, now):
    for b in brokers:
        assert replies(c.on_request(b, {"api": P.HEARTBEAT, "corr": 3, "broker": b,
                                        "broker_epoch": epochs[b]}, now))[0]["error"] is None


def state(c, p=0):
    s = c.partition_state("log", p)
    return s["leader"], s["leader_epoch"], s["isr"]


def test_round_robin_assignment():
    c, _ = cluster()
    assert c.partition_state("log", 0)["replicas"] == [1, 2, 3]
    assert c.partition_state("log", 1)["replicas"] == [2, 3, 1]
    assert state(c) == (1, 0, [1, 2, 3])


def test_election_order_and_last_isr_member_stays():
    c, epochs = cluster()
    session = c.config["broker.session.timeout.ms"]
    beat(c, epochs, [2, 3], session - 1)
    c.on_timer(session)                                   # 1 expires
    assert state(c) == (2, 1, [2, 3])
    beat(c, epochs, [2], 2 * session - 2)
    c.on_timer(2 * session - 1)                           # 3 expires
    assert state(c) == (2, 1, [2])
    c.on_timer(3 * session)                               # 2 expires: no live ISR member
    assert state(c) == (None, 2, [2])
    c.on_request(1, {"api": P.REGISTER, "corr": 4, "broker": 1, "host": "h", "port": 1}, 3 * session)
    assert state(c) == (None, 2, [2])                     # 1 is not in the ISR: no clean leader
    c.on_request(2, {"api": P.REGISTER, "corr": 5, "broker": 2, "host": "h", "port": 2}, 3 * session)
    assert state(c) == (2, 3, [2])


def test_unclean_election_when_enabled():
    c, epochs = cluster(**{"unclean.leader.election.enable": True})
    session = c.config["broker.session.timeout.ms"]
    beat(c, epochs, [1], session - 1)
    c.on_timer(session)                                   # 2 and 3 expire
    assert state(c) == (1, 0, [1])
    c.on_timer(3 * session)
    assert state(c) == (None, 1, [1])
    c.on_request(3, {"api": P.REGISTER, "corr": 4, "broker": 3, "host": "h", "port": 3}, 3 * session)
    assert state(c) == (3, 2, [3])


def test_alter_isr_is_a_conditional_update():
    c, epochs = cluster()
    base = {"api": P.ALTER_ISR, "corr": 9, "broker": 1, "broker_epoch": epochs[1], "topic": "log",
            "partition": 0, "leader_epoch": 0}
    bad = replies(c.on_request(1, dict(base, isr=[1, 2], version=7), 1))[0]
    assert bad["error"] == P.INVALID_UPDATE_VERSION and bad["version"] == 0 and bad["isr"] == [1, 2, 3]
    ok = replies(c.on_request(1, dict(base, isr=[1, 2], version=0), 1))[0]
    assert ok["error"] is None and ok["version"] == 1 and state(c) == (1, 0, [1, 2])
    assert replies(c.on_request(2, dict(base, broker=2, broker_epoch=epochs[2], isr=[2], version=1),
                                1))[0]["error"] == P.NOT_LEADER_OR_FOLLOWER
    assert replies(c.on_request(1, dict(base, leader_epoch=5, isr=[1], version=1), 1))[0]["error"] == \
        P.FENCED_LEADER_EPOCH
    beat(c, epochs, [1, 2], c.config["broker.session.timeout.ms"] - 1)
    c.on_timer(c.config["broker.session.timeout.ms"])     # 3 dies
    assert replies(c.on_request(1, dict(base, isr=[1, 2, 3], version=1), 10000))[0]["error"] == \
        P.INELIGIBLE_REPLICA


def test_heartbeat_of_an_expired_session_is_refused_and_unacked_pushes_are_resent():
    c, epochs = cluster()
    answer = replies(c.on_request(1, {"api": P.HEARTBEAT, "corr": 1, "broker": 1,
                                      "broker_epoch": epochs[1], "seq": 0}, 5))[0]
    assert answer["error"] is None and answer["sync"]["partitions"]
    acked = c.brokers[1]["sent"]
    answer = replies(c.on_request(1, {"api": P.HEARTBEAT, "corr": 1, "broker": 1,
                                      "broker_epoch": epochs[1], "seq": acked}, 6))[0]
    assert answer["sync"] is None
    assert replies(c.on_request(1, {"api": P.HEARTBEAT, "corr": 1, "broker": 1, "broker_epoch": 999},
                                7))[0]["error"] == P.STALE_BROKER_EPOCH


def test_create_topic_errors():
    c, _ = cluster()
    assert replies(c.on_request("cl", {"api": P.CREATE_TOPIC, "corr": 1, "topic": "log", "partitions": 1,
                                       "replication_factor": 1}, 1))[0]["error"] == P.TOPIC_ALREADY_EXISTS
    assert replies(c.on_request("cl", {"api": P.CREATE_TOPIC, "corr": 1, "topic": "t", "partitions": 1,
                                       "replication_factor": 4}, 1))[0]["error"] == P.INVALID_REPLICATION_FACTOR
    assert replies(c.on_request("cl", {"api": P.CREATE_TOPIC, "corr": 1, "topic": "t", "partitions": 1,
                                       "replication_factor": 1, "config": {"x": 1}}, 1))[0]["error"] == \
        P.INVALID_REQUEST


@pytest.mark.parametrize("era, refused", [("hw", False), ("kip101", False), ("epoch", True)])
def test_a_late_isr_expansion_naming_an_earlier_incarnation(era, refused):
    """KAFKA-14139 / KIP-903: leader 1 asks to add 2 as its fetches showed it (broker epoch
    e); 2 registers again (a replaced disk) before the request lands. The epoch era's rule
    isr_broker_epochs refuses the stale incarnation; the older eras put it in the ISR."""
    c = ControllerCore(era, cfg.build(era, {}))
    c.start(0)
    epochs = {b: replies(c.on_request(b, {"api": P.REGISTER, "corr": 1, "broker": b, "host": "h", "port": b},
                                      0))[0]["broker_epoch"] for b in (1, 2)}
    c.on_request("cl", {"api": P.CREATE_TOPIC, "corr": 2, "topic": "log", "partitions": 1,
                        "replication_factor": 2}, 0)
    shrink = {"api": P.ALTER_ISR, "corr": 3, "broker": 1, "broker_epoch": epochs[1], "topic": "log",
              "partition": 0, "leader_epoch": 0, "isr": [1], "version": 0}
    assert replies(c.on_request(1, shrink, 10))[0]["error"] is None
    old_epoch_of_2 = epochs[2]
    again = replies(c.on_request(2, {"api": P.REGISTER, "corr": 4, "broker": 2, "host": "h", "port": 2}, 20))
    assert again[0]["broker_epoch"] != old_epoch_of_2
    version = c.partition_state("log", 0)["version"]
    expand = dict(shrink, corr=5, isr=[1, 2], version=version, broker_epochs={"2": old_epoch_of_2})
    answer = replies(c.on_request(1, expand, 30))[0]
    assert answer["error"] == (P.INELIGIBLE_REPLICA if refused else None)
    assert c.partition_state("log", 0)["isr"] == ([1] if refused else [1, 2])
    current = dict(expand, corr=6, version=c.partition_state("log", 0)["version"],
                   broker_epochs={"2": again[0]["broker_epoch"]})
    if refused:   # the same expansion about the incarnation that registered last is accepted
        assert replies(c.on_request(1, current, 40))[0]["error"] is None
        assert c.partition_state("log", 0)["isr"] == [1, 2]


def test_a_reassignment_adds_first_and_completes_when_the_target_is_in_sync():
    """KIP-455's order: the new replica joins the assignment at once; the assignment becomes
    the target only once the target's replicas are all in the ISR; a leader outside the
    target hands over to the first target replica in the ISR."""
    c, epochs = cluster()
    epoch4 = replies(c.on_request(4, {"api": P.REGISTER, "corr": 1, "broker": 4, "host": "h", "port": 4},
                                  0))[0]["broker_epoch"]
    move = {"api": P.ALTER_REASSIGNMENT, "corr": 7, "topic": "log", "partition": 0, "replicas": [2, 3, 4]}
    answer = replies(c.on_request("cl", move, 10))[0]
    assert answer["error"] is None and answer["replicas"] == [1, 2, 3, 4] and answer["target"] == [2, 3, 4]
    assert state(c) == (1, 0, [1, 2, 3])                   # leader 1 still leads while 4 catches up
    s = c.partition_state("log", 0)
    expand = {"api": P.ALTER_ISR, "corr": 8, "broker": 1, "broker_epoch": epochs[1], "topic": "log",
              "partition": 0, "leader_epoch": 0, "isr": [1, 2, 3, 4], "version": s["version"],
              "broker_epochs": {"4": epoch4}}
    assert replies(c.on_request(1, expand, 20))[0]["error"] is None
    s = c.partition_state("log", 0)
    assert s["replicas"] == [2, 3, 4] and s["leader"] == 2 and s["isr"] == [2, 3, 4] and "target" not in s
    bad = dict(move, corr=9, replicas=[2, 2])
    assert replies(c.on_request("cl", bad, 30))[0]["error"] == P.INVALID_REQUEST
