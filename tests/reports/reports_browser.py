"""Debian's headless Chromium driven by Playwright for Python, for testing report pages.

Playwright launches the system's ``/usr/bin/chromium`` (``executable_path``), so no
browser build is downloaded.  The flags keep Chromium off the network on this
machine: no QUIC, no background fetches, no component or sync updates.  Each page
load opens a fresh page and records every uncaught exception, console error and
failed request (a page that reaches for an external file fails the check).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
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
    """One loaded page and the errors it produced so far."""

    url: str
    page: Any
    errors: list[str] = field(default_factory=list)


class Browser:
    """One Chromium per test session; pages are opened and closed per test."""

    def __init__(self, executable: str) -> None:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        try:
            self._browser = self._pw.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS,
                                                     headless=True)
        except Exception:
            self._pw.stop()
            raise

    def load(self, url: str, width: int = 1400, height: int = 1000, timeout: float = 60) -> PageLoad:
        page = self._browser.new_page(viewport={"width": width, "height": height})
        loaded = PageLoad(url, page)
        page.on("pageerror", lambda exc: loaded.errors.append(f"exception: {exc}"))
        page.on("console", lambda msg: loaded.errors.append(f"console: {msg.text}")
                if msg.type in ("error", "assert") else None)
        page.on("requestfailed", lambda req: loaded.errors.append(
            f"request failed: {req.url} {req.failure}"))
        page.goto(url, wait_until="load", timeout=timeout * 1000)
        return loaded

    def errors(self, page: PageLoad) -> list[str]:
        page.page.evaluate("0")  # let pending events arrive
        return list(page.errors)

    def evaluate(self, page: PageLoad, expression: str) -> Any:
        return page.page.evaluate(expression)

    def screenshot(self, page: PageLoad, path: str | os.PathLike, max_height: int = 8000,
                   selector: str | None = None) -> Path:
        """A PNG of the whole page (cut at ``max_height``) or of one element."""
        out = Path(path)
        if selector:
            page.page.locator(selector).first.screenshot(path=str(out))
        else:
            size = page.page.evaluate("[document.documentElement.scrollWidth, "
                                      "document.documentElement.scrollHeight]")
            page.page.screenshot(path=str(out), full_page=True,
                                 clip={"x": 0, "y": 0, "width": size[0], "height": min(size[1], max_height)})
        return out

    def close_page(self, page: PageLoad) -> None:
        page.page.close()

    def close(self) -> None:
        try:
            self._browser.close()
        finally:
            self._pw.stop()
