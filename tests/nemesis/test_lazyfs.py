"""lazyfs on a real FUSE mount: what a drop (power failure) keeps and loses,
by POSIX's rules for data (fsync) and names (fsync of the directory), and
that a SIGKILLed harness with mounts in place is fully cleaned up."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/fuse"),
                                reason="lazyfs needs root and /dev/fuse (scripts/setup.sh installs fuse3)")]


def mounted(path: Path) -> bool:
    return any(line.split()[1] == str(path) for line in Path("/proc/mounts").read_text().splitlines())


class Lazy:
    def __init__(self, tmp: Path):
        self.backing, self.mnt, self.sock = tmp / "backing", tmp / "mnt", tmp / "ctl.sock"
        self.log = open(tmp / "lazyfs.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "nemesis.lazyfs", "mount", str(self.backing),
                                      str(self.mnt), "--control", str(self.sock)],
                                     cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while not (mounted(self.mnt) and self.sock.exists()):
            assert self.proc.poll() is None and time.monotonic() < deadline, (tmp / "lazyfs.log").read_text()
            time.sleep(0.05)

    def ctl(self, command: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "nemesis.lazyfs", "ctl", str(self.sock), command],
                             cwd=REPO, capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    def close(self) -> None:
        subprocess.run(["fusermount3", "-u", str(self.mnt)], capture_output=True)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)
        self.log.close()


@pytest.fixture
def lazy(tmp_path):
    fs = Lazy(tmp_path)
    yield fs
    fs.close()
    assert not mounted(fs.mnt)


def write(path: Path, data: bytes, offset: int | None = None, sync: bool = False, flags: int = 0) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        if offset is None:
            os.write(fd, data)
        else:
            os.pwrite(fd, data, offset)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_fsynced_data_survives_a_drop_and_unsynced_data_does_not(lazy):
    f = lazy.mnt / "seg.log"
    write(f, b"A" * 5000, sync=True)
    fsync_dir(lazy.mnt)
    write(f, b"B" * 3000, flags=os.O_APPEND)          # past the synced end
    write(f, b"C" * 10, offset=4090)                   # over synced bytes, across a page boundary
    seen = f.read_bytes()
    assert seen == b"A" * 4090 + b"C" * 10 + b"A" * 900 + b"B" * 3000
    assert (lazy.backing / "seg.log").read_bytes() == b"A" * 5000   # nothing unsynced reached the disk
    assert lazy.ctl("stats")["pending_files"] == 1
    out = lazy.ctl("drop")
    assert out["files"] == 1 and out["dropped_bytes"] > 0
    assert f.read_bytes() == b"A" * 5000
    assert f.stat().st_size == 5000


def test_fdatasync_and_a_later_drop_keep_every_synced_write(lazy):
    f = lazy.mnt / "x"
    write(f, b"1" * 100, sync=True)
    fsync_dir(lazy.mnt)
    fd = os.open(f, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"2" * 100)
    os.fdatasync(fd)
    os.write(fd, b"3" * 100)
    os.close(fd)
    lazy.ctl("drop")
    assert f.read_bytes() == b"1" * 100 + b"2" * 100


def test_truncate_is_lost_without_fsync_and_leaves_zeros_with_it(lazy):
    f = lazy.mnt / "t"
    write(f, bytes(range(256)) * 40, sync=True)       # 10240 bytes
    fsync_dir(lazy.mnt)
    os.truncate(f, 100)
    assert f.stat().st_size == 100
    lazy.ctl("drop")
    assert f.read_bytes() == bytes(range(256)) * 40
    fd = os.open(f, os.O_RDWR)
    os.ftruncate(fd, 100)
    os.pwrite(fd, b"end", 8000)                        # the gap reads as zeros, not old bytes
    os.fsync(fd)
    os.close(fd)
    want = (bytes(range(256)) * 40)[:100] + bytes(7900) + b"end"
    assert f.read_bytes() == want
    lazy.ctl("drop")
    assert f.read_bytes() == want
    assert (lazy.backing / "t").read_bytes() == want


def test_a_new_file_is_durable_only_after_its_directory_is_fsynced(lazy):
    (lazy.mnt / "d").mkdir()
    fsync_dir(lazy.mnt)
    write(lazy.mnt / "d" / "kept", b"data", sync=True)
    fsync_dir(lazy.mnt / "d")
    write(lazy.mnt / "d" / "lost", b"data", sync=True)     # file fsynced, its directory not since
    lazy.ctl("drop")
    assert sorted(os.listdir(lazy.mnt / "d")) == ["kept"]
    assert (lazy.mnt / "d" / "kept").read_bytes() == b"data"


def test_a_new_directory_vanishes_with_its_contents_unless_its_parent_is_fsynced(lazy):
    (lazy.mnt / "p").mkdir()
    write(lazy.mnt / "p" / "f", b"x", sync=True)
    fsync_dir(lazy.mnt / "p")                              # p's entry in the root is not durable
    lazy.ctl("drop")
    assert os.listdir(lazy.mnt) == []


def test_rename_over_a_file_follows_the_directory_fsync(lazy):
    ck, tmp = lazy.mnt / "ck", lazy.mnt / "ck.tmp"
    write(ck, b"v1", sync=True)
    fsync_dir(lazy.mnt)
    # the checkpoint pattern without the final directory fsync: the rename is undone
    write(tmp, b"v2", sync=True)
    os.rename(tmp, ck)
    assert ck.read_bytes() == b"v2" and not tmp.exists()
    lazy.ctl("drop")
    assert ck.read_bytes() == b"v1"
    assert sorted(os.listdir(lazy.mnt)) == ["ck"]
    # ... and with it, the new content stays
    write(tmp, b"v3", sync=True)
    os.rename(tmp, ck)
    fsync_dir(lazy.mnt)
    lazy.ctl("drop")
    assert ck.read_bytes() == b"v3"
    assert sorted(os.listdir(lazy.mnt)) == ["ck"]


def test_unlink_and_rename_between_directories_are_undone_without_fsync(lazy):
    (lazy.mnt / "a").mkdir()
    (lazy.mnt / "b").mkdir()
    write(lazy.mnt / "a" / "f", b"f", sync=True)
    write(lazy.mnt / "a" / "g", b"g", sync=True)
    fsync_dir(lazy.mnt / "a")
    fsync_dir(lazy.mnt)
    os.unlink(lazy.mnt / "a" / "f")
    os.rename(lazy.mnt / "a" / "g", lazy.mnt / "b" / "g")
    lazy.ctl("drop")
    assert sorted(os.listdir(lazy.mnt / "a")) == ["f", "g"]
    assert os.listdir(lazy.mnt / "b") == []
    assert (lazy.mnt / "a" / "f").read_bytes() == b"f"
    # an fsync of the target directory commits the rename (one transaction)
    os.rename(lazy.mnt / "a" / "g", lazy.mnt / "b" / "g")
    fsync_dir(lazy.mnt / "b")
    lazy.ctl("drop")
    assert os.listdir(lazy.mnt / "b") == ["g"] and sorted(os.listdir(lazy.mnt / "a")) == ["f"]


def test_drop_data_loses_data_but_keeps_names_as_jepsens_lazyfs(lazy):
    write(lazy.mnt / "new", b"synced", sync=True)        # its name was never made durable
    write(lazy.mnt / "new", b"+lost", flags=os.O_APPEND)
    out = lazy.ctl("drop-data")
    assert out["undone"] == 0 and out["files"] == 1
    assert (lazy.mnt / "new").read_bytes() == b"synced"
    lazy.ctl("drop")                                     # the name was committed by drop-data
    assert (lazy.mnt / "new").read_bytes() == b"synced"


def test_sync_command_makes_everything_durable(lazy):
    write(lazy.mnt / "n", b"unsynced")
    out = lazy.ctl("sync")
    assert out["synced_files"] == 1
    lazy.ctl("drop")
    assert (lazy.mnt / "n").read_bytes() == b"unsynced"


HOLDER = """
import sys, time
from harness.cleanup import RunRecord
from harness.cluster.base import HostLayout
from harness.remote.local import LocalRemote
from nemesis.lazyfs.mounts import LazyFsMounts

