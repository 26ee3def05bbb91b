"""The `harness` command line (typer). Thin: each command calls one function.
Errors are one line on stderr and exit code 2."""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from typer.core import TyperCommand

app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Jepsen-style fault-injection harness for Kafka-style replicated logs.")


class LogLevel(str, Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class ExportFormat(str, Enum):
    edn = "edn"
    jsonl = "jsonl"


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"harness {version('replog-harness')}")
        except PackageNotFoundError:
            typer.echo("harness (not installed: run scripts/setup.sh)")
        raise typer.Exit(0)


@app.callback()
def options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print the version and exit"),
    log_level: LogLevel = typer.Option(LogLevel.warning, "--log-level", envvar="HARNESS_LOG_LEVEL",
                                       case_sensitive=False,
                                       help="what the modules log to stderr (also HARNESS_LOG_LEVEL)"),
) -> None:
    """Jepsen-style fault-injection harness for Kafka-style replicated logs."""
    logging.basicConfig(level=log_level.value.upper(), format="%(levelname)s %(name)s: %(message)s")


def fail(msg: str, code: int = 2) -> None:
    typer.echo(f"harness: error: {msg}", err=True)
    raise typer.Exit(code)


def _entry(module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        fail(f"{module}.{name} is not available yet ({e})")


ENGINES = ("local", "spark")
ACKS = ("0", "1", "all")


def choice(*allowed: str):
    """A callback that refuses anything but ``allowed``: one line naming the flag (typer's BadParameter)."""
    def check(value):
        if value is not None and value not in allowed:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}")
        return value
    return check


def registered(group: str):
    """A callback that refuses names not registered in an entry-point group (harness/registry.py)."""
    def check(value):
        from harness import registry

        if value is not None and value not in registry.names(group):
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(registry.names(group))}")
        return value
    return check


def print_json(store: Path | None, code: int, results: dict | None = None) -> None:
    """For machines: the whole result with the verdict and the store path, one JSON document on stdout."""
    if results is None and store is not None:
        from harness.run_store import read_results

        results = read_results(store)
    doc = dict(results) if isinstance(results, dict) else {"valid": "unknown", "error": "no results.json"}
    doc.update(store=str(store) if store else None, exit_code=code)
    typer.echo(json.dumps(doc, default=str))


@contextlib.contextmanager
def stdout_to_stderr(active: bool):
    """With --json, whatever a command prints goes to stderr; yields the printed lines."""
    printed = io.StringIO()
    lines: list[str] = []
    with contextlib.redirect_stdout(printed if active else sys.stdout):
        yield lines
    if active:
        sys.stderr.write(printed.getvalue())
        lines += printed.getvalue().splitlines()


def campaign_json(path: Path | None, code: int) -> None:
    """A campaign folder's summary.json, or every run of a store root, as one JSON document."""
    if path is not None and (path / "summary.json").is_file():
        doc = json.loads((path / "summary.json").read_text())
    else:
        from harness.campaign.cli import run_code
        from harness.run_store import read_results

        runs = {}
        for hist in sorted(path.rglob("history.jsonl")) if path is not None else []:
            res = read_results(hist.parent) if "latest" not in hist.parts else None
            if res is not None:
                runs[str(hist.parent)] = {"valid": res.get("valid"), "exit_code": run_code(res)[0],
                                          "as_expected": (res.get("scenario") or {}).get("as_expected")}
        doc = {"runs": runs}
    doc.update(valid={0: True, 1: False}.get(code, "unknown"), store=str(path) if path else None, exit_code=code)
    typer.echo(json.dumps(doc, default=str))


def model_choice(value: str) -> str:
    """--model: a known linearizability model, with or without an initial value."""
    from checkers.linear.models import MODELS

    if value.partition(":")[0] not in MODELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(MODELS)} (optionally NAME:INITIAL)")
    return value


def ssh_options(hosts, ssh_user, ssh_key, known_hosts) -> dict:
    """The ssh backend's flags as spec backend_options (only those given)."""
    given = {"hosts": hosts.split(",") if hosts else None, "ssh_user": ssh_user,
             "ssh_key": str(ssh_key) if ssh_key else None,
             "known_hosts": str(known_hosts) if known_hosts else None}
    return {k: v for k, v in given.items() if v is not None}


