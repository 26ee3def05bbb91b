"""The campaign file: a malformed one is one line naming the field, exit 2,
before any run starts; the matrix expands in a stable order."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.campaign.matrix import derived_seed, expand
from harness.campaign.spec import CampaignError, load_campaign, parse_duration

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]

BAD = [
    ("nemesis: [[kill, crash]]\n", "field 'nemesis'", "unknown fault 'crash'"),
    ("eras: [hw, kafka3]\n", "field 'eras.1'", "'kafka3'"),
    ("seeds: []\n", "field 'seeds'", "at least 1"),
    ("time_limit: -5\n", "field 'time_limit'", "greater than 0"),
    ("budget: two hours\n", "field 'budget'", "not a duration"),
    ("colour: red\n", "field 'colour'", "unknown field"),
    ("options: {nodez: 3}\n", "field 'options'", "unknown run option 'nodez'"),
    ("options: {era: hw}\n", "field 'options'", "set by the campaign itself"),
    ("scenarios: [no-such-scenario]\n", "field 'scenarios'", "no-such-scenario"),
    ("expect: [{where: {colour: red}, verdict: valid}]\n", "field 'expect.0.where'", "unknown axis 'colour'"),
    ("expect: [{where: {era: hw}, verdict: broken}]\n", "field 'expect.0.verdict'", "'broken'"),
    ("runs: 0\n", "field 'runs'", "greater than or equal to 1"),
    ("nemesis: []\n", "no `scenarios`", "fault sets"),
    ("subnets: 10.240.0.0/28\n", "field 'subnets'", "smaller than a /24"),
    ("eras: [hw\n", "malformed YAML", "line"),
    ("- just a list\n", "must be a mapping", ""),
    ("profiles: {a: {nodez: 3}}\n", "field 'profiles'", "profile 'a': unknown run option 'nodez'"),
    ("profiles: {a: {seed: 3}}\n", "field 'profiles'", "set by the campaign itself"),
    ("profiles: {'a b': {}}\n", "field 'profiles'", "letters, digits"),
]


@pytest.mark.parametrize("text,field,why", BAD, ids=[b[1] + ":" + b[0].split(":")[0] for b in BAD])
def test_malformed_file_names_the_field(tmp_path, text, field, why):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CampaignError) as err:
        load_campaign(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert field in msg and why in msg, msg


def test_malformed_file_exits_2_before_any_run(tmp_path):
    """The CLI: one line on stderr, exit 2, no campaign folder, no run."""
    path = tmp_path / "bad.yaml"
    path.write_text("eras: [epoch]\nnemesis: [[kill, crash]]\nseeds: [1]\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), CI="true")
    out = subprocess.run([sys.executable, "-m", "harness", "campaign", "run", str(path),
                          "--store", str(tmp_path / "store")], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("harness: error: campaign file") and "field 'nemesis'" in lines[0]
    assert not (tmp_path / "store").exists()


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(CampaignError, match="campaign file .*No such file"):
        load_campaign(tmp_path / "nope.yaml")


def test_durations():
    assert parse_duration("2h") == 7200 and parse_duration("90m") == 5400 and parse_duration("45") == 45
    with pytest.raises(ValueError):
        parse_duration("0s")


def test_matrix_is_stable_and_expectations_apply(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("""
name: m
eras: [hw, epoch]
nemesis: [kill, [partition, kill], none]
runs: 2
scenarios: [hw-data-loss, epoch-truncation]
expect:
  - where: {era: hw, nemesis: kill}
    verdict: invalid
    why: known bug
