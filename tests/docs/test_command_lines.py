"""Every `harness ...` command line the README and the docs show is parsed by the CLI itself
(its typer app, as `harness` would parse it, without running it): an unknown command, an
unknown option or a value a flag refuses fails the suite. A line that leaves out a required
argument is a mention (`harness check-history` in prose) and passes; placeholders (`...`,
`[optional parts]`, `a|b` alternatives) are read as the doc means them."""
from __future__ import annotations

import contextlib
import functools
import io
import re
import shlex
from pathlib import Path

import pytest
import typer

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^\s*```")
INLINE = re.compile(r"`((?:\.venv/bin/)?harness [^`]+)`")
# typer's completion flags act when parsed (they install completion): known, not parsed
NOT_PARSED = {"--install-completion", "--show-completion"}


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def command_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, command) for every harness command line of a Markdown file."""
    found, fence = [], False
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fence = not fence
            continue
        if fence:
            text = re.sub(r"^\$ ", "", line.split(" #")[0].strip())  # a shell prompt
            if re.match(r"(\.venv/bin/)?harness ", text):
                found += [(number, part) for part in re.split(r" / (?=harness )", text)]
        else:
            found += [(number, m.group(1)) for m in INLINE.finditer(line)]
    return found


def words(command: str) -> list[str]:
    """The argv a reader would type for a documented line."""
    command = re.sub(r"^\.venv/bin/", "", command).replace("[", " ").replace("]", " ")
    out = []
    for word in shlex.split(command)[1:]:
        if word in ("...", "…") or word in NOT_PARSED:
            continue
        out.append(word.split("|")[0] if "|" in word and not word.startswith("|") else word)
    return out


@functools.cache
def cli():
    from harness.cli import app

    return typer.main.get_command(app)


def parse(argv: list[str]) -> None:
    """What `harness` does with argv up to running the command: raises the CLI's usage errors."""
    root = cli()
    with contextlib.redirect_stdout(io.StringIO()):
        ctx = root.make_context("harness", list(argv))
        command = root
        while hasattr(command, "commands"):
            rest = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
            if not rest:
                return
            name, command, rest = command.resolve_command(ctx, rest)
            ctx = command.make_context(name, rest, parent=ctx)


def check(argv: list[str]) -> str | None:
    """None when the CLI accepts argv, else its one-line error."""
    try:
        parse(argv)
    except typer.Exit:  # --version, --help: accepted
        return None
    except Exception as e:
        if type(e).__name__ == "MissingParameter":  # a mention without its required argument
            return None
        message = getattr(e, "format_message", None)
        return message() if message else f"{type(e).__name__}: {e}"
    return None


def test_every_documented_command_line_parses():
    bad, seen = [], 0
    for path in documents():
        for number, command in command_lines(path):
            seen += 1
            error = check(words(command))
            if error:
                bad.append(f"{path.relative_to(REPO)}:{number}: {command!r}: {error}")
    assert seen > 100, seen  # the README and the docs show many: the extraction works
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("line, wrong", [
    ("harness run --era hw --nemesis kill --time-limt 120", "--time-limt"),
    ("harness campaign run campaigns/smoke.yaml --paralel 2", "--paralel"),
    ("harness scenario hw-data-loss --backend dockr", "dockr"),
    ("harness chek store/latest", "chek"),
])
def test_a_made_up_option_or_command_fails(line, wrong, tmp_path):
    error = check(words(line))
    assert error is not None and wrong in error, error
    doc = tmp_path / "page.md"
    doc.write_text(f"Run it:\n\n```\n{line}   # a comment\n$ {line}\n```\n\nor `{line}` inline.\n")
    assert [c for _, c in command_lines(doc)] == [line, line, line]
