"""The remote object store as a simulated component: the same PutObject /
GetObject / DeleteObject / ListObjects messages the broker shell turns into
HTTP for ``replica/remote_store.py``. Its objects live in a dict the simulator
keeps across crashes (they are on the store's disk); a crashed store refuses
connections and a partitioned one holds messages, like any node.
"""

from __future__ import annotations

from typing import Any

from .. import protocol as P
from ..core.actions import Reply


class SimStore:
    def __init__(self, objects: dict):
        self.objects = objects          # key -> bytes, shared with the simulator

    def start(self, now: int, _recovered: Any = None) -> list:
        return []

    def on_request(self, conn: Any, message: dict, now: int) -> list:
        api, corr, key = message.get("api"), message.get("corr"), message.get("key")
        if api == P.PUT_OBJECT:
            self.objects[key] = bytes(message["data"])
            return [Reply(conn, {"corr": corr, "error": None})]
        if api == P.GET_OBJECT:
            if key not in self.objects:
                return [Reply(conn, {"corr": corr, "error": P.NOT_FOUND})]
            data = self.objects[key]
            if message.get("range"):
                start, end = message["range"]
                data = data[start:end]
            return [Reply(conn, {"corr": corr, "error": None, "data": data})]
        if api == P.DELETE_OBJECT:
            self.objects.pop(key, None)
            return [Reply(conn, {"corr": corr, "error": None})]
        if api == P.LIST_OBJECTS:
            prefix = message.get("prefix", "")
            return [Reply(conn, {"corr": corr, "error": None,
                                 "keys": sorted(k for k in self.objects if k.startswith(prefix))})]
        return [Reply(conn, {"corr": corr, "error": P.UNSUPPORTED_API})]

    def on_response(self, peer: Any, message: dict, now: int) -> list:
        return []

    def on_peer_failed(self, peer: Any, now: int) -> list:
        return []

    def on_connection_closed(self, conn: Any, now: int) -> list:
        return []

    def on_timer(self, now: int) -> list:
        return []
