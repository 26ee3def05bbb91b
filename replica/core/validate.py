"""Field checks for incoming messages: a bad field becomes ``BadRequest`` (answered
with INVALID_REQUEST), never an exception that takes the process down."""

from __future__ import annotations

from typing import Any

_MISSING = object()


class BadRequest(Exception):
    pass


def get_int(message: dict, name: str, default: Any = _MISSING, minimum: int | None = None) -> int:
    value = message.get(name, _MISSING)
    if value is _MISSING:
        if default is _MISSING:
            raise BadRequest(f"missing field {name!r}")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"field {name!r} must be an integer")
    if minimum is not None and value < minimum:
        raise BadRequest(f"field {name!r} must be >= {minimum}")
    return value


def get_str(message: dict, name: str, default: Any = _MISSING) -> str:
    value = message.get(name, _MISSING)
    if value is _MISSING:
        if default is _MISSING:
            raise BadRequest(f"missing field {name!r}")
        return default
    if not isinstance(value, str):
        raise BadRequest(f"field {name!r} must be a string")
    return value
