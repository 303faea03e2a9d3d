"""Start-up checks of ``squall serve`` that run before anything is written.

Each problem is a ValueError whose message is one line a user can act on (the CLI
prints it as ``squall: ...`` and exits 2): the listening port taken, a data, backend or
cache path that is a file or not writable, half-configured or damaged credentials, a
cluster member whose ``--listen`` is not its own entry in ``--peers``, cluster members
without shared S3 credentials, a TLS certificate or key that is missing, unreadable or
not a pair, a ``--peer-ca`` that is not a CA bundle.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import urllib.parse
from pathlib import Path

from gateway.auth.credentials import Credentials, load_or_generate
from gateway.client.tls import check as check_tls_files
from gateway.client.tls import client_context, tls_files
from gateway.config.settings import ListenAddress, Settings

_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def check_paths(settings: Settings) -> None:
    """Every directory the gateway will create or write: a directory, or creatable."""
    check_directory(settings.data_dir, "--data-dir")
    spec = settings.backend_spec
    if spec.kind == "posix":
        check_directory(Path(spec.args), "--backend posix:")
    if settings.cache_mode == "elastic":
        check_directory(settings.cache_volume_root or settings.data_dir / "volumes",
                        "--cache-volume-root")
    elif settings.cache_volumes:
        for volume in settings.cache_volumes:
            check_directory(Path(volume.path), "cache volume")
    elif settings.cache_dir is not None:
        check_directory(settings.cache_dir, "--cache-dir")


def check_directory(path: Path, what: str) -> None:
    """``path`` is a writable directory, or can be made one (its nearest existing
    ancestor is a writable directory). Creates nothing."""
    label = f"{what}{path}" if what.endswith(":") else f"{what} {path}"
    probe = path.absolute()
    while True:
        try:
            os.stat(probe)
            break
        except FileNotFoundError:
            if probe.parent == probe:
                raise ValueError(f"{label}: no such file system root") from None
            probe = probe.parent
        except NotADirectoryError:
            probe = probe.parent  # a file on the way: reported below
        except PermissionError:
            raise ValueError(f"{label} is not reachable: permission denied on "
                             f"{probe}") from None
    if not os.path.isdir(probe):
        where = "is a file" if probe == path.absolute() else f"is under {probe}, a file"
        raise ValueError(f"{label} {where}, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK) or _read_only(probe):
        place = "" if probe == path.absolute() else f" ({probe} is not)"
        raise ValueError(f"{label} is not writable{place}")


def _read_only(path: Path) -> bool:
    """A read-only mount (``os.access`` answers yes to root on one)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def bind_port(address: ListenAddress) -> socket.socket:
    """The listening socket of ``address``, bound (as uvicorn binds it), not listening
    yet; ValueError when the address is taken or not this machine's."""
    try:
        infos = socket.getaddrinfo(address.host or None, address.port,
                                   type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ValueError(f"cannot listen on {address.host}:{address.port}: "
                         f"{exc.strerror}") from exc
    family, kind, proto, _, sockaddr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason += " (is another gateway running?)"
        raise ValueError(f"cannot listen on {address.host}:{address.port}: "
                         f"{reason}") from exc
    sock.set_inheritable(True)
    return sock


def check_cluster(settings: Settings) -> None:
    """With ``--peers``: this member's entry is where it listens. With a coordinator: it
    has a URL the others can reach. A cluster shares configured S3 credentials (a
    generated pair would differ on every member)."""
    clustering = settings.clustering()
    if clustering is None:
        return
    if not (settings.access_key and settings.secret_key) and (
            clustering.coordinator is not None
            or (clustering.ring is not None and len(clustering.ring.members) > 1)):
        raise ValueError("every member of a cluster needs the same S3 credentials: set "
                         "SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY (the same on each member)")
    if clustering.ring is None:
        if clustering.advertise_url.startswith("https://") and settings.tls_cert is None:
            raise ValueError(f"--advertise-url {clustering.advertise_url} is https://, but "
                             "this member serves plain HTTP: give it --tls-cert and "
                             "--tls-key")
        return
    ring = clustering.ring
    own = ring.members[ring.self_index]
    listen = settings.listen_address
    url = urllib.parse.urlsplit(own)
    port = url.port or (443 if url.scheme == "https" else 80)
    mismatch = port != listen.port or not _same_host(url.hostname or "", listen.host)
    if mismatch:
        raise ValueError(f"member {ring.self_index} of --peers is {own}, but this node "
                         f"listens on {listen.host}:{listen.port}: give --node-id the index "
                         "of the member that listens here, or --listen its address")
    if url.scheme == "https" and settings.tls_cert is None:
        raise ValueError(f"member {ring.self_index} of --peers is {own}, but this node "
                         "serves plain HTTP: give it --tls-cert and --tls-key")


def check_tls(settings: Settings) -> None:
    """``--tls-cert``/``--tls-key`` load as a pair; ``--peer-ca`` loads as CA
    certificates."""
    files = tls_files(settings.tls_cert, settings.tls_key)
    if files is not None:
        check_tls_files(files)
    if settings.peer_ca is not None:
        client_context(settings.peer_ca)


def _same_host(member_host: str, listen_host: str) -> bool:
    """Whether a member URL's host can be the address a node listens on (a wildcard
    listen address matches any; a name that does not resolve here is given the benefit
    of the doubt)."""
    if listen_host in _WILDCARDS or member_host.lower() == listen_host.lower():
        return True
    mine = _addresses(listen_host)
    theirs = _addresses(member_host)
    if not mine or not theirs:
        return True
    return bool(mine & theirs)


def _addresses(host: str) -> set[str]:
    try:
        return {str(ipaddress.ip_address(host))}
    except ValueError:
        pass
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (socket.gaierror, UnicodeError):
        return set()


def preflight(settings: Settings, *, bind: bool = True) -> tuple[Credentials,
                                                                socket.socket | None]:
    """Run every check; the credentials to serve with (a generated pair is not saved
    yet) and, with ``bind``, the bound listening socket (else the port is only tried)."""
    check_paths(settings)
    credentials = load_or_generate(settings.data_dir, settings.access_key,
                                   settings.secret_key)
    check_cluster(settings)
    check_tls(settings)
    sock = bind_port(settings.listen_address)
    if not bind:
        sock.close()
        return credentials, None
    return credentials, sock