def _systems() -> str:
    from harness import registry

    return " | ".join(registry.names(registry.SYSTEMS))


def _default_system() -> str:
    from harness.registry import DEFAULT_SYSTEM

    return DEFAULT_SYSTEM


def _comparison(system: str | None):
    """The `--compare` command of the system that offers one (System.compare); --sut picks
    among several. Exit 2 with one line when none (or the named one has none)."""
    from harness import registry

    try:
        offering = {n: s.compare for n, s in registry.load_all(registry.SYSTEMS).items() if s.compare}
    except registry.RegistryError as e:
        fail(str(e))
    if system is not None:
        offering = {n: c for n, c in offering.items() if n == system}
    if len(offering) > 1:
        fail(f"--compare: {len(offering)} systems offer a comparison ({', '.join(sorted(offering))}); "
             f"pick one with --sut")
    if not offering:
        what = f"system {system!r} offers none" if system else "no registered system offers one"
        fail(f"--compare: {what} (no comparison; a system offers one with System.compare, docs/extending.md)")
    module, _, function = next(iter(offering.values())).partition(":")
    return _entry(module, function)


def _roles(system: str | None) -> dict:
    """The role hosts a system adds to n1..nN ({} when the name is unknown: the spec says so)."""
    from harness import registry
    try:
        return dict(registry.system(system).roles)
    except registry.RegistryError:
        return {}


def _registered_names(group: str) -> str:
    """The registered names of a group for a --help text (harness/registry.py)."""
    from harness import registry

    return ", ".join(registry.names(group))


# Help texts that name what is registered say `{systems}`, `{replog.backends}`...: the
# names are filled in when a help page is shown (RegistryHelp), not when this module is
# imported. Why: finding installed entry points reads every installed package's metadata
# (~0.07 CPU-s, a fifth of `harness check-history`), which no other command needs.
def _registry_help(text: str) -> str:
    if "{" not in text:
        return text
    names = {"systems": _systems, "default_system": _default_system}

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name in names:
            return names[name]()
        return _registered_names(name) if name.startswith("replog.") else match.group(0)
    return re.sub(r"\{([a-z_.]+)\}", fill, text)


class RegistryHelp(TyperCommand):
    """A command whose options' help names registered systems, backends, workloads, faults."""

    def fill_registry_help(self) -> None:
        """Put the registered names into the options' help (also for docs/reference, harness.docs)."""
        for param in self.params:
            if getattr(param, "help", None):
                param.help = _registry_help(param.help)

    def format_help(self, ctx, formatter) -> None:
        self.fill_registry_help()
        super().format_help(ctx, formatter)


# -- options `run` and `scenario` share: one definition each ------------------------------------
SystemOpt = Annotated[Optional[str], typer.Option(
    "--sut", "--system", help="system under test: {systems} (default {default_system}); "
                              f"`scenario --list`: only its scenarios")]
VariantOpt = Annotated[Optional[str], typer.Option(
    "--variant", "--era", help="the system's variant (its variant option; `harness scenario --list` shows each "
                               "scenario's)")]
OptionOpt = Annotated[List[str], typer.Option(
    "--option", help="a system option key=value (the system's own names; over a scenario's), repeatable")]
BackendOpt = Annotated[Optional[str], typer.Option(
    help="cluster backend: {replog.backends} (default netns)",
    callback=registered("replog.backends"))]
SubnetOpt = Annotated[Optional[str], typer.Option(
    help="host subnet (netns default 10.210.0.0/24; docker: first free /24 of 10.211.0.0/16)")]
