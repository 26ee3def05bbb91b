"""Remote control of one host over SSH (paramiko): commands, daemons, files.

Used by the docker backend (containers running sshd) and the ssh backend (hosts
that already exist). Host keys are never accepted on first sight: the caller
hands in the keys it trusts (read from the container, or a known_hosts file)
and paramiko's RejectPolicy refuses anything else.

Daemons are started detached (setsid + nohup, stdin from /dev/null) so that
they survive the SSH channel; their pid and start time go to a pid file on the
host, and signals go to that pid only while the start time still matches (no
signal to a recycled pid).
"""
from __future__ import annotations

import errno
import io
import os
import posixpath
import select
import shlex
import signal
import socket
import stat
import subprocess
import threading
import time
from typing import Callable

import paramiko

from harness.remote import ClusterError

# Channels open at once on one connection; OpenSSH's default MaxSessions is 10.
MAX_CHANNELS = 8
SKIP_NAMES = {"__pycache__", ".pytest_cache"}


class SshUnreachable(ClusterError):
    """Nothing answered on the SSH port (yet): callers that just started the
    host may retry; the others report it."""


def describe_key(key: paramiko.PKey) -> str:
    """Type and SHA256 fingerprint, as ssh-keygen -l shows them."""
    return f"{key.get_name()} {key.fingerprint}"


class GeneratedEd25519Key(paramiko.Ed25519Key):
    """An ed25519 key that remembers its OpenSSH text: paramiko reads
    ed25519 keys but cannot write them."""

    openssh_text: str = ""

    def write_private_key(self, file_obj, password=None) -> None:
        file_obj.write(self.openssh_text)

    def write_private_key_file(self, filename, password=None) -> None:
        fd = os.open(filename, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.openssh_text)


