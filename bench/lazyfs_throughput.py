"""What lazyfs costs (a benchmark, not a test): appends of small records
the way a log segment is written, with no fsync, an fsync every 100
records, and an fsync every record; then a sequential read of the file.
Each mode runs on a plain directory (the baseline) and through a lazyfs
mount of the same file system, alternately, in this one run; it prints
records/s (MB/s for reads) of both and their ratio, and one JSON line.

    .venv/bin/python bench/lazyfs_throughput.py [--seconds 3] [--record 100] [--rounds 2]

Needs root and /dev/fuse (scripts/setup.sh installs fuse3).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODES = (("no fsync", 0), ("fsync/100", 100), ("fsync/1", 1))


def appends(path: Path, seconds: float, record: int, every: int) -> float:
    data = os.urandom(record)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    n, stop = 0, time.perf_counter() + seconds
    t0 = time.perf_counter()
    try:
        while time.perf_counter() < stop:
            for _ in range(50):
                os.write(fd, data)
                n += 1
                if every and n % every == 0:
                    os.fsync(fd)
    finally:
        os.fsync(fd)
        os.close(fd)
    return n / (time.perf_counter() - t0)


def read_mb_s(path: Path) -> float:
    size = path.stat().st_size
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 17):
            pass
    return size / (time.perf_counter() - t0) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--record", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        tmp = Path(tmp)
        plain, backing, mnt, sock = tmp / "plain", tmp / "backing", tmp / "mnt", tmp / "ctl.sock"
        plain.mkdir()
        proc = subprocess.Popen([sys.executable, "-m", "nemesis.lazyfs", "mount", str(backing), str(mnt),
                                 "--control", str(sock)], cwd=REPO, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 15
            while not (sock.exists() and os.path.ismount(mnt)):
                if proc.poll() is not None or time.monotonic() > deadline:
                    print("lazyfs did not mount (root and /dev/fuse needed)", file=sys.stderr)
                    return 2
                time.sleep(0.05)
            results = {}
            for name, every in MODES:
                base, lazy = [], []
                for _ in range(a.rounds):
                    base.append(appends(plain / "seg", a.seconds, a.record, every))
                    lazy.append(appends(mnt / "seg", a.seconds, a.record, every))
                b, z = statistics.median(base), statistics.median(lazy)
                results[name] = {"plain_rec_s": round(b), "lazyfs_rec_s": round(z), "ratio": round(z / b, 4)}
                print(f"append {name:10} plain {b:12.0f} rec/s   lazyfs {z:10.0f} rec/s   ratio {z / b:.4f}")
            b, z = read_mb_s(plain / "seg"), read_mb_s(mnt / "seg")
            results["read"] = {"plain_mb_s": round(b, 1), "lazyfs_mb_s": round(z, 1), "ratio": round(z / b, 4)}
            print(f"read sequential  plain {b:10.1f} MB/s    lazyfs {z:8.1f} MB/s    ratio {z / b:.4f}")
            print(json.dumps({"record_bytes": a.record, "seconds": a.seconds, **results}))
        finally:
            subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
