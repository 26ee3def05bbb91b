"""Turn results.json into plain words: the verdict sentence and one section per anomaly.

The reader is a person who did not write the checker: every anomaly type gets an
explanation of what it means for the data, and every example keeps the history
indices of its ops so the page can link to them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from checkers.vocabulary import VOCABULARY

# One vocabulary (checkers/vocabulary.py): what each name a checker emits means, and
# the words of the verdict sentence. tests/test_vocabulary.py checks both directions.
EXPLANATIONS = {a.name: a.explanation for a in VOCABULARY.values()}
PHRASES = {a.name: a.phrase for a in VOCABULARY.values()}
MAX_EXAMPLES = 25


@dataclass
class Anomaly:
    checker: str
    name: str
    count: int
    explanation: str
    columns: list[str]
    examples: list[dict[str, Any]]
    keys: list[Any] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return "anomaly-" + "".join(c if c.isalnum() else "-" for c in f"{self.checker}-{self.name}")


def _as_count(x: Any) -> int:
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, (int, float)):
        return int(x)
    if isinstance(x, (list, dict)):
        return len(x)
    return 0


def example_ops(example: Any) -> list[int]:
    """History indices an example refers to (``ops`` list, or a single ``op``)."""
    if not isinstance(example, dict):
        return []
    found = example.get("ops", [])
    found = found if isinstance(found, list) else [found]
    if "op" in example:
        found = found + [example["op"]]
    out = []
    for x in found:
        if isinstance(x, int) and not isinstance(x, bool):
            out.append(x)
        elif isinstance(x, dict) and isinstance(x.get("index"), int):
            out.append(x["index"])
    return out


def example_key(example: Any) -> Any:
    if isinstance(example, dict):
        for name in ("key", "partition"):
            if isinstance(example.get(name), (int, str)) and not isinstance(example.get(name), bool):
                return example[name]
    return None


def checker_sections(results: dict | None) -> dict[str, dict]:
    """The per-checker dicts of results.json, skipping anything that is not a dict."""
    checkers = (results or {}).get("checkers")
    return {str(k): v for k, v in checkers.items() if isinstance(v, dict)} if isinstance(checkers, dict) else {}


def collect(results: dict | None) -> list[Anomaly]:
    """Every anomaly type with a non-zero count or examples, in checker order."""
    found = []
    for checker, section in checker_sections(results).items():
        counts = section.get("counts") if isinstance(section.get("counts"), dict) else {}
        examples = section.get("examples") if isinstance(section.get("examples"), dict) else {}
        for name in list(dict.fromkeys([*counts, *examples])):
            exs = examples.get(name)
            exs = exs if isinstance(exs, list) else ([exs] if exs is not None else [])
            count = _as_count(counts.get(name)) if name in counts else len(exs)
            if count == 0 and not exs:
                continue
            shown = [e if isinstance(e, dict) else {"value": e} for e in exs[:MAX_EXAMPLES]]
            found.append(Anomaly(
                checker=checker, name=str(name), count=count,
                explanation=EXPLANATIONS.get(str(name), f"Reported by the {checker} checker."),
                columns=_columns(shown), examples=shown,
                keys=sorted({k for k in map(example_key, exs) if k is not None}, key=str)))
    return found


def _columns(examples: list[dict]) -> list[str]:
    first = ["key", "partition", "offset", "value", "values"]
    seen = list(dict.fromkeys(k for e in examples for k in e))
    cols = [c for c in first if c in seen] + [c for c in seen if c not in first and c not in ("ops", "op")]
    return cols + (["ops"] if any(example_ops(e) for e in examples) else [])


def referenced_ops(anomalies: list[Anomaly]) -> set[int]:
    return {i for a in anomalies for e in a.examples for i in example_ops(e)}


def anomaly_keys(anomalies: list[Anomaly]) -> list[Any]:
    """Partitions (history keys) that have an anomaly, as ints where possible."""
    keys = set()
    for a in anomalies:
        for k in a.keys:
            try:
                keys.add(int(k))
            except (TypeError, ValueError):
                continue
    return sorted(keys)


def gone_sentence(results: dict) -> str:
    """" The log of partition K was gone after recovery (...)" when the final phase found it so
    (the `absent` column of the flat end rows, checkers/log_anomalies.py); "" otherwise."""
    gone = ((results.get("checkers") or {}).get("log") or {}).get("absent") or {}
    if not gone:
        return ""
    keys = sorted(gone, key=lambda k: int(k) if str(k).isdigit() else 0)
    answers = sorted(set(gone.values()))
    return (f" The stream (log) of partition{'s' if len(keys) > 1 else ''} {', '.join(map(str, keys[:5]))}"
            f"{', ...' if len(keys) > 5 else ''} was gone after recovery: the healthy cluster answered "
            f"{cell_text(answers[0], 120)}, so every write acknowledged to it is lost.")


def verdict(results: dict | None, anomalies: list[Anomaly], n_ops: int) -> tuple[str, str]:
    """(css class, one sentence) for the banner."""
    if results is None:
        return "unknown", "No verdict: results.json is missing, so the checkers have not run on this store."
    valid = results.get("valid")
    names = ", ".join(checker_sections(results)) or "none recorded"
    if valid is True and not anomalies:
        return "valid", f"Valid: the checkers ({names}) found no anomaly in {n_ops:,} history ops."
    if valid is False or anomalies:
        parts = []
        for a in anomalies:
            where = ""
            if a.keys:
                shown = ", ".join(map(str, a.keys[:5])) + (", ..." if len(a.keys) > 5 else "")
                where = f" on partition{'s' if len(a.keys) > 1 else ''} {shown}"
            phrase = PHRASES.get(a.name, f"{{n}} {a.name} anomal{{ies}}")
            parts.append(phrase.format(n=f"{a.count:,}", s="" if a.count == 1 else "s",
                                       ies="y" if a.count == 1 else "ies") + where)
        if not parts:
            return "invalid", "Invalid: the checkers report the run invalid but give no anomaly detail."
        head = "Invalid" if valid is not True else "Valid overall, but"
        return "invalid", f"{head}: {'; '.join(parts)}.{gone_sentence(results)}"
    reasons = [f"{c}: {s.get('error') or s.get('reason') or 'unknown'}"
               for c, s in checker_sections(results).items() if s.get("valid") not in (True, False)]
    if results.get("error"):
        reasons.insert(0, str(results["error"]))
    detail = f" ({'; '.join(map(str, reasons))})" if reasons else ""
    return "unknown", f"Unknown: the checkers could not decide{detail}."


def cell_text(value: Any, limit: int = 300) -> str:
    """Compact text of an example cell; long values are cut."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit] + " ..."
