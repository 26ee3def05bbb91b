"""`harness scenario`: list, run a library scenario, or run a user's script.

Exit codes: the verdict's (0 valid, 1 invalid, 2 unknown or error); with
`expect=True`, 0 when the observed verdict is the one the scenario declares
for the variant (and 1 otherwise, 2 on errors), for CI.
"""
from __future__ import annotations

import sys

from scenarios.script import ScenarioError, list_scenarios, load_file, load_scenario


def _err(msg: str) -> int:
    print(f"harness: error: {msg}", file=sys.stderr)
    return 2


def describe_library(system: str | None = None) -> str:
    lines = []
    for name in list_scenarios():
        try:
            s = load_scenario(name)
        except ScenarioError as e:
            lines.append(f"{name}: INVALID: {e}")
            continue
        if system is not None and s.system != system:
            continue
        exp = ", ".join(f"{variant}={_short(s.expect[variant])}" if variant in s.expect else f"{variant}=not asserted"
                        for variant in s.variant_names())
        first = s.description.strip().splitlines()[0] if s.description.strip() else ""
        lines.append(f"{name:<20} {exp}\n{'':<20} {first}")
    return "\n".join(lines)


def _short(e) -> str:
    if e.valid is True:
        return "valid"
    if e.valid is False:
        return "invalid(" + ",".join(e.anomalies) + ")" if e.anomalies else "invalid"
    return "unknown"


def run_command(name: str | None, file: str | None, variant: str | None, list_: bool = False,
                backend: str = "netns", expect: bool = False, store_root: str = "store",
                subnet: str | None = None, check: bool = True, backend_options: dict | None = None,
                junit: str | None = None, system: str | None = None, options: list[str] | None = None) -> int:
    if list_:
        print(describe_library(system))
        return 0
    if bool(name) == bool(file):
        return _err("give a scenario NAME (see `harness scenario --list`) or --file FILE.yaml, not both")
    try:
        scenario = load_file(file) if file else load_scenario(name)
    except ScenarioError as e:
        return _err(str(e))
    if system is not None and system != scenario.system:
        return _err(f"{scenario.name} is a scenario of system {scenario.system!r}, not {system!r}; "
                    f"see `harness scenario --list --sut {system}`")
    variants = scenario.variant_names()
    flag = "--variant"
    if variant is None and variants:
        return _err(f"give the {scenario.system_def().variant_option or 'variant'}: {flag} {' | '.join(variants)}")
    if variant is not None and variant not in variants:
        return _err(f"{flag} {variant!r}: use one of {', '.join(variants) or '(none: leave it out)'}")
    if expect and variant not in scenario.expect:
        return _err(f"{scenario.name} declares no verdict for variant {variant}; run without --expect")
    from harness.runner import Run, RunError
    from harness.spec import SpecError
    from scenarios.program import ScenarioProgram, scenario_spec
    from scenarios.script import check_run_hosts

    try:
        from harness.spec import parse_options
        spec = scenario_spec(scenario, variant, backend=backend, store_root=store_root, subnet=subnet, check=check,
                             backend_options=backend_options, options=parse_options(options or []))
        check_run_hosts(scenario, variant, spec.system_options, spec.settings)
        run = Run(spec, ScenarioProgram(scenario, variant))
        code = run.execute()
    except (SpecError, RunError, ValueError) as e:
        return _err(str(e).splitlines()[0])
    if run.store is not None:
        print(str(run.store))
    if junit:
        from harness import junit as junit_xml
        junit_xml.write(junit, "harness scenario", [junit_xml.run_case(run.store, f"{scenario.name}/{variant}")])
    if run.step_error:
        return _err(run.step_error)
    if run.results is None:
        return 2
    if expect:
        return 0 if run.results["scenario"]["as_expected"] else 1
    return code
