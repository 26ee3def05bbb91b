"""The script format: the library validates, and every kind of bad script
gets one line naming the step and the problem."""
from __future__ import annotations

import textwrap

import pytest
import yaml

from scenarios import ScenarioError, list_scenarios, load_file, load_scenario
from scenarios.script import bound_ms, parse
from systems.replica import ERAS

pytestmark = pytest.mark.unit

TABLE = {  # DESIGN.md, scenario table: era -> declared verdict
    "hw-data-loss": {"hw": (False, ["lost-write"]), "kip101": (True, []), "epoch": (True, [])},
    "hw-divergence": {"hw": (False, ["divergence", "inconsistent-offsets"]), "kip101": (True, []),
                      "epoch": (True, [])},
    "epoch-truncation": {"epoch": (True, [])},
    "fast-failover": {"kip101": (False, ["divergence"]), "epoch": (True, [])},
    "isr-shrink-expand": {"hw": (True, []), "kip101": (True, []), "epoch": (True, [])},
    "power-coordinated": {"epoch": (False, ["lost-write", "lost-acknowledged"])},
    "power-coordinated-fsync": {"epoch": (True, [])},
    "power-one-at-a-time": {"epoch": (True, [])},
    "corrupt-bitflip": {"epoch": (True, [])},
    "corrupt-truncate": {"epoch": (True, [])},
    # the stream is gone after recovery: "stream not found" from a healthy cluster is a lost log (issue 28)
    "nats-power-coordinated": {"file": (False, ["lost-write"])},
    "nats-power-coordinated-data": {"file": (False, ["lost-write"])},
    "nats-power-coordinated-sync": {"file": (True, [])},          # 2.12.1, sync_interval: always
    "nats-power-coordinated-sync-names": {"file": (False, ["lost-write"])},  # ... but no directory fsync
    "nats-power-after-sync": {},
    "nats-crash-stream-deletion": {"file": (False, ["lost-write"])},   # 2.10.22
    "nats-crash-stream-deletion-fixed": {"file": (True, [])},          # 2.10.23
    # the tiered rows (KIP-405 seed scenarios 1-3; the skip-aux bug as the explorer emitted it)
    "tiered-fresh-follower": {"epoch": (True, [])},
    "tiered-out-of-sync-follower": {"epoch": (True, [])},
    "tiered-multiple-hard-failures": {"epoch": (True, [])},
    "tiered-skip-aux": {"epoch": (False, ["divergence"])},
    "tiered-skip-aux-fixed": {"epoch": (True, [])},
    # the hw data loss as `python -m replica.sim.explore --era hw --emit-scenario` wrote it
    "explored-hw-data-loss": {"hw": (False, ["lost-write"]), "epoch": (True, [])},
    # NATS JetStream (docs/systems/nats.md): storage variant -> declared verdict
    "nats-kill-all-replicas": {"file": (True, []), "memory": (False, ["lost-write", "inconsistent-offsets"])},
    "nats-leader-isolated": {"file": (True, []), "memory": (True, [])},
    "nats-follower-paused": {"file": (True, []), "memory": (True, [])},
    "nats-paused-leader-divergence": {"file": (False, ["divergence"])},
    # Apache Kafka (DESIGN.md, "The same story on real Kafka"): the scenario's own variants, or the version
    "kafka-last-replica-standing": {"elr-off": (False, ["lost-write", "lost-acknowledged"]), "elr-on": (True, [])},
    "kafka-unclean-election": {"unclean-on": (False, ["lost-write", "lost-acknowledged", "overwritten"]),
                               "unclean-off": (True, [])},
    "kafka-power-coordinated": {"no-fsync": (False, ["lost-write", "lost-acknowledged"]), "fsync": (True, [])},
    # librdkafka's uncounted re-send after NOT_LEADER_OR_FOLLOWER (docs/findings/kafka.md, "Client re-sends")
    "kafka-client-resend": {"non-idempotent": (False, ["duplicate"]), "idempotent": (True, [])},
    # KAFKA-14139, a replaced disk (issue 41): KIP-903's broker epochs in the epoch era only
    "replaced-disk": {"hw": (False, ["lost-write"]), "kip101": (False, ["lost-write"]), "epoch": (True, [])},
    "kafka-replaced-disk": {"2.8.2": (False, ["lost-write"]), "4.1.1": (True, [])},
    # the harness's own check: a fenced leader's stale metadata is not believed (issue 42)
    "kafka-stale-leader-view": {"4.1.1": (True, [])},
    "kafka-hw-data-loss": {**{v: (True, []) for v in ("0.11.0.3", "2.8.2", "4.0.1", "4.1.1", "4.2.1")},
                           "0.10.2.2": (False, ["lost-write"])},
    "kafka-hw-divergence": {**{v: (True, []) for v in ("0.11.0.3", "2.8.2", "4.0.1", "4.1.1", "4.2.1")},
                            "0.10.2.2": (False, ["divergence", "inconsistent-offsets"])},
    "kafka-fast-failover": {**{v: (True, []) for v in ("2.8.2", "4.0.1", "4.1.1", "4.2.1")},
                            "0.11.0.3": (False, ["divergence"])},
    # the simulator's schedule: its loss needs an instant re-registration real brokers refuse
    "kafka-explored-hw-data-loss": {v: (True, []) for v in ("0.10.2.2", "0.11.0.3", "4.1.1")},
    **{f"kafka-{name}": {"4.1.1": (True, []), "4.2.1": (True, [])}
       for name in ("tiered-fresh-follower", "tiered-out-of-sync-follower", "tiered-multiple-hard-failures")},
    # the remote-store fault (issue 27): the store loses a segment no replica holds locally
    "tiered-remote-segment-lost": {"epoch": (False, ["lost-write"])},
    "kafka-tiered-remote-segment-lost": {"4.1.1": (False, ["lost-write"]), "4.2.1": (False, ["lost-write"])},
    # issue 37: a late transactional produce taken for the next transaction's (docs/findings/kafka.md)
    "kafka-late-commit": {**{v: (True, []) for v in ("java-tv2", "librdkafka-tv1", "librdkafka-tv2", "librdkafka-3.9")},
                          **{v: (False, ["txn-lost-write"]) for v in ("java-tv1", "java-3.9")}},
}