run_dir, work = sys.argv[1], sys.argv[2]
record = RunRecord("lzkill", run_dir=run_dir)
record.save()

class Cluster:
    layout = HostLayout(python=sys.executable, code_dir="", work_dir=work)
    remotes = {"n1": LocalRemote("n1", "127.0.0.1", on_start=lambda pid, ns: record.add_pid(pid, ns))}

mounts = LazyFsMounts(Cluster(), record)
m = mounts.mount("n1", work + "/n1/data")
open(m.mountpoint + "/unsynced", "w").write("x")
print("ready", flush=True)
time.sleep(600)
"""


def test_a_sigkilled_run_with_mounts_leaves_nothing_after_harness_cleanup(tmp_path):
    run_dir, work = tmp_path / "runs", tmp_path / "work"
    env = dict(os.environ, PYTHONPATH=str(REPO), HARNESS_RUN_DIR=str(run_dir))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir), str(work)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "ready"
    mnt = work / "n1" / "data"
    assert mounted(mnt)
    rec = json.loads((run_dir / "lzkill.json").read_text())
    kinds = [r["kind"] for r in rec["resources"]]
    assert kinds.index("fuse-mount") < kinds.index("pid")       # recorded before it was mounted
    daemon = next(r["pid"] for r in rec["resources"] if r["kind"] == "pid")
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    assert mounted(mnt) and Path(f"/proc/{daemon}").exists()    # what a killed harness leaves
    out = subprocess.run([sys.executable, "-m", "harness", "cleanup", "--run", "lzkill"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"mount {mnt}" in out.stdout
    assert not mounted(mnt)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{daemon}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    stat = Path(f"/proc/{daemon}/stat")
    assert not stat.exists() or stat.read_text().split(") ")[1].startswith("Z")
    assert not (run_dir / "lzkill.json").exists()


def test_a_sigkilled_harness_run_with_power_mounts_is_cleaned_up(tmp_path):
    """The same through a real `harness run --nemesis power` on netns: SIGKILL
    the harness while the brokers run on lazyfs; `harness cleanup` leaves no
    mount, no lazyfs or broker process, no namespace."""
    sys.path.insert(0, str(REPO / "tests" / "harness"))
    from hnetns_util import leftovers
    from hrun_util import harness_cmd, harness_env, run_harness

    proc = subprocess.Popen(harness_cmd("run", "--nemesis", "power", "--nemesis-interval", "2", "--time-limit", "60",
                                        "--seed", "3", "--subnet", "10.222.51.0/24", "--store", tmp_path / "store",
                                        "--rate", "20"),
                            cwd=tmp_path, env=harness_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    work = tmp_path / "work"
    deadline = time.monotonic() + 120
    while not [line for line in Path("/proc/mounts").read_text().splitlines() if str(work) in line]:
        assert proc.poll() is None and time.monotonic() < deadline, "no lazyfs mount appeared"
        time.sleep(0.2)
    time.sleep(2)                                                   # the brokers write through it
    run_id = next(work.iterdir()).name
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert any(str(work) in line for line in Path("/proc/mounts").read_text().splitlines())
    out = run_harness(tmp_path, "cleanup")
    assert out.returncode == 0 and "removed mount" in out.stdout, out.stdout + out.stderr
    assert not any(str(work) in line for line in Path("/proc/mounts").read_text().splitlines())
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert not [line for line in ps.splitlines() if str(work) in line]
    assert leftovers(run_id) == []
