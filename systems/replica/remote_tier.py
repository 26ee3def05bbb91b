"""The replica's remote store as the remote-store fault sees it (harness.sut.RemoteTier).

The store (replica.remote_store) keeps one file per object in its data
folder on the store host, the key percent-encoded:
`<topic>-<partition>/<base:020d>-<segment id>.log` and the segment's
`.index` and `.leader-epoch-checkpoint`. Everything here acts on those files
through the store host's Remote, never through the store's HTTP API, so it
works while the store is paused or unavailable:

- lose: delete a segment's three objects (its records are decoded first, so
  the fault's history op names the offsets lost);
- unavailable: the data folder is moved aside and a plain file put in its
  place, so every request fails at once (the store answers 503); undone by
  moving it back;
- slow: the store process is stopped and continued in a duty cycle (SIGSTOP
  for `seconds`, then 0.2 s running), so each request waits up to `seconds`.
"""
from __future__ import annotations

import os
import tempfile
import threading
from urllib.parse import quote, unquote

RUN_SLICE_S = 0.2          # how long the slowed store runs between two stops
ASIDE = ".unavailable"     # suffix of the data folder while the store is unavailable


class ReplicaRemoteTier:
    def __init__(self, db, store: str):
        self.db = db
        self.store = store
        self._slow: threading.Event | None = None
        self._slow_thread: threading.Thread | None = None

    @property
    def _remote(self):
        return self.db.cluster.remotes[self.store]

    @property
    def _dir(self) -> str:
        return self.db.data_dir(self.store)

    def _names(self, folder: str) -> list[str]:
        out = self._remote.run(["ls", "-1", folder], check=False)
        return out.stdout.split() if out.returncode == 0 else []

    def segments(self) -> list[dict]:
        folder = self._folder()
        found = []
        for name in self._names(folder):
            key = unquote(name)
            part, _, file = key.partition("/")
            topic, _, partition = part.rpartition("-")
            base, _, rest = file.partition("-")
            if file.endswith(".log") and partition.isdigit() and base.isdigit() and rest:
                found.append({"key": int(partition), "base": int(base), "name": key, "topic": topic})
        return sorted(found, key=lambda s: (s["key"], s["base"], s["name"]))

    def lose(self, segment: dict) -> dict:
        from replica import storage as S

        folder = self._folder()
        stem = segment["name"][:-len(".log")]
        end = None
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, "segment.log")
            try:
                self._remote.get(os.path.join(folder, quote(segment["name"], safe="")), local)
                with open(local, "rb") as f:
                    records = S.decode_records(f.read(), segment["base"])
                end = records[-1].offset if records else None
            except Exception:  # an object already gone or unreadable: lost all the same
                pass
        objects = [stem + ext for ext in (".log", ".index", ".leader-epoch-checkpoint")]
        self._remote.run(["rm", "-f", *[os.path.join(folder, quote(o, safe="")) for o in objects]])
        return {"key": segment["key"], "base": segment["base"], "end": end, "objects": objects}

    def _folder(self) -> str:
        """Where the objects are now: the data folder, or its aside copy while unavailable."""
        return self._dir + ASIDE if self._aside() else self._dir

    def _aside(self) -> bool:
        return self._remote.run(["test", "-d", self._dir + ASIDE], check=False).returncode == 0

    def set_available(self, available: bool) -> dict:
        d = self._dir
        if available:
            if self._aside():
                self._remote.run(["sh", "-c", f'rm -f "$1" && mv "$1{ASIDE}" "$1"', "sh", d])
            return {"available": True}
        if not self._aside():
            self._remote.run(["sh", "-c", f'mv "$1" "$1{ASIDE}" && : > "$1"', "sh", d])
        return {"available": False, "how": "the store's data folder replaced by a file: every request fails"}

    def set_delay(self, seconds: float) -> dict:
        """A duty cycle of SIGSTOP / SIGCONT on the store process (a thread of the harness)."""
        self._stop_slow()
        if seconds > 0:
            done = threading.Event()
            pausable = self.db.pausable

            def cycle():
                while not done.is_set():
                    pausable.pause(self.store)
                    done.wait(seconds)
                    pausable.resume(self.store)
                    done.wait(RUN_SLICE_S)
                pausable.resume(self.store)

            self._slow = done
            self._slow_thread = threading.Thread(target=cycle, name="remote-store-slow", daemon=True)
            self._slow_thread.start()
        return {"delay_s": seconds, "how": f"the store process stopped {seconds:g} s, then run {RUN_SLICE_S:g} s, "
                                           f"in turn" if seconds > 0 else "normal"}

    def _stop_slow(self) -> None:
        if self._slow is not None:
            self._slow.set()
            if self._slow_thread is not None:
                self._slow_thread.join(timeout=5)
            self._slow = self._slow_thread = None
