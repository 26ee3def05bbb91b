"""The remote object store of tiered storage (KIP-405): its own process on its
own host, so that the nemesis can kill, pause and partition it like any node.

``python3 -m replica.remote_store --listen HOST:PORT --data-dir DIR``

HTTP/1.1 (standard library ``http.server``), one file per object under DIR
(the key percent-encoded), written to ``<file>.tmp``, fsynced and renamed:

    PUT /<key>                 store the body                  -> 204
    GET /<key>                 the object (``Range: bytes=a-b``) -> 200 / 206, 404
    DELETE /<key>              remove it (absent is fine)       -> 204
    GET /?prefix=<p>           the keys, one per line           -> 200

``StoreClient`` is the brokers' side: it turns the cores' PutObject /
GetObject / DeleteObject / ListObjects messages (``replica/protocol.py``) into
those requests and the answers back into messages.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

from . import protocol as P

MAX_OBJECT_BYTES = 256 << 20


def object_path(root: str, key: str) -> str:
    return os.path.join(root, quote(key, safe=""))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "StoreServer"

    def log_message(self, fmt, *args) -> None:      # one line per request, on stderr
        if self.server.verbose:
            sys.stderr.write(f"remote-store {self.address_string()} {fmt % args}\n")

    def _answer(self, code: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _key(self) -> str | None:
        key = unquote(urlsplit(self.path).path.lstrip("/"))
        if not key or len(key) > 1000 or "\x00" in key:
            self._answer(400, b"bad key\n")
            return None
        return key

    def do_PUT(self) -> None:
        key = self._key()
        if key is None:
            return
        length = int(self.headers.get("Content-Length") or -1)
        if not 0 <= length <= MAX_OBJECT_BYTES:
            self._answer(411 if length < 0 else 413, b"Content-Length missing or too large\n")
            return
        data = self.rfile.read(length)
        path = object_path(self.server.root, key)
        tmp = path + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            self._unavailable(e)
            return
        self._answer(204)

    def _unavailable(self, e: OSError) -> None:
        """The store's folder cannot be used (a remote-store fault put a file in its place)."""
        self._answer(503, f"store unavailable: {e.strerror or e}\n".encode())

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path in ("", "/"):
            prefix = parse_qs(url.query).get("prefix", [""])[0]
            try:
                keys = sorted(unquote(n) for n in os.listdir(self.server.root) if not n.endswith(".tmp"))
            except OSError as e:
                self._unavailable(e)
                return
            self._answer(200, "".join(k + "\n" for k in keys if k.startswith(prefix)).encode())
            return
        key = self._key()
        if key is None:
            return
        try:
            with open(object_path(self.server.root, key), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            self._answer(404, b"no such object\n")
            return
        except OSError as e:
            self._unavailable(e)
            return
        ranged = self.headers.get("Range", "")
        if ranged.startswith("bytes="):
            first, _, last = ranged[6:].partition("-")
            start = int(first or 0)
            end = int(last) + 1 if last else len(data)
            self._answer(206, data[start:end], {"Content-Range": f"bytes {start}-{end - 1}/{len(data)}"})
            return
        self._answer(200, data)

    def do_DELETE(self) -> None:
        key = self._key()
        if key is None:
            return
        try:
            os.unlink(object_path(self.server.root, key))
        except FileNotFoundError:
            pass
        except OSError as e:
            self._unavailable(e)
            return
        self._answer(204)


class StoreServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], root: str, verbose: bool = False):
        os.makedirs(root, exist_ok=True)
        for name in os.listdir(root):
            if name.endswith(".tmp"):
                os.unlink(os.path.join(root, name))
        self.root = root
        self.verbose = verbose
        super().__init__(address, _Handler)


