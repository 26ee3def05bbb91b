"""What the checker benchmarks measure beside seconds: the Spark driver JVM's CPU
time and peak memory, this process's peak memory, and the baseline's work of
reading every column of a table. Shared by `bench.engines.synthetic` (synthetic Parquet)
and `bench.engines.from_jsonl` (from history.jsonl)."""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import resource


def jvm_peak_rss(spark) -> int | None:
    """Peak resident memory (bytes) of the Spark driver JVM, from /proc."""
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except Exception:  # noqa: BLE001 - a measurement, not a result
        return None
    return None


def jvm_cpu_seconds(spark) -> float | None:
    """User + system CPU seconds the driver JVM has used (the machine is shared: wall time lies)."""
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except Exception:  # noqa: BLE001 - a measurement, not a result
        return None


def jvm_java_version(spark) -> str | None:
    """The driver JVM's Java (e.g. "25.0.3"): figures on 17 and 25 differ by ~10%
    (checkers.spark.java), so a bench's JSON says which one it measured."""
    try:
        return str(spark.sparkContext._jvm.java.lang.System.getProperty("java.version"))
    except Exception:  # noqa: BLE001 - a measurement, not a result
        return None


def workers_cpu_seconds(spark) -> float | None:
    """User + system CPU seconds of the JVM's Python workers (pyspark.daemon and its forks,
    running or exited: /proc's utime, stime, cutime and cstime of the JVM's descendants),
    which `jvm_cpu_seconds` does not count."""
    try:
        jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as handle:
                        stats[int(entry)] = handle.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
        below, frontier = set(), {jvm}
        while frontier:
            frontier = {pid for pid, f in stats.items() if int(f[1]) in frontier} - below
            below |= frontier
        ticks = sum(int(stats[pid][i]) for pid in below for i in (11, 12, 13, 14))
        return ticks / os.sysconf("SC_CLK_TCK")
    except Exception:  # noqa: BLE001 - a measurement, not a result
        return None


def python_peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def read_everything(frame) -> int:
    """The baseline's work on one table: decode every column of every row (a plain
    count() is answered from Parquet footers and reads nothing)."""
    from pyspark.sql import functions as F

    return frame.agg(F.count("*"), F.max(F.xxhash64(*frame.columns))).collect()[0][0]


def delta(after, before):
    return None if after is None or before is None else round(after - before, 1)


def gib(n):
    return None if n is None else round(n / 2 ** 30, 2)


PROFILE_TOP = 12


@contextlib.contextmanager
def profiled(into: dict, key: str, active: bool = True, top: int = PROFILE_TOP):
    """Profile the block with cProfile (this process only: for a Spark path, the driver's
    side, where the waits on the JVM show as py4j socket reads) and keep its `top`
    entries by own time in `into[key]`: what a reader of the bench's JSON needs to see
    where a path's time goes. Inactive: nothing (the timings carry no profiler overhead)."""
    if not active:
        yield
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        into[key] = top_entries(profile, top)


@contextlib.contextmanager
def task_profiles(into: dict, key: str, active: bool = True):
    """The Spark key pass's tasks profiled in their Python workers for the block
    (checkers.spark.key_pass.PROFILE_ENV), their summed top entries in `into[key]`:
    where a Spark check's time goes now that its work runs there. The bench profiles one
    more check for this, untimed: cProfile's cost on the search's many calls would show in
    a timed one."""
    if not active:
        yield
        return
    from checkers.spark import key_pass

    os.environ[key_pass.PROFILE_ENV] = "1"
    key_pass.last_profile.clear()
    try:
        yield
    finally:
        del os.environ[key_pass.PROFILE_ENV]
        into[key] = list(key_pass.last_profile)


def top_entries(profile: cProfile.Profile, top: int = PROFILE_TOP) -> list[dict]:
    stats = pstats.Stats(profile).stats  # (file, line, name) -> (calls, total calls, own, cumulative, callers)
    ranked = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return [{"function": f"{_short(path)}:{line}({name})", "calls": calls,
             "own_s": round(own, 3), "cumulative_s": round(cumulative, 3)}
            for (path, line, name), (_, calls, own, cumulative, _) in ranked]


def _short(path: str) -> str:
    for marker in ("site-packages/", "/lib/python"):
        if marker in path:
            return path.split(marker, 1)[1]
    try:
        return os.path.relpath(path)
    except ValueError:
        return path
