"""The 2.10.22 stream deletion after process crashes, on real servers: a
metadata follower killed and restarted, then the metadata leader and the
other follower killed and restarted while the first is paused. On 2.10.22
the new metadata leader's snapshot drops the stream on every node (lost-write
for every acknowledged publish, exit 1, empty dumps); on 2.10.23 the same
schedule loses nothing (exit 0). One run of each (~35 s each; the two
releases are built with go install on first use, ~1.5 min each); the two
runs go at once."""
from __future__ import annotations

import json
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from systems.nats.db import release_binary
from tests.harness.hrun_util import run_harness
from tests.nats.natsutil import need_root

pytestmark = [pytest.mark.root, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _scenario(tmp_path, name: str, subnet: str, again: bool = True):
    """One run of scenario `name`; once more if its cluster never placed the stream (the set-up,
    before any step: a server left outside JetStream's meta group, seen twice on 2.10.23 in a
    loaded suite, never alone; the first run's evidence goes to a warning)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = run_harness(tmp_path, "scenario", name, "--variant", "file", "--subnet", subnet,
                      "--store", tmp_path / "store", "--json", timeout=600)
    assert "{" in out.stdout, out.stderr[-2000:]
    results = json.loads(out.stdout[out.stdout.index("{"):])
    store = Path(results["store"])
    if "scenario" not in results and again and "could not create the log" in out.stderr:
        line = next(x for x in out.stderr.splitlines() if "could not create the log" in x)
        warnings.warn(f"{name}: the cluster never placed the stream ({line.strip()}); store {store}; "
                      f"running the scenario once more")
        return _scenario(tmp_path / "again", name, subnet, again=False)
    if "scenario" not in results:  # pytest.fail: an assertion's message is cut to a line
        log = store / "harness.log"
        tail = log.read_text()[-3000:] if log.is_file() else "(no harness.log)"
        pytest.fail(f"{name}: exit {out.returncode}, {results.get('error')}; stderr:\n{out.stderr[-3000:]}\n"
                    f"harness.log:\n{tail}")
    return out, results, store


def test_2_10_22_deletes_the_stream_and_2_10_23_keeps_it(tmp_path):
    """Both releases at once, on their own subnets (two small NATS clusters; the suite's time)."""
    need_root()
    assert shutil.which("go") or all((REPO / "build" / "nats" / v / "bin" / "nats-server").exists()
                                     for v in ("2.10.22", "2.10.23")), "no go to install nats-server 2.10.22/23"
    for version in ("2.10.22", "2.10.23"):  # installed first, one after the other (scripts/nats-server.sh
        release_binary(version)             # shares Go's build cache), so both clusters start together
    with ThreadPoolExecutor(2) as pool:
        broken = pool.submit(_scenario, tmp_path / "broken", "nats-crash-stream-deletion", "10.212.9.0/24")
        fixed = pool.submit(_scenario, tmp_path / "fixed", "nats-crash-stream-deletion-fixed", "10.212.10.0/24")
        broken, fixed = broken.result(), fixed.result()
    out, results, store = broken
    sc = results["scenario"]
    assert out.returncode == 1, out.stderr[-2000:]
    assert set(sc["aliases"]) == {"M", "A", "B"} and len(set(sc["aliases"].values())) == 3
    assert "10059" in sc["final"]["absent"]["0"]                      # the healthy cluster: stream not found
    acked = len(sc["unread_acknowledged"])
    assert acked >= 20 and sc["forbidden_found"]["lost-write"] == acked
    for node in ("n1", "n2", "n3"):                                   # gone from every node's store
        dump = json.loads((store / "nodes" / node / "dump.json").read_text())
        assert sum(len(p["records"]) for p in dump["partitions"]) == 0, node

    out, results, store = fixed
    sc = results["scenario"]
    assert out.returncode == 0, out.stderr[-2000:]
    assert results["valid"] is True and not sc["final"].get("absent")
    # the 20 publishes that must be acknowledged are all read (the next 10 are `expect: any`: on a
    # loaded machine some time out, so 30 was too strict: read_to 20 in a clean-clone run); valid
    # above means no acknowledged publish is missing
    assert sc["final"]["keys"]["0"]["read_to"] >= 20
