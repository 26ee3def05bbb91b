"""A headless Chromium driven over the DevTools protocol, for testing report pages.

One browser per test session (it takes seconds to start).  Each page load opens a
fresh tab, records every uncaught exception, console error and browser log error
(a blocked or failed resource load shows up there too, so a page that reaches for
an external file fails the check), and can evaluate JavaScript and take
full-page screenshots.  Only 127.0.0.1 is ever contacted: the debugging port is
bound there and chosen by Chromium itself (``--remote-debugging-port=0``).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio",
    "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
]


def extra_stores() -> list[str]:
    """Real stores to check as well: REPORT_STORES=dir1:dir2 (os.pathsep separated)."""
    return [p for p in os.environ.get("REPORT_STORES", "").split(os.pathsep) if p]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@dataclass
class PageLoad:
    """What one page load produced."""

    url: str
    errors: list[str] = field(default_factory=list)
    session: str = ""
    target: str = ""


class Browser:
    """Start Chromium; talk to it over one websocket with flattened target sessions."""

    def __init__(self, executable: str, start_timeout: float = 30.0) -> None:
        import websocket  # websocket-client, a test dependency

        self.profile = tempfile.mkdtemp(prefix="report-chromium-")
        self.proc = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + start_timeout
        while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port, path = port_file.read_text().split()[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=60,
                                              suppress_origin=True)
        self._next_id = 0
        self._events: list[dict] = []

    # --- protocol -------------------------------------------------------------
    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _wait_event(self, method: str, session: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for ev in self._events:
                if ev.get("method") == method and ev.get("sessionId") == session:
                    self._events.remove(ev)
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout}s")
            self._events.append(json.loads(self.ws.recv()))

    # --- pages ----------------------------------------------------------------
    def load(self, url: str, width: int = 1400, height: int = 1000, timeout: float = 60) -> PageLoad:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        self.send("Page.navigate", {"url": url}, session)
        self._wait_event("Page.loadEventFired", session, timeout)
        page = PageLoad(url, session=session, target=target)
        page.errors = self.errors(session)
        return page

    def errors(self, session: str) -> list[str]:
        """Exceptions, console errors and browser log errors of a page so far."""
        self.send("Runtime.evaluate", {"expression": "0"}, session)  # flush pending events
        found, keep = [], []
        for ev in self._events:
            if ev.get("sessionId") != session:
                keep.append(ev)
                continue
            method, params = ev.get("method"), ev.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = params.get("exceptionDetails", {})
                found.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                    for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append(f"log: {entry.get('source')}: {entry.get('text')} {entry.get('url', '')}")
        self._events = keep
        return found

    def evaluate(self, page: PageLoad, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, page.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate failed: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def screenshot(self, page: PageLoad, path: str | os.PathLike, max_height: int = 8000,
                   selector: str | None = None) -> Path:
        """A PNG of the whole page (cut at ``max_height``) or of one element."""
        if selector:
            box = self.evaluate(page, f"""(() => {{ const r = document.querySelector({json.dumps(selector)})
                .getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, r.height]; }})()""")
            clip = {"x": box[0], "y": box[1], "width": box[2], "height": min(box[3], max_height)}
        else:
            size = self.send("Page.getLayoutMetrics", session=page.session)["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height)}
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                     "clip": {**clip, "scale": 1}}, page.session)
        out = Path(path)
        out.write_bytes(base64.b64decode(shot["data"]))
        return out

    def close_page(self, page: PageLoad) -> None:
        self.send("Target.closeTarget", {"targetId": page.target})
        self._events = [ev for ev in self._events if ev.get("sessionId") != page.session]

    def close(self) -> None:
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)
