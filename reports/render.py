"""The jinja2 environment of the report pages, with autoescaping always on.

Compiled templates are kept in jinja2's file-system bytecode cache (a per-user
directory under the temp dir): compiling linear.html.j2 and its includes is most
of what `harness check-history` spends on its page (about 0.1 s of a 0.3 s
command); a cached template loads in a millisecond, and jinja2 recompiles
whenever the template's source changes (the cache key is the source's checksum)."""

from __future__ import annotations

from functools import lru_cache

import jinja2


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,  # every template, whatever its extension
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(),
    )


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):  # no safe temp dir: compile every time
        return None


def render(template: str, context: dict) -> str:
    return environment().get_template(template).render(**context)
