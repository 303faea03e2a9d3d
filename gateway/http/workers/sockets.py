"""The sockets of ``--workers N``: the shared listening port and the workers' Unix sockets.

On Linux every worker listens on its own socket bound to the port with SO_REUSEPORT:
the kernel spreads new connections over the listening sockets by a hash of the
connection, so 16 keep-alive clients land about 8/8 on two workers. The parent creates
each worker's socket (bound, not listening) and the worker calls ``listen()`` once its
cache is ready, so a starting or dead worker gets no connections. One socket inherited by
all workers instead puts whole bursts of connections on whichever worker wakes first
(measured: 16/0 in a quarter of the trials; docs/workers.md). The parent keeps a bound,
non-listening socket of its own that holds the port while workers restart. Elsewhere
(no SO_REUSEPORT balancing) all workers share the parent's one listening socket.

Member-to-member traffic goes over a Unix socket per worker in a private directory
(mode 0700).
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import sys
import tempfile
from pathlib import Path

BACKLOG = 2048  # uvicorn's default
RUN_DIR = "run"
# sun_path is 108 bytes on Linux (104 on the BSDs); leave room for the terminating NUL.
MAX_SOCKET_PATH = 100
REUSEPORT = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


class Port:
    """The gateway's TCP port, held by the parent; :meth:`for_worker` makes the socket a
    worker serves (the caller closes its copy once the worker has it)."""

    def __init__(self, host: str, port: int) -> None:
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        except socket.gaierror as exc:
            raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        self._family, self._kind, self._proto = family, kind, proto
        self._v6only = family == socket.AF_INET6 and host in ("::", "")
        where = f"{host}:{port}"
        # Without SO_REUSEPORT first: a port somebody else holds fails here, even if that
        # somebody also uses SO_REUSEPORT (another gateway of the same user).
        self._sock = self._bind(address, where, reuseport=False)
        if REUSEPORT:
            address = self._sock.getsockname()  # the port the kernel chose for port 0
            self._sock.close()
            self._sock = self._bind(address, where, reuseport=True)
        else:
            self._sock.listen(BACKLOG)
            self._sock.set_inheritable(True)
        self.address = self._sock.getsockname()

    @property
    def port(self) -> int:
        return int(self.address[1])

    def _bind(self, address: tuple[object, ...], where: str, *,
              reuseport: bool) -> socket.socket:
        sock = socket.socket(self._family, self._kind, self._proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuseport:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if self._v6only:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind(address)
        except OSError as exc:
            sock.close()
            raise ValueError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
        return sock

    def for_worker(self) -> socket.socket:
        """A socket for one worker, inheritable; the worker calls ``listen()`` on it."""
        if not REUSEPORT:
            return self._sock
        sock = self._bind(self.address, f"port {self.port}", reuseport=True)
        sock.set_inheritable(True)
        return sock

    def release(self, sock: socket.socket) -> None:
        """The parent's copy of a worker's socket, once the worker has it."""
        if sock is not self._sock:
            sock.close()

    def close(self) -> None:
        self._sock.close()


def run_dir(data_dir: Path, workers: int) -> Path:
    """The directory of the workers' Unix sockets: ``<data-dir>/run``, or a private
    directory under the system's temporary directory when that path is too long for a
    socket address. Created with mode 0700."""
    preferred = data_dir.resolve() / RUN_DIR
    if len(str(socket_path(preferred, workers - 1))) <= MAX_SOCKET_PATH:
        preferred.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(preferred, 0o700)
        return preferred
    tag = hashlib.blake2b(str(preferred).encode(), digest_size=6).hexdigest()
    path = Path(tempfile.gettempdir()) / f"squall-{os.getuid()}-{tag}"
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ValueError(f"{path} (for the workers' sockets) is not a directory of this "
                         "user; use a shorter --data-dir")
    os.chmod(path, 0o700)
    return path


def socket_path(directory: Path, index: int) -> Path:
    return directory / f"worker-{index}.sock"


def unix_listener(path: Path) -> socket.socket:
    """A listening Unix socket at ``path`` (a stale one from a crash is replaced)."""
    try:
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock
