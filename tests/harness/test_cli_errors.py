"""Bad input: a one-line error, exit code 2, and nothing created or overwritten."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def harness(*args, cwd):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=os.getcwd()), timeout=60)


def assert_one_line_error(out, *words):
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.parametrize("args,words", [
    (["--era", "zab"], ["era", "zab", "epoch"]),
    (["--nemesis", "kill,meteor"], ["nemesis", "meteor", "partition"]),
    (["--nodes", "0"], ["nodes", "greater than or equal to 1"]),
    (["--nodes", "9"], ["nodes", "less than or equal to 5"]),
    (["--subnet", "10.1.2"], ["subnet"]),
    (["--set", "novalue"], ["--set", "key=value"]),
    (["--set", "bogus.key=1"], ["--set", "bogus.key"]),
    (["--acks", "2"], ["acks"]),
])
def test_bad_run_flags(tmp_path, args, words):
    store = tmp_path / "store"
    out = harness("run", "--store", str(store), *args, cwd=tmp_path)
    assert_one_line_error(out, *words)
    assert not store.exists()


@pytest.mark.parametrize("text,words", [
    ("era: [epoch\nnodes: 3\n", ["malformed YAML", "line"]),
    ("- just\n- a list\n", ["mapping"]),
    ("era: epoch\nnodez: 3\n", ["nodez", "unknown field"]),
    ("nodes: 0\n", ["nodes"]),
])
def test_bad_spec_file(tmp_path, text, words):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    store = tmp_path / "store"
    out = harness("run", "--spec", str(spec), "--store", str(store), cwd=tmp_path)
    assert_one_line_error(out, str(spec), *words)
    assert not store.exists()


def test_missing_spec_file(tmp_path):
    out = harness("run", "--spec", str(tmp_path / "nope.yaml"), cwd=tmp_path)
    assert_one_line_error(out, "nope.yaml")


def test_check_not_a_store(tmp_path):
    (tmp_path / "somedir").mkdir()
    (tmp_path / "somedir" / "keep.txt").write_text("mine")
    out = harness("check", str(tmp_path / "somedir"), cwd=tmp_path)
    assert_one_line_error(out, "not a store")
    assert sorted(p.name for p in (tmp_path / "somedir").iterdir()) == ["keep.txt"]
    out = harness("check", str(tmp_path / "missing"), cwd=tmp_path)
    assert_one_line_error(out, "no such directory")


def test_report_not_a_store(tmp_path):
    out = harness("report", str(tmp_path), cwd=tmp_path)
    assert_one_line_error(out, "not a store")


def test_netns_needs_root(tmp_path):
    if os.geteuid() == 0:
        # drop to nobody for this one process
        cmd = [sys.executable, "-c",
               "import os,sys; from harness.cli import main; import harness.runner, harness.spec, harness.run_store; "
               "os.setgid(65534); os.setuid(65534); sys.argv=['harness','run','--store',sys.argv[1]]; main()",
               str(tmp_path / "store")]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd="/",
                             env=dict(os.environ, PYTHONPATH=os.getcwd()), timeout=60)
    else:
        out = harness("run", "--store", str(tmp_path / "store"), cwd=tmp_path)
    assert_one_line_error(out, "root")
    assert not (tmp_path / "store").exists()
