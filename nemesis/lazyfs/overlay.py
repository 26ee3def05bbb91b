"""The state of a lazy file system over a backing directory: what was written
and not fsynced, and which namespace changes a directory fsync has not made
durable yet. Standard library only (it runs on bare hosts).

File data (per backing inode): writes land in 4 KiB pages held here, reads
see those pages over the backing file, `truncate` changes only the size
seen here. `fsync`/`fdatasync` of the file writes its pages to the backing
file and fsyncs it. `drop` forgets every page: the data that reached the
backing file is exactly what was fsynced.

Namespace (POSIX: a new, removed or renamed name is durable once its
directory is fsynced): create, mkdir, symlink, link, unlink, rmdir and
rename are applied to the backing directory at once, and an undo entry is
kept until `fsyncdir` of the directory that holds the name. Removed and
replaced objects wait in a hidden trash folder so that their undo can bring
them back. `drop` undoes the uncommitted entries, newest first. A rename is
committed by an fsync of either directory (it is one journal transaction on
ext4/xfs, all or nothing). Attribute changes (chmod, chown, utimens) are
passed through and never lost.

Jepsen's LazyFS keeps the same page-cache split for data but passes every
namespace operation straight through; this layer is stricter there.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
import threading
from dataclasses import dataclass

PAGE = 4096
TRASH = ".lazyfs-trash"


class Pending:
    """Unsynced data of one backing inode. Invariant: low <= size; backing
    bytes at or beyond `low` are not visible (a truncate cut them off)."""

    __slots__ = ("fd", "size", "low", "pages")

    def __init__(self, fd: int, size: int):
        self.fd = fd          # our own O_RDWR descriptor of the backing file
        self.size = size      # the size readers see
        self.low = size       # the smallest size since the last fsync
        self.pages: dict[int, bytearray] = {}

    def nbytes(self) -> int:
        return len(self.pages) * PAGE


@dataclass
class Undo:
    """One namespace change not yet made durable. `kind`: rm (undo a
    creation: remove `path`), back (undo a removal: `trash` -> `path`),
    rename (undo `old` -> `path`: `path` -> `old`, then `trash` -> `path`)."""

    kind: str
    path: str
    dirs: tuple[str, ...]
    old: str | None = None
    trash: str | None = None


def norm(rel: str) -> str:
    """A path relative to the mount, as `/a/b` (the root is `/`)."""
    return "/" + rel.strip("/")


def parent(rel: str) -> str:
    return os.path.dirname(norm(rel))


class LazyState:
    """All the lazy state of one mount; every method takes the lock."""

    def __init__(self, root: str, log=lambda msg: None):
        self.root = os.path.realpath(root)
        self.trash = os.path.join(self.root, TRASH)
        os.makedirs(self.trash, exist_ok=True)
        self._empty_trash()
        self.lock = threading.RLock()
        self.pending: dict[int, Pending] = {}
        self.undo: list[Undo] = []
        self.fds: dict[int, tuple[int, int]] = {}   # fh -> (backing fd, inode)
        self._next_fh = 1
        self._next_trash = 0
        self.log = log
        self.drops = 0

    # -- paths ------------------------------------------------------------
    def full(self, rel: str) -> str:
        rel = rel.lstrip("/")
        if rel == TRASH or rel.startswith(TRASH + "/"):
            raise OSError(errno.ENOENT, "hidden")
        return os.path.join(self.root, rel)

    def _trash_name(self) -> str:
        self._next_trash += 1
        return os.path.join(self.trash, f"t{self._next_trash}")

    # -- file handles -----------------------------------------------------
    def open(self, rel: str, flags: int, mode: int | None = None) -> int:
        with self.lock:
            path = self.full(rel)
            created = False
            if mode is not None and not os.path.lexists(path):
                created = True
            base = flags & ~(os.O_APPEND | os.O_TRUNC | os.O_ACCMODE)
            try:  # read-write whatever the caller asked: fsync must be able to write pages back
                fd = os.open(path, base | os.O_RDWR, mode if mode is not None else 0o644)
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EISDIR, errno.EROFS):
                    raise
                fd = os.open(path, (flags & ~(os.O_APPEND | os.O_TRUNC)), mode if mode is not None else 0o644)
            if created:
                self.undo.append(Undo("rm", rel, (parent(rel),)))
            ino = os.fstat(fd).st_ino
            fh = self._next_fh
            self._next_fh += 1
            self.fds[fh] = (fd, ino)
            if flags & os.O_TRUNC:
                self._truncate(fd, ino, 0)
            return fh

    def release(self, fh: int) -> None:
        with self.lock:
            fd, _ = self.fds.pop(fh, (None, None))
            if fd is not None:
                os.close(fd)

    def _pending(self, fd: int, ino: int) -> Pending:
        p = self.pending.get(ino)
        if p is None:
            p = Pending(os.dup(fd), os.fstat(fd).st_size)
            self.pending[ino] = p
        return p

    def _forget(self, ino: int) -> None:
        p = self.pending.pop(ino, None)
        if p is not None:
            os.close(p.fd)

    # -- data -------------------------------------------------------------
    @staticmethod
    def _base(p: Pending, a: int, b: int) -> bytes:
        """Backing bytes [a, b) as this layer sees them: zeros past `low`."""
        limit = min(b, p.low)
        data = os.pread(p.fd, limit - a, a) if limit > a else b""
        return data + bytes(b - a - len(data))

    def read(self, fh: int, size: int, offset: int) -> bytes:
        with self.lock:
            fd, ino = self.fds[fh]
            p = self.pending.get(ino)
            if p is None:
                return os.pread(fd, size, offset)
            end = min(offset + size, p.size)
            out = bytearray()
            pos = offset
            while pos < end:
                idx = pos // PAGE
                page = p.pages.get(idx)
                if page is not None:
                    stop = min((idx + 1) * PAGE, end)
                    out += page[pos - idx * PAGE:stop - idx * PAGE]
                else:  # a run of clean pages in one pread
                    j = idx + 1
                    while j * PAGE < end and j not in p.pages:
                        j += 1
                    stop = min(j * PAGE, end)
                    out += self._base(p, pos, stop)
                pos = stop
            return bytes(out)

    def write(self, fh: int, data: bytes, offset: int) -> int:
        with self.lock:
            fd, ino = self.fds[fh]
            p = self._pending(fd, ino)
            end = offset + len(data)
            pos, i = offset, 0
            while pos < end:
                idx = pos // PAGE
                start = idx * PAGE
                page = p.pages.get(idx)
                if page is None:
                    whole = pos == start and end >= start + PAGE
                    page = bytearray(PAGE) if whole else bytearray(self._base(p, start, start + PAGE))
                    p.pages[idx] = page
                n = min(start + PAGE, end) - pos
                page[pos - start:pos - start + n] = data[i:i + n]
                pos += n
                i += n
            p.size = max(p.size, end)
            return len(data)

    def truncate(self, rel: str | None, length: int, fh: int | None) -> None:
        with self.lock:
            if fh is not None and fh in self.fds:
                fd, ino = self.fds[fh]
                self._truncate(fd, ino, length)
                return
            fd = os.open(self.full(rel), os.O_RDWR)
            try:
                self._truncate(fd, os.fstat(fd).st_ino, length)
            finally:
                os.close(fd)

    def _truncate(self, fd: int, ino: int, length: int) -> None:
        p = self._pending(fd, ino)
        if length < p.size:
            for idx in [i for i in p.pages if i * PAGE >= length]:
                del p.pages[idx]
            idx = length // PAGE
            if idx in p.pages:
                cut = length - idx * PAGE
                p.pages[idx][cut:] = bytes(PAGE - cut)
            p.low = min(p.low, length)
        p.size = length

    def fsync(self, fh: int) -> None:
        with self.lock:
            fd, ino = self.fds[fh]
            self._flush(ino)
            os.fsync(fd)

    def _flush(self, ino: int) -> None:
        """Write an inode's pages to the backing file and fsync it."""
        p = self.pending.get(ino)
        if p is None:
            return
        if p.low < os.fstat(p.fd).st_size:
            os.ftruncate(p.fd, p.low)
        idxs = sorted(p.pages)
        k = 0
        while k < len(idxs):  # contiguous pages in one pwrite
            j = k
            while j + 1 < len(idxs) and idxs[j + 1] == idxs[j] + 1:
                j += 1
            start = idxs[k] * PAGE
            stop = min((idxs[j] + 1) * PAGE, p.size)
            if stop > start:
                buf = b"".join(p.pages[i] for i in idxs[k:j + 1])[:stop - start]
                written = 0
                while written < len(buf):
                    written += os.pwrite(p.fd, buf[written:], start + written)
            k = j + 1
        if os.fstat(p.fd).st_size != p.size:
            os.ftruncate(p.fd, p.size)
        os.fsync(p.fd)
        self._forget(ino)

    def size_of(self, ino: int) -> int | None:
        p = self.pending.get(ino)
        return None if p is None else p.size

    # -- namespace --------------------------------------------------------
    def mkdir(self, rel: str, mode: int) -> None:
        with self.lock:
            os.mkdir(self.full(rel), mode)
            self.undo.append(Undo("rm", rel, (parent(rel),)))

    def symlink(self, rel: str, target: str) -> None:
        with self.lock:
            os.symlink(target, self.full(rel))
            self.undo.append(Undo("rm", rel, (parent(rel),)))

    def link(self, rel: str, existing: str) -> None:
        with self.lock:
            os.link(self.full(existing), self.full(rel))
            self.undo.append(Undo("rm", rel, (parent(rel),)))

    def remove(self, rel: str, directory: bool) -> None:
        """unlink / rmdir: the object moves to the trash until committed."""
        with self.lock:
            path = self.full(rel)
            _check_kind(path, os.lstat(path), rel, directory)
            trash = self._trash_name()
            os.rename(path, trash)
            self.undo.append(Undo("back", rel, (parent(rel),), trash=trash))

    def rename(self, old: str, new: str) -> None:
        with self.lock:
            src, dst = self.full(old), self.full(new)
            os.lstat(src)
            trash = None
            if os.path.lexists(dst):
                s, d = os.lstat(src), os.lstat(dst)
                if (s.st_dev, s.st_ino) == (d.st_dev, d.st_ino):
                    return  # POSIX: renaming a name onto another link of itself does nothing
                _check_kind(dst, d, new, directory=stat.S_ISDIR(s.st_mode))
                trash = self._trash_name()
                os.rename(dst, trash)
            try:
                os.rename(src, dst)
            except OSError:
                if trash:
                    os.rename(trash, dst)
                raise
            self.undo.append(Undo("rename", new, (parent(new), parent(old)), old=old, trash=trash))

    def fsyncdir(self, rel: str) -> None:
        """Make the namespace changes in directory `rel` durable."""
        with self.lock:
            d = norm(rel)
            keep = []
            for u in self.undo:
                if d in u.dirs:
                    self._commit(u)
                else:
                    keep.append(u)
            self.undo = keep
            fd = os.open(self.full(rel), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _commit(self, u: Undo) -> None:
        if u.trash and os.path.lexists(u.trash):
            self._delete(u.trash)

    def _delete(self, path: str) -> None:
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path, ignore_errors=True)
            return
        if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1:
            self._forget(st.st_ino)  # its inode number may be reused
        os.unlink(path)

    # -- power failure and checkpoint -------------------------------------
    def drop(self, keep_names: bool = False) -> dict:
        """Lose everything not fsynced: pages, then namespace changes (newest
        first). keep_names: lose only data, as Jepsen's LazyFS does (names pass through)."""
        with self.lock:
            if keep_names:
                for u in self.undo:
                    self._commit(u)
                self.undo = []
            lost = sum(p.nbytes() for p in self.pending.values())
            files = len(self.pending)
            for ino in list(self.pending):
                self._forget(ino)
            undone, failed, paths = 0, [], []
            for u in reversed(self.undo):
                try:
                    self._undo(u)
                    undone += 1
                    if len(paths) < 10:
                        paths.append(f"{u.kind} {u.path}")
                except OSError as e:
                    failed.append(f"{u.kind} {u.path}: {e.strerror}")
            self.undo = []
            self._empty_trash()
            self.drops += 1
            out = {"dropped_bytes": lost, "files": files, "undone": undone, "undone_first": paths,
                   "undo_failed": failed}
            self.log(f"drop: {out}")
            return out

    def _undo(self, u: Undo) -> None:
        path = os.path.join(self.root, u.path.lstrip("/"))
        if u.kind == "rm":
            if os.path.lexists(path):
                self._delete(path)
        elif u.kind == "back":
            if os.path.lexists(path):
                self._delete(path)
            os.rename(u.trash, path)
        elif u.kind == "rename":
            os.rename(path, os.path.join(self.root, u.old.lstrip("/")))
            if u.trash:
                os.rename(u.trash, path)

    def sync(self) -> dict:
        """Make everything durable (LazyFS's checkpoint): every page, every name."""
        with self.lock:
            files = len(self.pending)
            for ino in list(self.pending):
                self._flush(ino)
            n = len(self.undo)
            for u in self.undo:
                self._commit(u)
            self.undo = []
            return {"synced_files": files, "committed": n}

    def stats(self) -> dict:
        with self.lock:
            return {"pending_bytes": sum(p.nbytes() for p in self.pending.values()),
                    "pending_files": len(self.pending), "undo": len(self.undo),
                    "open": len(self.fds), "drops": self.drops}

    def _empty_trash(self) -> None:
        for name in os.listdir(self.trash):
            p = os.path.join(self.trash, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)


def _check_kind(path: str, st: os.stat_result, rel: str, directory: bool) -> None:
    """POSIX rules for removing or replacing the object at ``path``: a
    directory must be asked for as one and be empty; a file must not be a
    directory (ENOTDIR, ENOTEMPTY, EISDIR)."""
    if directory:
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, rel)
        if os.listdir(path):
            raise OSError(errno.ENOTEMPTY, rel)
    elif stat.S_ISDIR(st.st_mode):
        raise OSError(errno.EISDIR, rel)
