"""`harness serve STORE`: browse a store root over HTTP, as Jepsen's `serve`,
for machines where a file:// link is awkward. The standard library's
threading server, bound to 127.0.0.1 only, serving files read-only."""
from __future__ import annotations

import functools
import http.server
from pathlib import Path

HOST = "127.0.0.1"


class StoreHandler(http.server.SimpleHTTPRequestHandler):
    """Files of the store root; no request logging to the terminal per file."""

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


def make_server(root: str | Path, port: int = 8080) -> http.server.ThreadingHTTPServer:
    """A server for `root` on 127.0.0.1:port (0 = any free port); not started."""
    handler = functools.partial(StoreHandler, directory=str(Path(root).resolve()))
    return http.server.ThreadingHTTPServer((HOST, port), handler)


def serve(root: str | Path, port: int = 8080, announce=print) -> None:
    server = make_server(root, port)
    host, real_port = server.server_address[:2]
    announce(f"serving {Path(root).resolve()} at http://{host}:{real_port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
