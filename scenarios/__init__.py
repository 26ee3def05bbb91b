"""The scenario library: scripted fault sequences that reproduce known
replication bugs every time (scenarios/README.md).

    list_scenarios() -> names of the library scripts (library/*.yaml)
    load_scenario(name_or_path) -> a validated Scenario, or ScenarioError (one line)
"""
from scenarios.script import Scenario, ScenarioError, list_scenarios, load_file, load_scenario

__all__ = ["Scenario", "ScenarioError", "list_scenarios", "load_file", "load_scenario"]