def test_library_has_every_row_of_the_table_with_its_verdicts():
    assert set(list_scenarios()) == set(TABLE)
    for name, cells in TABLE.items():
        s = load_scenario(name)
        assert {era: (e.valid, e.anomalies) for era, e in s.expect.items()} == cells, name
        if s.system == "replica":  # DESIGN: divergence is never allowed in the epoch generation
            assert "divergence" not in s.allowed("epoch"), name


def test_epoch_truncation_declares_the_seed_truncation_points():
    s = load_scenario("epoch-truncation")
    assert [(t.node, t.to) for t in s.truncations["epoch"]] == [("B", 3), ("A", 3)]


def test_isr_bound_is_one_and_a_half_lag():
    s = load_scenario("isr-shrink-expand")
    wait = next(st for st in s.steps if st.action == "wait" and st.args.measure and st.args.measure.name == "shrink")
    assert bound_ms(wait.args.measure.max_ms, s.settings, "epoch") == 1.5 * s.settings["replica.lag.time.max.ms"]


def _script(steps: str, **top) -> dict:
    data = {"name": "t", "nodes": 2, "settings": {"min.insync.replicas": 1}, **top}
    data["steps"] = yaml.safe_load(textwrap.dedent(steps))
    return data


@pytest.mark.parametrize("steps,message", [
    ("- write: 2\n- crash: n1\n", "step 2: unknown step 'crash'"),
    ("- kill: n9\n", "step 1 (kill): unknown node 'n9'"),
    ("- kill: X\n", "step 1 (kill): unknown node 'X'"),
    ("- kill: leader of key 3\n", "step 1 (kill): key 3 does not exist"),
    ("- kill: follower 2 of key 0\n", "step 1 (kill): 'follower 2 of key 0': key has 1 followers"),
    ("- restart: [n1, the boss]\n", "step 1 (restart): bad node reference 'the boss'"),
    ("- wait: leader of key 0 is maybe\n", "step 1 (wait): unknown node 'maybe'"),
    ("- wait: the cluster is happy and calm\n", "step 1 (wait): cannot parse condition"),
    ("- wait: {until: leo of n1 on key 0 >= 3, timeout: -1}\n", "step 1 (wait): timeout:"),
    ("- write: {key: 0, acks: 2}\n", "step 1 (write): acks: got '2'"),
    ("- write: {key: 5}\n", "step 1 (write): key 5 does not exist"),
    ("- partition: {cut: [n1]}\n", "step 1 (partition): cut takes pairs"),
    ("- partition: {cut: [n1, B]}\n", "step 1 (partition): unknown node 'B'"),
    ("- sleep: forever\n", "step 1 (sleep): takes seconds"),
    ("- heal: now\n", "step 1 (heal): takes nothing (every cut) or the cuts to heal"),
    ("- {kill: n1, write: 1}\n", "step 1: needs exactly one action"),
    ("- {write: 1, as: A}\n", "step 1 (write): `as` names the node"),
    ("- wait: {until: n1 is up, measure: {name: m, since: cut}}\n", "step 1 (wait): measure.since 'cut'"),
])
def test_bad_steps_get_one_line_naming_the_step(steps, message):
    with pytest.raises(ScenarioError) as e:
        parse(_script(steps))
    text = str(e.value)
    assert "\n" not in text
    assert message in text, text


