"""Field checks for incoming messages: a bad field becomes ``BadRequest`` (answered
with INVALID_REQUEST), never an exception that takes the process down."""

from __future__ import annotations

import hmac
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


def from_cluster(message: dict, secret: str | None) -> bool:
    """True if a request carries the cluster's secret (always, for a core built
    without one: unit tests of the core; the processes refuse to start so)."""
    if secret is None:
        return True
    from .. import protocol as P

    given = message.get(P.CLUSTER_SECRET)
    return isinstance(given, str) and hmac.compare_digest(given.encode("utf-8"), secret.encode("utf-8"))


def dispatch_request(handlers: dict, reply, conn: Any, message: Any, now: int) -> None:
    """Route one client request to its handler; an unknown API or a bad field
    becomes an error reply (``reply(conn, corr, code, message=...)``), never an
    exception. Shared by the broker and controller cores."""
    from .. import protocol as P

    corr = message.get("corr") if isinstance(message, dict) else None
    api = message.get("api") if isinstance(message, dict) else None
    handler = handlers.get(api)
    if handler is None:
        reply(conn, corr, P.UNSUPPORTED_API, message=f"unknown api {str(api)[:80]!r}")
        return
    try:
        handler(conn, corr, message, now)
    except BadRequest as e:
        reply(conn, corr, P.INVALID_REQUEST, message=str(e))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        reply(conn, corr, P.INVALID_REQUEST, message=f"{type(e).__name__}: {e}")
