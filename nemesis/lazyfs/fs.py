"""The FUSE side of lazyfs: libfuse3's high-level API through mfusepy (a
ctypes binding, one pure-Python file, so it is copied onto bare hosts with
the rest of this package), each operation handed to `LazyState`; and the
control socket that says `drop` (data and names), `drop-data` (data only,
as Jepsen's LazyFS), `sync`, `stats` (one line in, one JSON
line out). Standard library plus mfusepy only.

Why mfusepy and not pyfuse3: pyfuse3 is a compiled extension that needs
trio and a wheel matching the host's Python, which a host with only python3
does not have; mfusepy needs only Debian's libfuse3-3. Measured cost: see
bench/lazyfs_throughput.py.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import stat
import sys
import threading
import time

from nemesis.lazyfs.overlay import LazyState

COMMANDS = ("drop", "drop-data", "sync", "stats", "ping")


def _ops_class():
    import mfusepy

    class LazyOps(mfusepy.Operations):
        """Passthrough to the backing directory; file data and names through LazyState."""

        use_ns = True

        def __init__(self, state: LazyState):
            self.s = state

        def _err(self, e: OSError):
            raise mfusepy.FuseOSError(e.errno or errno.EIO)

        # attributes and directories
        def getattr(self, path, fh=None):
            try:
                with self.s.lock:
                    st = os.lstat(self.s.full(path))
                    size = self.s.size_of(st.st_ino) if stat.S_ISREG(st.st_mode) else None
            except OSError as e:
                self._err(e)
            out = {k: getattr(st, k) for k in ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid",
                                                "st_size", "st_blocks", "st_rdev")}
            out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            if size is not None:
                out["st_size"] = size
                out["st_blocks"] = (size + 511) // 512
            return out

        def readdir(self, path, fh):
            try:
                names = os.listdir(self.s.full(path))
            except OSError as e:
                self._err(e)
            hidden = {".lazyfs-trash"} if path.strip("/") == "" else set()
            return [".", ".."] + [n for n in names if n not in hidden]

        def readlink(self, path):
            try:
                return os.readlink(self.s.full(path))
            except OSError as e:
                self._err(e)

        def statfs(self, path):
            sv = os.statvfs(self.s.root)
            return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                 "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

        def chmod(self, path, mode):
            try:
                os.chmod(self.s.full(path), mode)
            except OSError as e:
                self._err(e)
            return 0

        def chown(self, path, uid, gid):
            try:
                os.lchown(self.s.full(path), uid, gid)
            except OSError as e:
                self._err(e)
            return 0

        def utimens(self, path, times=None):
            try:
                os.utime(self.s.full(path), ns=times, follow_symlinks=False) if times else \
                    os.utime(self.s.full(path), follow_symlinks=False)
            except OSError as e:
                self._err(e)
            return 0

        def access(self, path, amode):
            if not os.access(self.s.full(path), amode):
                raise mfusepy.FuseOSError(errno.EACCES)
            return 0

        # namespace
        def mkdir(self, path, mode):
            return self._call(self.s.mkdir, path, mode)

        def rmdir(self, path):
            return self._call(self.s.remove, path, True)

        def unlink(self, path):
            return self._call(self.s.remove, path, False)

        def symlink(self, target, source):
            return self._call(self.s.symlink, target, source)

        def link(self, target, source):
            return self._call(self.s.link, target, source)

        def rename(self, old, new):
            return self._call(self.s.rename, old, new)

        def fsyncdir(self, path, datasync, fh):
            return self._call(self.s.fsyncdir, path)

        # files
        def create(self, path, mode, fi=None):
            try:
                return self.s.open(path, os.O_CREAT | os.O_RDWR, mode)
            except OSError as e:
                self._err(e)

        def open(self, path, flags):
            try:
                return self.s.open(path, flags)
            except OSError as e:
                self._err(e)

        def read(self, path, size, offset, fh):
            try:
                return self.s.read(fh, size, offset)
            except OSError as e:
                self._err(e)

        def write(self, path, data, offset, fh):
            try:
                return self.s.write(fh, data, offset)
            except OSError as e:
                self._err(e)

        def truncate(self, path, length, fh=None):
            return self._call(self.s.truncate, path, length, fh)

        def fsync(self, path, datasync, fh):
            return self._call(self.s.fsync, fh)

        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            self.s.release(fh)
            return 0

        def _call(self, fn, *args):
            try:
                fn(*args)
            except OSError as e:
                self._err(e)
            return 0

    return LazyOps


# -- control socket ------------------------------------------------------------
def serve_control(state: LazyState, path: str) -> threading.Thread:
    """One command per connection: a line in, a JSON line out."""
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)

    def handle(conn):
        with conn:
            line = conn.makefile("r").readline().strip()
            try:
                if line == "drop":
                    out = state.drop()
                elif line == "drop-data":
                    out = state.drop(keep_names=True)
                elif line == "sync":
                    out = state.sync()
                elif line in ("stats", "ping"):
                    out = state.stats()
                else:
                    out = {"error": f"unknown command {line!r} (known: {', '.join(COMMANDS)})"}
            except OSError as e:
                out = {"error": f"{line}: {e}"}
            conn.sendall((json.dumps(out) + "\n").encode())

    def loop():
        while True:
            conn, _ = srv.accept()
            handle(conn)

    t = threading.Thread(target=loop, name="lazyfs-control", daemon=True)
    t.start()
    return t


def control(path: str, command: str, timeout: float = 30.0) -> dict:
    """Send one command to a running lazyfs; its JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall((command + "\n").encode())
        return json.loads(s.makefile("r").readline())


def mount(backing: str, mountpoint: str, control_path: str) -> None:
    """Serve the mount in the foreground until it is unmounted (or SIGTERM)."""
    import mfusepy

    def log(msg: str) -> None:
        print(time.strftime("%Y-%m-%dT%H:%M:%S") + f" lazyfs {mountpoint}: {msg}", file=sys.stderr, flush=True)

    state = LazyState(backing, log=log)
    serve_control(state, control_path)
    log(f"mounted over {backing}, control {control_path}")
    # Timeouts 0: the kernel must not answer from a cached entry or size once
    # a drop has taken names and data away; no kernel_cache: reopening a file
    # drops its cached pages.
    mfusepy.FUSE(_ops_class()(state), mountpoint, foreground=True, allow_other=True, default_permissions=False,
                 fsname="lazyfs", subtype="lazyfs", attr_timeout=0, entry_timeout=0, negative_timeout=0)
    log("unmounted")
