"""Helpers for tests that build real netns clusters."""
from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import threading

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


def new_run_id() -> str:
    return "t" + secrets.token_hex(2) + "x"  # 6 chars, like the runner's ids


def in_client_thread(cluster, coro_fn, *args):
    """coro_fn(*args) in a fresh event loop on a thread inside the cluster's client
    network (setns is per thread, so the test's own thread stays where it is)."""
    box = {}

    def target():
        try:
            cluster.enter_client_network()
            box["value"] = asyncio.run(coro_fn(*args))
        except BaseException as e:  # re-raised in the test's thread
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def tcp_probe(remote, host: str, port: int, timeout: float = 1.5) -> bool:
    """Can `remote` open a TCP connection to host:port?"""
    code = f"import socket; socket.create_connection(({host!r}, {port}), timeout={timeout})"
    return remote.run([sys.executable, "-c", code], check=False, timeout=timeout + 10).returncode == 0


def leftovers(run_id: str) -> list[str]:
    """Namespaces, links, host iptables rules and processes that mention run_id."""
    out = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out += [l for l in ns.splitlines() if run_id in l]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    out += [l for l in links.splitlines() if run_id in l]
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    out += [l for l in rules.splitlines() if run_id in l]
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    out += [l for l in ps.splitlines() if f"hx-{run_id}" in l and "ps -eo" not in l]
    return out
