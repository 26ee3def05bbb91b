"""python3 -m nemesis.lazyfs mount BACKING MOUNTPOINT --control SOCKET
python3 -m nemesis.lazyfs ctl SOCKET drop|drop-data|sync|stats|ping
python3 -m nemesis.lazyfs check          (exit 0 iff libfuse3 and /dev/fuse are usable here)

Runs on a bare host with python3, Debian's libfuse3-3 and mfusepy.py on
PYTHONPATH. Errors are one line on stderr, exit 2."""
from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["mount"] and len(argv) == 5 and argv[3] == "--control":
        from nemesis.lazyfs.fs import mount

        for d in (argv[1], argv[2]):
            os.makedirs(d, exist_ok=True)
        mount(argv[1], argv[2], argv[4])
        return 0
    if argv[:1] == ["ctl"] and len(argv) == 3:
        from nemesis.lazyfs.fs import control

        try:
            out = control(argv[1], argv[2])
        except OSError as e:
            print(f"lazyfs: control socket {argv[1]}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(json.dumps(out))
        return 2 if "error" in out else 0
    if argv == ["check"]:
        problem = check()
        if problem:
            print(f"lazyfs: {problem}", file=sys.stderr)
            return 2
        return 0
    print(__doc__, file=sys.stderr)
    return 2


def check() -> str | None:
    """Why a mount cannot work on this host, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        import mfusepy  # noqa: F401  (loads libfuse3 through ctypes)
    except (ImportError, OSError, EnvironmentError) as e:
        return f"libfuse3 or mfusepy not loadable ({e})"
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