""")
    campaign = load_campaign(path)
    a, b = expand(campaign, "salt"), expand(campaign, "salt")
    assert [c.as_json() for c in a] == [c.as_json() for c in b]
    ids = [c.id for c in a]
    assert ids[:6] == ["replica-hw-kill", "replica-hw-kill+partition", "replica-hw-none",
                       "replica-epoch-kill", "replica-epoch-kill+partition", "replica-epoch-none"]
    # epoch-truncation asserts only era epoch: its hw cell is left out
    assert ids[6:] == ["scenario-hw-data-loss-hw", "scenario-hw-data-loss-epoch", "scenario-epoch-truncation-epoch"]
    by_id = {c.id: c for c in a}
    assert by_id["replica-hw-kill"].expect == "invalid" and by_id["replica-hw-kill"].why == "known bug"
    assert by_id["replica-hw-kill+partition"].expect == "valid"
    assert by_id["scenario-hw-data-loss-hw"].expect == "scenario"
    assert by_id["replica-hw-kill"].label == "replica/hw/kill"
    seeds = [r["seed"] for r in by_id["replica-epoch-none"].runs]
    assert seeds == [derived_seed("salt", "replica-epoch-none", i) for i in range(2)] and len(set(seeds)) == 2
    assert [r["seed"] for r in expand(campaign, "other")[0].runs] != [r["seed"] for r in a[0].runs]
    assert all(len(c.runs) == 2 for c in a)
    assert len(expand(campaign, "salt", runs_per_cell=3)[0].runs) == 3


def test_listed_seeds_are_used(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("eras: [epoch]\nnemesis: [kill]\nseeds: [7, 3]\n")
    cells = expand(load_campaign(path), "salt")
    assert [r["id"] for r in cells[0].runs] == ["replica-epoch-kill/seed-7", "replica-epoch-kill/seed-3"]


def test_profiles_are_an_axis_of_run_fields(tmp_path):
    """Named sets of run fields over `options` (system and workload options merged key by
    key), crossed with the other axes, limited to the variants a profile names."""
    from harness.campaign.launch import run_spec

    path = tmp_path / "p.yaml"
    path.write_text("systems: [kafka]\nvariants: ['3.9.1', '4.1.1']\nworkloads: [queue]\nnemesis: [[pause]]\n"
                    "runs: 1\noptions: {keys: 2, system_options: {client: java}, workload_options: {abort_p: 0.1}}\n"
                    "profiles:\n  old: {variants: ['3.9.1']}\n"
                    "  tv1: {variants: ['4.1.1'], system_options: {transaction_version: 1}, nemesis_mode: targeted}\n"
                    "expect: [{where: {profile: tv1}, verdict: any}]\n")
    campaign = load_campaign(path)
    cells = expand(campaign, "salt")
    assert [c.id for c in cells] == ["kafka-queue-3.9.1-pause-old", "kafka-queue-4.1.1-pause-tv1"]
    assert cells[1].label == "kafka/4.1.1/pause/queue/tv1" and cells[1].expect == "any" and cells[0].expect == "valid"
    spec = run_spec(campaign, cells[1].as_json(), cells[1].runs[0], None)
    assert spec["system_options"] == {"client": "java", "transaction_version": 1}
    assert spec["nemesis_mode"] == "targeted" and spec["keys"] == 2 and "variants" not in spec
    assert run_spec(campaign, cells[0].as_json(), cells[0].runs[0], None)["system_options"] == {"client": "java"}


def test_a_profile_a_variant_refuses_is_one_line_before_any_run(tmp_path):
    from harness.campaign.execute import Options, preflight

    path = tmp_path / "p.yaml"
    path.write_text("systems: [kafka]\nvariants: ['3.9.1']\nworkloads: [queue]\nnemesis: [[pause]]\n"
                    "profiles: {tv2: {system_options: {transaction_version: 2}}}\n")
    with pytest.raises(CampaignError) as e:
        preflight(load_campaign(path), str(path), Options())
    assert "field 'profiles.tv2'" in str(e.value) and "transaction.version 0 only" in str(e.value)


@pytest.mark.parametrize("name", ["smoke", "nightly"])
def test_shipped_campaigns_load(name):
    campaign = load_campaign(REPO / "campaigns" / f"{name}.yaml")
    cells = expand(campaign, "salt")
    assert cells and all(c.runs for c in cells)
    assert any(c.expect in ("invalid", "scenario") for c in cells)  # the known bugs are in the matrix


def test_budget_too_small_runs_nothing_and_says_so(tmp_path):
    """A budget no run fits in: no run starts, every cell is `not-run`, exit 1, JUnit skips."""
    if os.geteuid() != 0:
        pytest.skip("the netns backend needs root (checked before the budget)")
    path = tmp_path / "b.yaml"
    path.write_text("name: b\neras: [epoch]\nnemesis: [kill]\nseeds: [1, 2]\ntime_limit: 60\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), CI="true")
    out = subprocess.run([sys.executable, "-m", "harness", "campaign", "run", str(path), "--store",
                          str(tmp_path / "store"), "--budget", "10s", "--junit", str(tmp_path / "j.xml")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    folder = next((tmp_path / "store" / "campaigns" / "b").iterdir())
    events = [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["event"] == "run-start"]
    stop = next(e for e in events if e["event"] == "stop")
    assert stop["why"] == "budget spent" and len(stop["left"]) == 2
    summary = json.loads((folder / "summary.json").read_text())
    assert [c["status"] for c in summary["cells"]] == ["not-run"] and "budget spent" in summary["notes"]
    assert (tmp_path / "j.xml").read_text().count("<skipped") == 2


def test_a_rule_can_judge_on_some_checkers(tmp_path):
    """A system without replica dumps (NATS) is judged on the log checker alone."""
    from harness.campaign.verdicts import run_verdict
    path = tmp_path / "n.yaml"
    path.write_text("systems: [replica, nats]\neras: [epoch]\nnemesis: [kill]\n"
                    "expect: [{where: {system: nats}, verdict: valid, checkers: [log]}]\n")
    cells = {c.id: c for c in expand(load_campaign(path), "salt")}
    assert cells["nats-kill"].checkers == ["log"] and cells["nats-kill"].variant is None
    assert cells["replica-epoch-kill"].checkers is None
    store = tmp_path / "run"
    store.mkdir()
    (store / "results.json").write_text(json.dumps(
        {"valid": "unknown", "checkers": {"log": {"valid": True}, "replica-diff": {"valid": "unknown"}}}))
    assert run_verdict(store, False)["verdict"] == "unknown"
    assert run_verdict(store, False, ["log"])["verdict"] == "valid"


def test_a_scenario_campaign_runs_each_of_a_scenarios_own_variants(tmp_path):
    """`nemesis: []` runs scenarios only; Kafka's kafka-unclean-election has its own variants
    (unclean-on / unclean-off), which replace the campaign's variants of its system."""
    f = tmp_path / "c.yaml"
    f.write_text('systems: [kafka]\nvariants: ["4.1.1"]\nnemesis: []\nruns: 2\n'
                 'scenarios: [kafka-unclean-election, kafka-hw-data-loss]\n')
    cells = expand(load_campaign(str(f)), "salt")
    assert [(c.kind, c.variant, len(c.runs)) for c in cells] == [
        ("scenario", "unclean-on", 2), ("scenario", "unclean-off", 2), ("scenario", "4.1.1", 2)]
    assert "overwritten" in cells[0].why and cells[1].why == "the library declares valid"
    f.write_text('systems: [kafka]\nvariants: ["4.1.1"]\nnemesis: []\nscenarios: [kafka-tiered-fresh-follower]\n')
    assert [c.variant for c in expand(load_campaign(str(f)), "salt")] == ["4.1.1"]  # of its own 4.1.1, 4.2.1


def test_a_systems_own_options_pass_the_nemesis_check(tmp_path):
    """system_options in `options` are the campaign's system's (Kafka's `elr`), not the
    default system's: the preflight checks each nemesis set with that system."""
    from harness.campaign.execute import Options, preflight

    path = tmp_path / "kafka.yaml"
    path.write_text("systems: [kafka]\nvariants: ['4.1.1']\nnemesis: [[kill, partition]]\nseeds: [1]\n"
                    "options: {nemesis_mode: targeted, system_options: {elr: false}}\n")
    campaign = load_campaign(path)
    preflight(campaign, str(path), Options(store_root=str(tmp_path / "store")))
    path.write_text(path.read_text().replace("elr: false", "elr: maybe"))
    with pytest.raises(CampaignError, match="elr"):
        preflight(load_campaign(path), str(path), Options(store_root=str(tmp_path / "store")))
