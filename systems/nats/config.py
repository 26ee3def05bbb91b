"""One nats-server configuration file per node: a JetStream cluster with
routes between all nodes, a JetStream store directory per node and the node's
host name as server name (so stream info names leaders and replicas the way
the harness names hosts).

The same file for every server version: nats-server 2.9.10 (Debian bookworm)
rejects the `sync_interval` setting that 2.10 added, so it is written only
when the system option asks for it (refused for 2.9 at validation), and
otherwise the store keeps JetStream's built-in flush policy (acknowledge on
Raft commit, fsync in the background every 2 minutes).
"""
from __future__ import annotations

from dataclasses import dataclass

CLIENT_PORT = 4222
CLUSTER_PORT = 6222
MONITOR_PORT = 8222
CLUSTER_NAME = "replog"

# Settings the harness passes straight into the server's configuration (name
# -> how the value is written). Anything else is refused at validation.
SETTINGS = {
    "max_payload": int,
    "max_memory_store": int,   # bytes
    "max_file_store": int,     # bytes
    "ping_interval": str,      # client/route keepalive, e.g. "2s"
    "ping_max": int,
    "write_deadline": str,
}
REJECTED = {"sync_interval": "it is the system option sync_interval (system_options: {version: 2.12.1, "
                             "sync_interval: always}); nats-server 2.9.10 rejects it"}


@dataclass(frozen=True)
class NodeAddress:
    name: str
    host: str


def check_settings(settings: dict) -> None:
    """ValueError (one line) for a setting the server would not take."""
    for key, value in settings.items():
        if key in REJECTED:
            raise ValueError(f"setting {key!r}: {REJECTED[key]}")
        if key not in SETTINGS:
            raise ValueError(f"unknown nats-server setting {key!r} (known: {', '.join(sorted(SETTINGS))})")
        try:
            SETTINGS[key](value)
        except (TypeError, ValueError):
            raise ValueError(f"setting {key!r}: {value!r} is not a {SETTINGS[key].__name__}") from None


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(node: NodeAddress, peers: list[NodeAddress], store_dir: str, settings: dict | None = None,
           sync_interval: str | None = None) -> str:
    """The configuration file of `node` (peers: every node, itself included)."""
    routes = ", ".join(f"nats-route://{p.host}:{CLUSTER_PORT}" for p in peers if p.name != node.name)
    lines = [
        f"server_name: {_value(node.name)}",
        f"listen: {_value(f'{node.host}:{CLIENT_PORT}')}",
        f"http: {_value(f'{node.host}:{MONITOR_PORT}')}",
    ]
    lines += [f"{k}: {_value(v)}" for k, v in sorted((settings or {}).items())
              if k not in ("max_memory_store", "max_file_store")]
    js = [f"  store_dir: {_value(store_dir)}"]
    js += [f"  {k}: {_value((settings or {})[k])}" for k in ("max_memory_store", "max_file_store")
           if k in (settings or {})]
    if sync_interval is not None:  # 2.10+: JetStream's fsync policy ("always": before every acknowledgement)
        js.append(f"  sync_interval: {_value(sync_interval)}")
    lines += ["jetstream {", *js, "}"]
    if len(peers) < 2:  # one node: plain JetStream, no cluster to form
        return "\n".join(lines) + "\n"
    lines += [
        "cluster {",
        f"  name: {CLUSTER_NAME}",
        f"  listen: {_value(f'{node.host}:{CLUSTER_PORT}')}",
        f"  routes: [{routes}]" if routes else "  routes: []",
        "}",
    ]
    return "\n".join(lines) + "\n"
