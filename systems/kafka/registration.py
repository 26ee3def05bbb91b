"""A KRaft broker's registration removed: KIP-631's UnregisterBroker, sent to a
controller's own listener (KIP-919 lets clients talk to controllers).

Why here and by hand: neither Python client offers it (confluent-kafka 2.16 has
no unregister_broker, kafka-python 3.0 no UnregisterBroker schema), and Kafka's
`kafka-cluster.sh unregister` is a JVM start (seconds on a loaded machine) from a
jar (kafka-tools) the run's lib folder does not hold. The request is 13 bytes of
body and header; the answer is an error code.

Used by the disk-loss fault (a replaced disk: the old incarnation's registration
goes, as its session's expiry would take it; the new one may then register at
once instead of being refused DUPLICATE_BROKER_REGISTRATION until then) and by
the membership fault (a retired broker).
"""
from __future__ import annotations

import socket
import struct

UNREGISTER_BROKER = 64            # api key; version 0 is flexible (request header v2, response header v1)
ERRORS = {0: None, 102: "BROKER_ID_NOT_REGISTERED", 35: "UNSUPPORTED_VERSION", 41: "NOT_CONTROLLER",
          7: "REQUEST_TIMED_OUT", 15: "COORDINATOR_NOT_AVAILABLE"}


class RegistrationError(RuntimeError):
    """The controller did not answer, or answered something unreadable; one line."""


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise RegistrationError("the controller closed the connection")
        out += chunk
    return out


def unregister_broker(host: str, port: int, broker_id: int, timeout: float = 10.0) -> str | None:
    """-> None (unregistered), "BROKER_ID_NOT_REGISTERED", or another error's name."""
    client = b"replog-harness"
    header = struct.pack(">hhih", UNREGISTER_BROKER, 0, 1, len(client)) + client + b"\x00"   # + no tagged fields
    body = struct.pack(">i", broker_id) + b"\x00"
    request = header + body
    try:
        with socket.create_connection((host, port), timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", _read(s, 4))[0]
            data = _read(s, size)
    except OSError as e:
        raise RegistrationError(f"UnregisterBroker {broker_id} to {host}:{port}: {e}") from None
    # response header v1: correlation id, tagged fields (none); body: throttle_time_ms, error_code, ...
    if len(data) < 11 or struct.unpack(">i", data[:4])[0] != 1:
        raise RegistrationError(f"UnregisterBroker {broker_id} to {host}:{port}: an unreadable answer")
    code = struct.unpack(">h", data[9:11])[0]
    return ERRORS.get(code, f"error {code}")