def test_a_host_one_variant_lacks_is_named_at_load_not_dropped_from_a_partition_at_run_time():
    """Kafka's ZooKeeper-era versions have the role host zk, 4.x has ctl: a cut naming ctl in a
    scenario that expects a verdict on 0.10.2.2 is refused when the script loads (it used to
    become an empty partition when the run reached it); a step limited to the variants that
    have the host passes."""
    steps = "- partition: {cut: [n1, ctl]}\n"
    with pytest.raises(ScenarioError) as e:
        parse(_script(steps, system="kafka", expect={"0.10.2.2": "valid", "4.1.1": "valid"}))
    assert "step 1 (partition) in variant 0.10.2.2: unknown node 'ctl': not a host (n1..n2, zk)" in str(e.value)
    assert parse(_script(steps, system="kafka", expect={"4.1.1": "valid"})).steps   # 4.x only: fine
    both = parse(_script("- partition: {cut: [n1, zk]}\n  variants: [0.10.2.2]\n"
                         "- partition: {cut: [n1, ctl]}\n  variants: [4.1.1]\n",
                         system="kafka", expect={"0.10.2.2": "valid", "4.1.1": "valid"}))
    assert [s.variants for s in both.steps] == [["0.10.2.2"], ["4.1.1"]]
    from scenarios.script import layout

    assert layout(both, variant="0.10.2.2").roles == {"zookeeper": "zk"}
    assert layout(both, variant="4.1.1").roles == {"controller": "ctl"}


def test_names_bound_by_as_or_bind_are_usable_later_but_not_earlier():
    ok = parse(_script("- kill: leader of key 0\n  as: B\n- bind: {A: a follower of key 0}\n"
                       "- wait: leader of key 0 is A\n- restart: B\n"))
    assert [s.action for s in ok.steps] == ["kill", "bind", "wait", "restart"]
    with pytest.raises(ScenarioError, match="step 1 \\(restart\\): unknown node 'B'"):
        parse(_script("- restart: B\n- kill: leader of key 0\n  as: B\n"))


def test_bad_top_level_fields_and_settings():
    with pytest.raises(ScenarioError, match="settings: unknown setting 'replica.lag'"):
        parse(_script("- write: 1\n", settings={"replica.lag": 5}))
    with pytest.raises(ScenarioError, match="expect.hw.anomalies: unknown anomaly 'lost'"):
        parse(_script("- write: 1\n", expect={"hw": "lost"}))
    with pytest.raises(ScenarioError, match="colour: unknown field"):
        parse(_script("- write: 1\n", colour="red"))
    with pytest.raises(ScenarioError, match="needs a non-empty list `steps:`"):
        parse({"name": "t", "steps": []})