def new_ed25519_key() -> GeneratedEd25519Key:
    """A fresh ed25519 key (paramiko cannot generate one; cryptography can)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    text = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()
    key = GeneratedEd25519Key.from_private_key(io.StringIO(text))
    key.openssh_text = text
    return key


def public_line(key: paramiko.PKey, comment: str) -> str:
    """The authorized_keys line of a key."""
    return f"{key.get_name()} {key.get_base64()} {comment}"


class SshRemote:
    """A host reached over SSH. `address` is the IP other hosts use; `host`
    and `port` are where sshd listens (the same IP by default)."""

    def __init__(self, name: str, address: str, *, pkey: paramiko.PKey,
                 host_keys: paramiko.HostKeys, user: str = "root", host: str | None = None,
                 port: int = 22, state_dir: str = "/tmp/harness-daemons",
                 key_hint: str = "the cluster key", known_hosts_hint: str = "the pinned host key",
                 connect_timeout: float = 10.0,
                 on_start: Callable[[str, int, int], None] | None = None):
        self.name = name
        self.address = address
        self.host = host or address
        self.port = port
        self.user = user
        self.state_dir = state_dir
        self._pkey = pkey
        self._host_keys = host_keys
        self._key_hint = key_hint
        self._known_hosts_hint = known_hosts_hint
        self._connect_timeout = connect_timeout
        self._on_start = on_start
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_lock = threading.Lock()
        self._connect_lock = threading.Lock()
        self._channels = threading.BoundedSemaphore(MAX_CHANNELS)
        self._daemons: dict[str, tuple[int, str]] = {}  # name -> (pid, start time)

    # -- connection --------------------------------------------------------
    @property
    def where(self) -> str:
        port = "" if self.port == 22 else f":{self.port}"
        return f"{self.name} ({self.user}@{self.host}{port})"

    def connect(self) -> None:
        """Open the SSH connection; a one-line ClusterError naming the host and
        the fix when it cannot be opened."""
        with self._connect_lock:
            if self._client is not None and self._transport_alive():
                return
            client = paramiko.SSHClient()
            host_keys = client.get_host_keys()
            for hostname, keys in self._host_keys.items():
                for keytype, key in keys.items():
                    host_keys.add(hostname, keytype, key)
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            try:
                client.connect(self.host, port=self.port, username=self.user, pkey=self._pkey,
                               timeout=self._connect_timeout, banner_timeout=self._connect_timeout,
                               auth_timeout=self._connect_timeout, look_for_keys=False,
                               allow_agent=False)
            except paramiko.BadHostKeyException as e:
                client.close()
                raise ClusterError(
                    f"{self.where}: host key changed (offered {describe_key(e.key)}, expected "
                    f"{describe_key(e.expected_key)}); if the host was reinstalled, verify the new "
                    f"key and replace its entry in {self._known_hosts_hint} "
                    f"(ssh-keygen -R {self.host})") from None
            except paramiko.AuthenticationException:
                client.close()
                raise ClusterError(
                    f"{self.where}: the key was refused ({self._key_hint}); pass the right "
                    f"--ssh-key or add its public key to ~{self.user}/.ssh/authorized_keys "
                    f"on {self.host}") from None
            except paramiko.SSHException as e:
                client.close()
                if "known_hosts" in str(e):
                    raise ClusterError(
                        f"{self.where}: host key unknown (not in {self._known_hosts_hint}); "
                        f"verify the host's key and add it, e.g. ssh-keyscan -p {self.port} "
                        f"{self.host} >> KNOWN_HOSTS") from None
                raise ClusterError(f"{self.where}: SSH failed ({e}); check that sshd runs on "
                                   f"{self.host} port {self.port}") from None
            except (OSError, EOFError) as e:
                client.close()
                reason = "timed out" if isinstance(e, socket.timeout) else (str(e) or type(e).__name__)
                raise SshUnreachable(
                    f"{self.where}: unreachable over SSH ({reason}); check that the host is up, "
                    f"the address is right and sshd listens on port {self.port}") from None
            transport = client.get_transport()
            assert transport is not None
            transport.set_keepalive(5)
            self._client = client

    def _transport_alive(self) -> bool:
        t = self._client.get_transport() if self._client else None
        return t is not None and t.is_active()

    def _ssh(self) -> paramiko.SSHClient:
        if self._client is None or not self._transport_alive():
            self.connect()
        assert self._client is not None
        return self._client

    def close(self) -> None:
        with self._sftp_lock:
            if self._sftp is not None:
                self._sftp.close()
                self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- commands ----------------------------------------------------------
    def run_shell(self, command: str, check: bool = True, timeout: float = 30,
                  argv: list[str] | None = None) -> subprocess.CompletedProcess:
        """Run one shell command line (already quoted) to completion."""
        args = argv if argv is not None else command
        with self._channels:
            try:
                chan = self._ssh().get_transport().open_session(timeout=self._connect_timeout)
            except (paramiko.SSHException, OSError, EOFError) as e:
                raise ClusterError(f"{self.where}: cannot open an SSH channel ({e}); "
                                   "check that the host is up and sshd runs") from None
            try:
                chan.exec_command(command)
                out, err = _drain(chan, timeout, args)
                rc = chan.recv_exit_status()
            finally:
                chan.close()
        if check and rc != 0:
            raise subprocess.CalledProcessError(rc, args, out, err)
        return subprocess.CompletedProcess(args, rc, out, err)

    def run(self, argv: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        # `timeout` on the host too (a little later than ours), so that nothing
        # lingers after we give up.
        command = f"timeout -k 2 {timeout + 2:g} {shlex.join(argv)}"
        return self.run_shell(command, check=check, timeout=timeout, argv=list(argv))

    # -- daemons -----------------------------------------------------------
    def _pid_file(self, name: str) -> str:
        return posixpath.join(self.state_dir, f"{name}.pid")

    def start_daemon(self, name: str, argv: list[str], log_path: str, env: dict | None = None) -> int:
        if self.daemon_running(name):
            pid, _ = self._daemons[name]
            raise RuntimeError(f"{self.name}: daemon {name} is still running (pid {pid})")
        q = shlex.quote
        env_args = " ".join(q(f"{k}={v}") for k, v in (env or {}).items())
        pid_file = self._pid_file(name)
        # The background job is not a process-group leader, so setsid execs in
        # place: $! is the daemon's own pid (env and nohup exec too).
        script = (
            f"mkdir -p {q(posixpath.dirname(log_path) or '.')} {q(self.state_dir)} && "
            f"{{ setsid nohup env {env_args} {shlex.join(argv)} >> {q(log_path)} 2>&1 < /dev/null & }} && "
            f"pid=$! && st=$(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -d' ' -f20) && "
            f"st=${{st:-0}} && "
            f"echo \"$pid $st\" > {q(pid_file)} && echo \"$pid $st\""
        )
        out = self.run_shell(script, timeout=30).stdout.split()
        if len(out) != 2:
            raise ClusterError(f"{self.where}: could not start daemon {name} (got {out!r})")
        pid, start = int(out[0]), out[1]
        self._daemons[name] = (pid, start)
        if self._on_start:
            self._on_start(name, pid, int(start))
        return pid

    def _guard(self, name: str) -> str | None:
        """Shell test that is true while the recorded process is the same one
        and has not exited (zombies count as exited)."""
        entry = self._daemons.get(name)
        if entry is None:
            return None
        pid, start = entry
        return (f"s=$(sed 's/.*) //' /proc/{pid}/stat 2>/dev/null | cut -d' ' -f1,20) && "
                f"[ \"${{s#* }}\" = {start} ] && [ \"${{s%% *}}\" != Z ] && [ \"${{s%% *}}\" != X ]")

    def signal(self, name: str, sig: int) -> None:
        guard = self._guard(name)
        if guard is None:
            return
        pid = self._daemons[name][0]
        self.run_shell(f"if {guard}; then kill -{int(sig)} {pid} 2>/dev/null; fi; true", timeout=15)
        if sig == signal.SIGKILL:  # wait until it is gone, as the local remote does
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and self.daemon_running(name):
                time.sleep(0.05)

    def daemon_running(self, name: str) -> bool:
        guard = self._guard(name)
        if guard is None:
            return False
        return self.run_shell(f"{guard}", check=False, timeout=15).returncode == 0

    # -- files ---------------------------------------------------------------
    def _sftp_client(self) -> paramiko.SFTPClient:
        if self._sftp is None or not self._transport_alive():
            self._sftp = self._ssh().open_sftp()
        return self._sftp

    def put(self, local_path: str, remote_path: str) -> None:
        with self._sftp_lock:
            sftp = self._sftp_client()
            if os.path.isdir(local_path):
                _sftp_makedirs(sftp, remote_path)
                for root, dirs, files in os.walk(local_path):
                    dirs[:] = sorted(d for d in dirs if d not in SKIP_NAMES)
                    rel = os.path.relpath(root, local_path)
                    target = remote_path if rel == "." else posixpath.join(remote_path, *rel.split(os.sep))
                    for d in dirs:
                        _sftp_mkdir(sftp, posixpath.join(target, d))
                    for f in files:
                        if not f.endswith(".pyc"):
                            src = os.path.join(root, f)
                            dst = posixpath.join(target, f)
                            sftp.put(src, dst)
                            sftp.chmod(dst, os.stat(src).st_mode & 0o777)
            else:
                _sftp_makedirs(sftp, posixpath.dirname(remote_path))
                sftp.put(local_path, remote_path)

    def get(self, remote_path: str, local_path: str) -> None:
        with self._sftp_lock:
            sftp = self._sftp_client()
            try:
                attrs = sftp.stat(remote_path)
            except FileNotFoundError:
                raise FileNotFoundError(errno.ENOENT, f"{self.name}: no such file", remote_path) from None
            _sftp_get(sftp, remote_path, local_path, attrs)


def _drain(chan: paramiko.Channel, timeout: float, argv) -> tuple[str, str]:
    """Read stdout and stderr together until the command has exited and its
    output is closed. A background child that keeps the output open does not
    hold us past a short grace after the exit."""
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + timeout
    exited_at = None
    while True:
        while chan.recv_ready():
            out += chan.recv(65536)
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
        now = time.monotonic()
        if chan.exit_status_ready():
            exited_at = exited_at or now
            if chan.eof_received or now - exited_at > 0.5:
                while chan.recv_ready():
                    out += chan.recv(65536)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                break
        if now >= deadline:
            raise subprocess.TimeoutExpired(argv, timeout, bytes(out), bytes(err))
        select.select([chan], [], [], min(deadline - now, 0.05 if exited_at else 1.0))
    return out.decode(errors="replace"), err.decode(errors="replace")


def _sftp_mkdir(sftp: paramiko.SFTPClient, path: str) -> None:
    try:
        sftp.mkdir(path)
    except OSError:
        if not stat.S_ISDIR(sftp.stat(path).st_mode):
            raise


def _sftp_makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    if path in ("", "/", "."):
        return
    try:
        if stat.S_ISDIR(sftp.stat(path).st_mode):
            return
    except FileNotFoundError:
        pass
    _sftp_makedirs(sftp, posixpath.dirname(path))
    _sftp_mkdir(sftp, path)


def _sftp_get(sftp: paramiko.SFTPClient, remote: str, local: str, attrs) -> None:
    if stat.S_ISDIR(attrs.st_mode):
        os.makedirs(local, exist_ok=True)
        for entry in sftp.listdir_attr(remote):
            _sftp_get(sftp, posixpath.join(remote, entry.filename),
                      os.path.join(local, entry.filename), entry)
    else:
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        sftp.get(remote, local)