StoreOpt = Annotated[Optional[str], typer.Option("--store", help="store root directory (default ./store)")]
HostsOpt = Annotated[Optional[str], typer.Option(help="ssh backend: comma list of existing hosts, controller first")]
SshUserOpt = Annotated[Optional[str], typer.Option(help="ssh backend: login user")]
SshKeyOpt = Annotated[Optional[Path], typer.Option(help="ssh backend: private key file")]
KnownHostsOpt = Annotated[Optional[Path], typer.Option(help="ssh backend: known_hosts file with every host's key")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print results.json with the store path as one JSON document")]
JunitOpt = Annotated[Optional[Path], typer.Option("--junit", help="also write the verdict as JUnit XML to this file")]


@app.command(cls=RegistryHelp)
def run(
    spec_file: Optional[Path] = typer.Option(None, "--spec", help="YAML spec file; flags override it"),
    system: SystemOpt = None,
    variant: VariantOpt = None,
    option: OptionOpt = [],
    storage: Optional[str] = typer.Option(None, hidden=True, help="deprecated: --option storage=..."),
    workload: Optional[str] = typer.Option(None, help="the workload: {replog.workloads} "
                                           f"(default log; docs/workloads.md)", callback=registered("replog.workloads")),
    workload_option: List[str] = typer.Option([], "--workload-option",
                                              help="a workload option key=value, repeatable (each workload's options and their "
                                                   "defaults: docs/reference/faults.md)"),
    nemesis: Optional[str] = typer.Option(None, help="comma list of faults: {replog.faults} "
                                          f"(default none; docs/reference/faults.md says which systems support each)"),
    nemesis_interval: Optional[float] = typer.Option(None, help="seconds per fault and between faults (default 10)"),
    nemesis_mode: Optional[str] = typer.Option(None, help="random | targeted: faults aimed by the sampled state "
                                               "(leader, a follower whose HW moved, ...; default random)",
                                               callback=choice("random", "targeted")),
    time_limit: Optional[float] = typer.Option(None, help="workload seconds (default 60)"),
    seed: Optional[int] = typer.Option(None, help="seed of the fault schedule and the workload"),
    nodes: Optional[int] = typer.Option(None, help="broker hosts, 1..5 (default 3)"),
    keys: Optional[int] = typer.Option(None, help="partitions = history keys (default 3)"),
    concurrency: Optional[int] = typer.Option(None, help="client processes (default 10)"),
    rate: Optional[float] = typer.Option(None, help="target ops/s over all clients (default 100)"),
    acks: Optional[str] = typer.Option(None, help="0 | 1 | all (default all)", callback=choice(*ACKS)),
    backend: BackendOpt = None,
    subnet: SubnetOpt = None,
    hosts: HostsOpt = None,
    ssh_user: SshUserOpt = None,
    ssh_key: SshKeyOpt = None,
    known_hosts: KnownHostsOpt = None,
    name: Optional[str] = typer.Option(None, help="test name (default <workload>-<variant>)"),
    store_root: StoreOpt = None,
    set_: List[str] = typer.Option([], "--set", help="a system setting key=value (its own names), repeatable"),
    no_check: bool = typer.Option(False, "--no-check", help="skip the checkers (exit 2)"),
    json_out: JsonOpt = False,
    junit: JunitOpt = None,
):
    """Create a cluster, run the workload under faults, check the history."""
    from harness.runner import Run, RunError
    from harness.spec import SpecError, build_spec, parse_options, parse_settings
    from harness.run_store import StoreError

    try:
        settings = parse_settings(set_) if set_ else None
        options = {**({"storage": storage} if storage else {}), **parse_options(option)}
        if hosts and nodes is None:  # the system's role hosts (e.g. a controller) come first
            nodes = len(hosts.split(",")) - len(_roles(system))
        workload_options = parse_settings(workload_option, "--workload-option") if workload_option else None
        spec = build_spec(str(spec_file) if spec_file else None, system=system, variant=variant, nemesis=nemesis,
                          system_options=options or None, workload=workload, workload_options=workload_options,
                          nemesis_interval=nemesis_interval, nemesis_mode=nemesis_mode, time_limit=time_limit, seed=seed, nodes=nodes,
                          keys=keys, concurrency=concurrency, rate=rate, acks=acks, backend=backend,
                          subnet=subnet, name=name, store_root=store_root,
                          check=False if no_check else None)
        if settings:
            spec.settings.update(settings)
        spec.backend_options.update(ssh_options(hosts, ssh_user, ssh_key, known_hosts))
        r = Run(spec)
        code = r.execute()
    except (SpecError, RunError, StoreError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"{type(e).__name__}: {e}")
    if json_out:
        print_json(r.store, code)
    elif r.store is not None:
        typer.echo(str(r.store))
    if junit is not None:
        from harness import junit as junit_xml
        junit_xml.write(junit, "harness run", [junit_xml.run_case(r.store)])
    raise typer.Exit(code)


@app.command()
def check(
    store: Path = typer.Argument(..., help="a run directory, e.g. store/latest, or a lone history "
                                 "file (history.jsonl, Jepsen's history.edn)"),
    engine: str = typer.Option("local", help="local | spark", callback=choice(*ENGINES)),
    master: Optional[str] = typer.Option(None, help="Spark master (default local[2])"),
    json_out: bool = typer.Option(False, "--json", help="print results.json with the store path as one JSON document"),
):
    """Re-check a store (also a partial one): writes results.json. A history file is
    checked as it is (nothing written)."""
    from harness import verdict
    from harness.run_store import StoreError, validate_store

    if store.is_file():
        _check_history_file(store, engine, master, json_out)
    if store.suffix in (".edn", ".jsonl") and not store.exists():
        fail(f"{store}: no such file; pass a history.jsonl or history.edn, or a run directory")
    try:
        path = validate_store(store)
    except StoreError as e:
        fail(str(e))
    if engine not in ("local", "spark"):
        fail(f"--engine {engine!r}: use local or spark")
    try:
        results = verdict.check_store(path, engine=engine, master=master)
    except ValueError as e:  # bad input: a malformed history line, an unreachable master
        fail(str(e))
    except Exception as e:
        fail(f"checking {path} failed: {type(e).__name__}: {e}")
    typer.echo(verdict.summary(results), err=json_out)
    if json_out:
        print_json(path, verdict.exit_code(results), results)
    raise typer.Exit(verdict.exit_code(results))


def _check_history_file(path: Path, engine: str, master: Optional[str], json_out: bool) -> None:
    """`harness check FILE`: the history checkers on a lone history; exits."""
    from checkers.check_store import check_history_file
    from harness import verdict

    try:
        results = check_history_file(str(path), engine=engine, master=master)
    except ValueError as e:  # a malformed line, an unknown file type, an unreachable master
        fail(str(e))
    except Exception as e:
        fail(f"checking {path} failed: {type(e).__name__}: {e}")
    typer.echo(verdict.summary(results), err=json_out)
    if json_out:
        print_json(path, verdict.exit_code(results), results)
    raise typer.Exit(verdict.exit_code(results))


@app.command()
def cleanup(
    run_id: Optional[str] = typer.Option(None, "--run", help="only this run id"),
    all_: bool = typer.Option(False, "--all", help="also runs whose harness is still alive"),
):
    """Remove what crashed runs left behind (namespaces, links, rules, processes)."""
    from harness import cleanup as c

    removed = c.cleanup(run_id=run_id, include_live=all_, say=typer.echo)
    try:  # the docker backend labels its containers and networks instead
        from harness.cluster.docker import cleanup_docker
    except ImportError:
        cleanup_docker = None
    if cleanup_docker is not None:
        removed += cleanup_docker(run_id=run_id, include_live=all_)
    for item in removed:
        typer.echo(f"removed {item}")
    typer.echo(f"cleanup: {len(removed)} resources removed")


@app.command("check-history")
def check_history(
    file: Path = typer.Argument(..., help="history.jsonl or history.edn"),
    model: str = typer.Option(..., "--model", help="register | cas-register | multi-register | mutex | kv | log, "
                              "optionally NAME:<EDN initial value> (cas-register:0)", callback=model_choice),
    engine: str = typer.Option("local", help="local | spark", callback=choice(*ENGINES)),
    master: Optional[str] = typer.Option(None),
    time_limit: Optional[float] = typer.Option(None, help="seconds before giving up (unknown)"),
    out: Optional[Path] = typer.Option(None, "--out", help="the HTML page (default: NAME.linearizability.html beside the history)"),
    json_out: bool = typer.Option(False, "--json", help="print the whole result as one JSON document"),
):
    """Linearizability check of one history file; writes a Porcupine-style page."""
    from harness import verdict

    if not file.is_file():
        fail(f"{file}: no such file; pass a history.jsonl or history.edn")
    check_file = _entry("checkers.linear", "check_file")
    try:
        res = check_file(str(file), model, engine=engine, master=master, time_limit=time_limit)
    except ValueError as e:
        fail(str(e))
    linear_page = importlib.import_module("reports.linear_page")
    try:
        res["page"] = linear_page.page_for_file(file, res, out)
    except OSError as e:
        fail(f"cannot write the page: {e}; pass --out to a writable place")
    if json_out:
        typer.echo(json.dumps(res, default=str))
        typer.echo(f"page {res['page']}", err=True)
    else:
        typer.echo(linear_page.summary(res))
        typer.echo(f"page {res['page']}")
    raise typer.Exit(verdict.exit_code(res))


@app.command()
def report(store: Path = typer.Argument(..., help="a run directory")):
    """Build report.html for a store."""
    from harness.run_store import StoreError, validate_store

    try:
        path = validate_store(store)
    except StoreError as e:
        fail(str(e))
    build = _entry("reports", "build_report")
    typer.echo(str(build(str(path))))


def _bench_entries():
    """The benchmarks are not installed (bench/ beside the packages): run from a checkout."""
    from harness.run_store import REPO_DIR

    if not (REPO_DIR / "bench" / "engines").is_dir():
        fail(f"harness bench runs from a checkout: {REPO_DIR}/bench/engines is missing")
    if str(REPO_DIR) not in sys.path:
        sys.path.insert(0, str(REPO_DIR))
    return (_entry("bench.engines.synthetic", "run_bench"), _entry("bench.engines.from_jsonl", "run_jsonl_bench"))


@app.command()
def bench(
    sizes: str = typer.Option("1000000,10000000", help="comma list of history sizes (ops)"),
    keys: int = typer.Option(1000, help="keys (partitions) of the synthetic histories"),
    out: Path = typer.Option(Path("bench/out"), help="where the synthetic Parquet data goes"),
    master: Optional[str] = typer.Option(None, help="Spark master (default local[2])"),
    local_max_ops: int = typer.Option(1_000_000, help="largest size also timed in-process"),
    inject: int = typer.Option(1, help="anomalies of each type injected per size"),
    seed: int = typer.Option(0, help="seed of the generator"),
    repeat: int = typer.Option(1, help="checks per size in one session; the last is reported (2: warm)"),
    profile: bool = typer.Option(True, "--profile/--no-profile",
                                 help="keep each path's top cProfile entries in the JSON (profile_top)"),
    from_jsonl: str = typer.Option("", "--from-jsonl",
                                   help="also from a history.jsonl of these many lines (comma list): convert, check, end to end"),
):
    """Checker benchmark: synthetic histories and dumps, both drivers timed against a same-run baseline."""
    run_bench, run_jsonl_bench = _bench_entries()
    size_list, jsonl_list = [], []
    for option, text, out_list in (("--sizes", sizes, size_list), ("--from-jsonl", from_jsonl, jsonl_list)):
        try:
            out_list += [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            fail(f"{option} {text!r}: give whole numbers separated by commas, e.g. 1000000,10000000")
    try:
        res = run_bench(sizes=size_list, keys=keys, out_dir=str(out), master=master,
                        local_max_ops=local_max_ops, inject=inject, seed=seed, repeat=repeat,
                        profile=profile)
        if jsonl_list:
            res["from_jsonl"] = run_jsonl_bench(jsonl_list, keys=keys, out_dir=str(out),
                                                master=master, inject=inject, seed=seed, profile=profile)
    except ValueError as e:
        fail(str(e))
    typer.echo(json.dumps(res, indent=2, default=str))


campaign_app = typer.Typer(no_args_is_help=True, help="Campaigns: a matrix of runs, checked in one Spark job.")
app.add_typer(campaign_app, name="campaign")


@campaign_app.command("run")
def campaign_run(
    file: Path = typer.Argument(..., help="campaign file, e.g. campaigns/smoke.yaml"),
    store_root: str = typer.Option("store", "--store", help="store root; the campaign goes to STORE/campaigns/NAME/TIME"),
    resume: bool = typer.Option(False, "--resume", help="continue the last unfinished campaign of this file"),
    parallel: int = typer.Option(1, "--parallel", help="runs at once (netns runs get their own /24 each)"),
    budget: Optional[str] = typer.Option(None, "--budget", help="start no run that would end after this, e.g. 2h"),
    runs_per_cell: Optional[int] = typer.Option(None, "--runs-per-cell", help="runs per cell (overrides seeds/runs)"),
    stop_on_first_invalid: bool = typer.Option(False, "--stop-on-first-invalid",
                                               help="start no more runs once a run contradicts its cell (invalid where valid is expected)"),
    junit: Optional[Path] = typer.Option(None, "--junit", help="also write JUnit XML here (always: CAMPAIGN/junit.xml)"),
    master: Optional[str] = typer.Option(None, help="Spark master of the final check (default local[2])"),
    subnets: Optional[str] = typer.Option(None, "--subnets", help="pool of /24s for parallel netns runs (overrides the file)"),
    engine: str = typer.Option("auto", help="final check: auto (local under 128 MiB of history, else spark) | spark (one job for all runs) | local (in-process)"),
    json_out: bool = typer.Option(False, "--json", help="print summary.json with the campaign folder as one JSON document"),
):
    """Run a campaign: exit 0 every cell as expected, 1 some cell not, 2 could not run."""
    from harness.campaign.cli import run_command
    from harness.campaign.execute import Options

    with stdout_to_stderr(json_out) as printed:
        code = run_command(str(file), Options(
            store_root=store_root, resume=resume, parallel=parallel, budget=budget, runs_per_cell=runs_per_cell,
            stop_on_first_invalid=stop_on_first_invalid, junit=str(junit) if junit else None, master=master,
            subnets=subnets, engine=engine))
    if json_out:  # the last line printed is the campaign page, in the campaign folder
        campaign_json(Path(printed[-1]).parent if printed and Path(printed[-1]).exists() else None, code)
    raise typer.Exit(code)


@campaign_app.command("check")
def campaign_check(
    path: Path = typer.Argument(..., help="a campaign folder (STORE/campaigns/NAME/TIME) or a store root"),
    master: Optional[str] = typer.Option(None, help="Spark master (default local[2])"),
    engine: str = typer.Option("auto", help="auto (local under 128 MiB of history, else spark) | spark (one job for all runs) | local (in-process)"),
    json_out: bool = typer.Option(False, "--json", help="print the campaign's summary (or every run's verdict) as one JSON document"),
):
    """Check every run of a campaign folder (or below a store root): in-process, or in one Spark job.
    A scenario run passes when its outcome is the one its scenario expects."""
    from harness.campaign.cli import check_command

    with stdout_to_stderr(json_out):
        code = check_command(str(path), master, engine)
    if json_out:
        campaign_json(path.resolve() if path.is_dir() else None, code)
    raise typer.Exit(code)


@app.command()
def serve(
    store: Path = typer.Argument(Path("store"), help="a store root"),
    port: int = typer.Option(8080, help="port on 127.0.0.1 (0: any free port)"),
):
    """Browse a store root over HTTP on 127.0.0.1."""
    from harness.serve import serve as serve_store

    if not store.is_dir():
        fail(f"{store} is not a directory; give a store root such as ./store")
    try:
        serve_store(store, port, announce=typer.echo)
    except OSError as e:
        fail(f"cannot listen on 127.0.0.1:{port} ({e.strerror}); pick another --port")


@app.command(cls=RegistryHelp)
def scenario(
    name: Optional[str] = typer.Argument(None, help="a library scenario (see --list)"),
    variant: VariantOpt = None,
    system: SystemOpt = None,
    file: Optional[Path] = typer.Option(None, "--file", help="your own scenario script (YAML)"),
    list_: bool = typer.Option(False, "--list", help="list the library with the expected verdicts"),
    backend: BackendOpt = None,
    expect: bool = typer.Option(False, "--expect", help="exit 0 iff the verdict is the declared one (CI)"),
    store_root: StoreOpt = None,
    subnet: SubnetOpt = None,
    hosts: HostsOpt = None,
    ssh_user: SshUserOpt = None,
    ssh_key: SshKeyOpt = None,
    known_hosts: KnownHostsOpt = None,
    json_out: JsonOpt = False,
    junit: JunitOpt = None,
    option: OptionOpt = [],
    compare: bool = typer.Option(False, "--compare",
                                 help="NAME (or all) on the default system's model and on the system that offers "
                                      "the comparison (--sut picks one), side by side"),
    runs: int = typer.Option(1, "--runs", help="--compare: runs per variant and release"),
    from_store: bool = typer.Option(False, "--from-store", help="--compare: only the table of the runs in --store"),
):
    """Run a scripted fault scenario (docs/scenarios.md)."""
    backend = backend or "netns"
    store_root = store_root or "store"
    if compare:
        compare_command = _comparison(system)
        raise typer.Exit(compare_command(name, store_root, runs=runs, from_store=from_store, subnet=subnet,
                                         backend=backend))
    run_command = _entry("scenarios.cli", "run_command")
    with stdout_to_stderr(json_out) as lines:  # the store path is the last line printed
        code = run_command(name, str(file) if file else None, variant, list_=list_, backend=backend, system=system,
                           expect=expect, store_root=store_root, subnet=subnet,
                           backend_options=ssh_options(hosts, ssh_user, ssh_key, known_hosts),
                           junit=str(junit) if junit else None, options=option)
    if json_out:
        print_json(Path(lines[-1]) if lines and Path(lines[-1]).is_dir() else None, code)
    raise typer.Exit(code)


@app.command()
def index(
    root: Path = typer.Argument(Path("store"), help="a store root"),
    build_missing: bool = typer.Option(False, "--build-missing", help="also build the report of every run without one"),
):
    """Write ROOT/index.html over every run below a store root."""
    if not root.is_dir():
        fail(f"{root} is not a directory; give a store root such as ./store")
    typer.echo(_entry("reports", "build_index")(str(root), build_missing=build_missing))


@app.command()
def export(
    store: Path = typer.Argument(..., help="a run directory, e.g. store/latest"),
    format_: ExportFormat = typer.Option(ExportFormat.edn, "--format",
                                         help="edn: Jepsen's history.edn (Jepsen's and Elle's checkers read it)"),
    out: Optional[Path] = typer.Option(None, "--out", help="output file (default STORE/history.FORMAT)"),
):
    """Write the run's history in another format."""
    from harness.run_store import StoreError, validate_store

    try:
        path = validate_store(store)
    except StoreError as e:
        fail(str(e))
    history = importlib.import_module("history.formats")
    target = out or path / f"history.{format_.value}"
    if target.resolve() == (path / "history.jsonl").resolve():
        fail(f"--out {target} is the run's own history; pick another file")
    try:
        ops = history.read_history(str(path / "history.jsonl"))
        (history.write_edn if format_ is ExportFormat.edn else history.write_jsonl)(ops, str(target))
    except history.HistoryError as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot write {target}: {e.strerror}; pass --out to a writable place")
    typer.echo(str(target))


@app.command()
def repeat(
    runs: int = typer.Option(10, help="runs of each asserted cell"),
    only: List[str] = typer.Option([], "--only", help="only this scenario, repeatable"),
    store_root: str = typer.Option("store-repeat", "--store", help="store root of the runs"),
    subnet: str = typer.Option("10.214.3.0/24", help="host subnet of the runs"),
):
    """Run every asserted cell of the scenario table N times: counts and medians."""
    repeat_main = _entry("scenarios.repeat", "main")
    argv = ["--runs", str(runs), "--store", store_root, "--subnet", subnet]
    for name in only:
        argv += ["--only", name]
    raise typer.Exit(repeat_main(argv))


def main() -> None:
    """Run the CLI; a usage error (unknown flag, bad value) is one line naming the flag, exit 2."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as e:  # typer's click: UsageError, BadParameter, NoSuchOption ...
        if e.format_message():  # (no arguments: the help was shown)
            typer.echo(f"harness: error: {e.format_message()}", err=True)
        sys.exit(2)
    except typer.Abort:
        typer.echo("harness: interrupted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