def test_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps: [\n")
    with pytest.raises(ScenarioError, match="bad.yaml:.*malformed YAML"):
        load_file(bad)
    with pytest.raises(ScenarioError, match="no-such.yaml: No such file"):
        load_file(tmp_path / "no-such.yaml")
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'.*harness scenario --list"):
        load_scenario("nope")


def test_a_script_forbids_an_anomaly_in_a_variant_even_if_it_allows_it():
    """The replica's rule "no divergence in era epoch" is written in its scripts."""
    s = parse(_script("- write: 1\n", allowed_anomalies=["divergence", "lost-write"],
                      forbidden_anomalies={"epoch": ["divergence"]}))
    assert s.allowed("kip101") == ["divergence", "lost-write"]
    assert s.allowed("epoch") == ["lost-write"]
    with pytest.raises(ScenarioError, match="forbidden_anomalies.*kafka4"):
        parse(_script("- write: 1\n", forbidden_anomalies={"kafka4": ["divergence"]}))
    with pytest.raises(ScenarioError, match="forbidden_anomalies"):
        parse(_script("- write: 1\n", forbidden_anomalies={"epoch": ["lost-the-plot"]}))


def test_variants_or_their_alias_eras_limit_a_step_to_some_generations():
    s = parse(_script("- write: 1\n  variants: [hw, kip101]\n- write: 1\n  eras: epoch\n- write: 1\n"))
    assert [step.variants for step in s.steps] == [["hw", "kip101"], ["epoch"], None]
    with pytest.raises(ScenarioError, match="step 1: eras must list some of hw, kip101, epoch"):
        parse(_script("- write: 1\n  eras: [kafka4]\n"))
    with pytest.raises(ScenarioError, match="step 1: give `variants` or its alias `eras`, not both"):
        parse(_script("- write: 1\n  eras: [hw]\n  variants: [hw]\n"))


def test_a_condition_the_system_cannot_observe_is_refused_before_any_host():
    """NATS keeps no checkpointed high watermark: the script is refused at
    validation, one line naming the system and the capability."""
    script = {"name": "needs-checkpoints", "system": "nats", "nodes": 3, "keys": 1,
              "steps": [{"write": 1}, {"wait": "checkpointed hw of n1 on key 0 >= 1"}]}
    with pytest.raises(ScenarioError) as err:
        parse(script)
    msg = str(err.value)
    assert "\n" not in msg and "system 'nats' does not support 'checkpoints'" in msg and "step 2" in msg
    script["steps"][1] = {"wait": "leader of key 0 is n1"}   # what NATS can tell is accepted
    assert parse(script).system == "nats"


def test_a_system_package_may_hold_its_own_scenarios(tmp_path, monkeypatch):
    """systems/<name>/scenarios/*.yaml join the library, so a new system's scripts need
    no file outside its package; a name defined twice is one line."""
    from scenarios import script

    own = tmp_path / "somesys" / "scenarios"
    own.mkdir(parents=True)
    (own / "own-scenario.yaml").write_text(yaml.safe_dump(_script("- write: 1\n")))
    monkeypatch.setattr(script, "SYSTEMS_DIR", tmp_path)
    assert "own-scenario" in list_scenarios() and "hw-data-loss" in list_scenarios()
    assert load_scenario("own-scenario").steps[0].action == "write"
    (own / "hw-data-loss.yaml").write_text("name: x\n")
    with pytest.raises(ScenarioError, match="scenario 'hw-data-loss' is defined twice"):
        list_scenarios()


def test_nats_scenarios_pin_the_versions_they_are_about():
    assert load_scenario("nats-crash-stream-deletion").system_options == {"version": "2.10.22"}
    assert load_scenario("nats-crash-stream-deletion-fixed").system_options == {"version": "2.10.23"}
    for name in ("nats-power-coordinated-sync", "nats-power-coordinated-sync-names"):
        assert load_scenario(name).system_options == {"version": "2.12.1", "sync_interval": "always"}
    assert load_scenario("nats-power-coordinated").system_options == {}   # Debian's by default


def test_a_scenarios_system_options_then_the_variant_then_option_flags():
    from scenarios.program import scenario_spec

    sc = load_scenario("nats-crash-stream-deletion")
    assert scenario_spec(sc, "file").system_options["version"] == "2.10.22"
    spec = scenario_spec(sc, "file", options={"version": "2.10.23"})
    assert spec.system_options["version"] == "2.10.23" and spec.system_options["storage"] == "file"


def test_a_scenarios_request_timeout_reaches_its_writers_client():
    """kafka-client-resend's burst is answered only after the heal: its writer waits 20 s, the
    run's spec says so (test.json), and the workload's client is built with it."""
    from scenarios.program import scenario_spec
    from workloads.log import make

    scenario = load_scenario("kafka-client-resend")
    spec = scenario_spec(scenario, "idempotent")
    assert scenario.request_timeout == spec.request_timeout == 20
    assert make(spec, db=None, history=None).cfg.request_timeout == 20
    assert scenario_spec(load_scenario("hw-data-loss"), "hw").request_timeout == 5.0


@pytest.mark.parametrize("steps,top,message", [
    ("- txn: {key: 0}\n", {}, "step 1 (txn): txn steps need the queue workload's transactional writer"),
    ("- txn: {key: 3}\n", {"workload": "queue"}, "step 1 (txn): key 3 does not exist"),
    ("- txn: {key: 0, expect: maybe}\n", {"workload": "queue"}, "step 1 (txn): expect: got 'maybe'"),
    ("- txn: {key: 0, count: 0}\n", {"workload": "queue"}, "step 1 (txn): count:"),
    ("- txn: {key: 0, acks: 1}\n", {"workload": "queue"}, "step 1 (txn): acks: unknown field"),
    ("- txn: {coordinator_not: B}\n", {"workload": "queue"}, "step 1 (txn): unknown node 'B'"),
    ("- txn: {coordinator: B}\n", {"workload": "queue"}, "step 1 (txn): unknown node 'B'"),
    ("- txn: {coordinator: n1, coordinator_not: n2}\n", {"workload": "queue"},
     "step 1 (txn): give coordinator or coordinator_not, not both"),
    ("- txn: {key: 0, background: true}\n", {"workload": "queue"},
     "step 1 (txn): a background transaction is not waited for: use expect: any"),
    ("- txn: {key: 0, abort_after: 0}\n", {"workload": "queue"}, "step 1 (txn): abort_after:"),
    ("- txn: 2\n", {"workload": "queue", "system": "replica"}, "does not support 'transactions' (needed for step 1 (txn))"),
    ("- write: 2\n", {"workload": "queue"}, "step 1 (write): write steps are the log workload's"),
])
def test_bad_txn_steps_get_one_line_naming_the_step(steps, top, message):
    """The transactional writer's step (txn): its arguments, its workload and its system."""
    data = _script(steps, **{"system": "kafka", "nodes": 3, "settings": {}, **top})
    with pytest.raises(ScenarioError) as e:
        parse(data)
    text = str(e.value)
    assert "\n" not in text
    assert message in text, text


def test_a_scenarios_workload_and_its_options_are_checked_and_reach_the_spec():
    from scenarios.program import scenario_spec

    with pytest.raises(ScenarioError, match="workload: unknown workload 'bank'"):
        parse(_script("- txn: 1\n", system="kafka", nodes=3, settings={}, workload="bank"))
    with pytest.raises(ScenarioError, match=r"workload_options: abort_p: .*less than or equal to 1"):
        parse(_script("- txn: 1\n", system="kafka", nodes=3, settings={}, workload="queue",
                      workload_options={"abort_p": 2}))
    s = parse(_script("- txn: {key: 0, count: 2, expect: any}\n", system="kafka", nodes=3, settings={},
                      workload="queue", workload_options={"consumer": "assign"}))
    assert (s.steps[0].args.count, s.steps[0].args.expect) == (2, "any")
    spec = scenario_spec(s, "4.1.1")
    s = parse(_script("- txn: {key: 0, expect: any, abort_after: 2, background: true, coordinator: n2}\n",
                      system="kafka", nodes=3, settings={}, workload="queue"))
    a = s.steps[0].args
    assert (a.abort_after, a.background, a.coordinator) == (2, True, "n2")
    assert (spec.workload, spec.workload_options["consumer"]) == ("queue", "assign")
