"""The report's Configuration section: what a reader needs to know about a run (system and
variant, client, backend, nodes, workload, nemesis and mode, seed, time limit, settings and
options), read from test.json; everything else test.json holds (the fault table, the final
reads' internals, ...) goes to one folded raw block below it, not up front."""
from __future__ import annotations

import json
from typing import Any

# test.json fields the summary shows (or that say nothing a reader needs twice)
SHOWN = {"name", "system", "variant", "era", "system_options", "workload", "workload_options", "backend", "subnet", "backend_options",
         "nodes", "nemesis", "nemesis_mode", "nemesis_interval", "seed", "time_limit", "recovery_timeout", "keys",
         "concurrency", "rate", "acks", "replication_factor", "settings", "run_id", "start"}


def _pairs(options: Any) -> str:
    if not isinstance(options, dict) or not options:
        return "none"
    return ", ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in options.items())


def _nodes(test: dict) -> str:
    nodes = test.get("nodes")
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        return f"{nodes}: n1..n{nodes}" if nodes > 1 else "1: n1"
    return ", ".join(map(str, nodes)) if isinstance(nodes, list) else "?"


def _seconds(value: Any) -> str:
    return f"{value:g} s" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def summary(test: dict, scenario: str | None = None) -> list[tuple[str, str]]:
    """(label, value) rows of the run's parameters, in the order a reader asks for them; a
    scenario's run says its faults come from the script."""
    from harness import registry

    system = test.get("system") or registry.DEFAULT_SYSTEM
    options = dict(test.get("system_options") or {})
    variant = test.get("variant") or test.get("era")
    try:
        variant_option = registry.system(system).variant_option
    except registry.RegistryError:
        variant_option = None
    if variant_option is not None:
        variant = variant or options.get(variant_option)
        options.pop(variant_option, None)
    nemesis = test.get("nemesis") or []
    nemesis = nemesis.split(",") if isinstance(nemesis, str) else nemesis
    faults = ", ".join(map(str, nemesis)) if isinstance(nemesis, list) and nemesis else "none"
    if scenario and faults == "none":
        faults = f"the steps of scenario {scenario}"
    elif faults != "none":
        faults += f" ({test.get('nemesis_mode') or 'random'}" + (
            f", every {_seconds(test['nemesis_interval'])})" if "nemesis_interval" in test else ")")
    backend = str(test.get("backend") or "?")
    hosts = (test.get("backend_options") or {}).get("hosts") if isinstance(test.get("backend_options"), dict) else None
    if hosts:
        backend += f" (hosts {', '.join(map(str, hosts))})"
    elif test.get("subnet"):
        backend += f" (subnet {test['subnet']})"
    rf = test.get("replication_factor")
    client = ", ".join(part for part, field in (
        (f"{test.get('concurrency')} process{'es' if test.get('concurrency') != 1 else ''}", "concurrency"), (f"{test.get('rate')} ops/s", "rate"),
        (f"{test.get('keys')} keys", "keys"), (f"acks={test.get('acks')}", "acks"),
        (f"replication factor {rf}", "replication_factor")) if test.get(field) is not None) or "?"
    workload = test.get("workload") or "log"
    if isinstance(workload, dict):
        workload = workload.get("name") or "?"
    if test.get("workload_options"):
        workload = f"{workload} ({_pairs(test['workload_options'])})"
    rows = [
        ("system", f"{system}" + (f", variant {variant}" if variant else "")),
        ("system options", _pairs(options)),
        ("settings", _pairs(test.get("settings"))),
        ("workload", str(workload)),
        ("client", client),
        ("backend", backend),
        ("nodes", _nodes(test)),
        ("nemesis", faults),
        ("seed", str(test.get("seed")) if test.get("seed") is not None else "random"),
        ("time limit", f"{_seconds(test.get('time_limit'))} of workload, then the final phase" + (
            f" (recovery timeout {_seconds(test['recovery_timeout'])})" if "recovery_timeout" in test else "")),
        ("test", ", ".join(str(part) for part in (test.get("name"), test.get("run_id") and f"run {test['run_id']}",
                                                   test.get("start") and f"started {test['start']}") if part)),
    ]
    return rows


def rest(test: dict) -> str:
    """Every other field of test.json, as indented JSON ("" when there is none)."""
    others = {k: v for k, v in test.items() if k not in SHOWN}
    return json.dumps(others, indent=2, default=str, sort_keys=True) if others else ""
