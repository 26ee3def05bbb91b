"""The report's Configuration section (reports/config.py): the run's parameters a reader needs, in
words; every other field of test.json (the fault table with its colours, the final reads) only
in the folded raw block."""
from __future__ import annotations

import json

import pytest

from reports import config

pytestmark = pytest.mark.unit

TEST = {"name": "log-kafka", "system": "kafka", "system_options": {"version": "4.1.1", "elr": False},
        "workload": "log", "backend": "netns", "subnet": "10.210.0.0/24", "nodes": 3, "time_limit": 120.0,
        "seed": 7, "nemesis": ["kill", "partition"], "nemesis_interval": 10.0, "nemesis_mode": "targeted",
        "keys": 3, "concurrency": 10, "rate": 100.0, "acks": "all", "replication_factor": 3,
        "settings": {"min.insync.replicas": 2}, "recovery_timeout": 60.0, "store_root": "store", "check": True,
        "backend_options": {}, "variant": "4.1.1", "run_id": "abc123", "start": "2026-11-28T01:00:00Z",
        "faults": {"kill": {"start": "kill", "stop": "start", "colour": "#d62728"}},
        "final_reads": {"0": {"end": 10, "unreadable": []}}, "t0_wall": 1.5}


def test_the_summary_says_what_a_reader_needs():
    rows = dict(config.summary(TEST))
    assert rows["system"] == "kafka, variant 4.1.1"
    assert rows["system options"] == "elr=false"  # the variant option is in the system row
    assert rows["settings"] == "min.insync.replicas=2"
    assert rows["nemesis"] == "kill, partition (targeted, every 10 s)"
    assert rows["client"] == "10 processes, 100.0 ops/s, 3 keys, acks=all, replication factor 3"
    assert rows["backend"] == "netns (subnet 10.210.0.0/24)" and rows["nodes"] == "3: n1..n3"
    assert rows["seed"] == "7" and rows["time limit"].startswith("120 s of workload")
    assert "colour" not in json.dumps(rows) and "final" not in " ".join(rows)


def test_everything_else_is_in_the_raw_block():
    rest = json.loads(config.rest(TEST))
    assert set(rest) == {"faults", "final_reads", "t0_wall", "store_root", "check"}
    assert rest["faults"]["kill"]["colour"] == "#d62728"


def test_workload_options_are_shown_with_the_workload():
    rows = dict(config.summary({**TEST, "workload": "queue", "workload_options": {"txn": True, "consumer": "assign"}}))
    assert rows["workload"] == "queue (txn=true, consumer=assign)"


def test_a_scenario_run_says_its_faults_are_the_script():
    rows = dict(config.summary({**TEST, "nemesis": []}, scenario="hw-data-loss"))
    assert rows["nemesis"] == "the steps of scenario hw-data-loss"