class StoreClient:
    """Blocking HTTP calls for one core message each (run them off the event loop)."""

    def __init__(self, address: tuple[str, int], timeout: float = 10.0):
        self.address = address
        self.timeout = timeout

    def call(self, message: dict) -> dict:
        """Answer a store message as the cores expect; network trouble is NETWORK_ERROR."""
        corr, api, key = message.get("corr"), message.get("api"), message.get("key", "")
        path = "/" + quote(str(key), safe="")
        try:
            conn = http.client.HTTPConnection(*self.address, timeout=self.timeout)
            try:
                if api == P.PUT_OBJECT:
                    status, _ = _request(conn, "PUT", path, body=bytes(message["data"]))
                    return {"corr": corr, "error": None if status == 204 else P.KAFKA_STORAGE_ERROR}
                if api == P.GET_OBJECT:
                    headers = {}
                    if message.get("range"):
                        start, end = message["range"]
                        headers["Range"] = f"bytes={start}-{end - 1}"
                    status, data = _request(conn, "GET", path, headers=headers)
                    if status == 404:
                        return {"corr": corr, "error": P.NOT_FOUND}
                    if status not in (200, 206):
                        return {"corr": corr, "error": P.KAFKA_STORAGE_ERROR}
                    return {"corr": corr, "error": None, "data": data}
                if api == P.DELETE_OBJECT:
                    status, _ = _request(conn, "DELETE", path)
                    return {"corr": corr, "error": None if status == 204 else P.KAFKA_STORAGE_ERROR}
                if api == P.LIST_OBJECTS:
                    status, data = _request(conn, "GET", "/?prefix=" + quote(message.get("prefix", "")))
                    return {"corr": corr, "error": None if status == 200 else P.KAFKA_STORAGE_ERROR,
                            "keys": data.decode().split()}
                return {"corr": corr, "error": P.UNSUPPORTED_API}
            finally:
                conn.close()
        except (OSError, http.client.HTTPException):
            return {"corr": corr, "error": P.NETWORK_ERROR}

    def list_keys(self, prefix: str = "") -> list[str]:
        answer = self.call({"api": P.LIST_OBJECTS, "corr": 0, "prefix": prefix})
        if answer["error"]:
            raise OSError(f"remote store {self.address[0]}:{self.address[1]}: {answer['error']}")
        return answer["keys"]

    def get(self, key: str) -> bytes | None:
        answer = self.call({"api": P.GET_OBJECT, "corr": 0, "key": key})
        if answer["error"] == P.NOT_FOUND:
            return None
        if answer["error"]:
            raise OSError(f"remote store {self.address[0]}:{self.address[1]}: {answer['error']}")
        return answer["data"]


def _request(conn, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    return response.status, response.read()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m replica.remote_store")
    parser.add_argument("--listen", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    from .shell import log_line, parse_address
    try:
        address = parse_address(args.listen, "--listen")
        server = StoreServer(address, args.data_dir, args.verbose)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    log_line("remote-store", f"listening on {address[0]}:{address[1]}, objects in {args.data_dir}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()
    log_line("remote-store", "SIGTERM: shutting down")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def remote_dump(store: StoreClient, remote: dict) -> dict:
    """The remote tier as one more replica's ``Dump`` (broker ``"remote"``): per
    partition the records of its finished segments (a later copy of an offset
    wins), ``hw`` = ``leo`` = one past the last. ``remote`` is the controller's
    ``State["remote"]``: ``{"<topic>-<p>": [REMOTE_SEGMENT, ...]}``. A missing or
    corrupt object is listed under ``errors`` (never read around)."""
    from . import storage as S
    from .core.tiered import object_keys

    partitions, errors = [], []
    for name, segments in sorted(remote.items()):
        topic, _, part = name.rpartition("-")
        records: dict[int, list] = {}
        for seg in segments:
            if seg.get("state") != P.COPY_SEGMENT_FINISHED:
                continue
            key = object_keys(topic, int(part), seg)["log"]
            try:
                data = store.get(key)
                if data is None:
                    raise S.StorageError("object missing")
                for r in S.decode_records(data, seg["base"]):
                    records[r.offset] = list(r)
            except (S.StorageError, OSError) as e:
                errors.append(f"{key}: {e}")
        if records:
            end = max(records) + 1
            partitions.append({"topic": topic, "partition": int(part), "hw": end, "leo": end,
                               "log_start": min(records), "local_log_start": min(records),
                               "records": [records[o] for o in sorted(records)]})
    dump = {"broker": "remote", "partitions": partitions}
    if errors:
        dump["errors"] = errors
    return dump
