"""TLS of the listening port: the server's SSLContext, checked at start, reloaded on SIGHUP.

The context is built once per process and handed to uvicorn; :meth:`ServerTls.reload`
loads the certificate chain again into the same context. OpenSSL copies the chain into
each connection when it is accepted, so connections already open keep the old
certificate and every new handshake gets the new one: nothing is dropped. A reload whose
files are missing, unreadable or do not match leaves the running certificate in place.
"""

from __future__ import annotations

import argparse
import logging
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("squall.tls")


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A PEM certificate chain (server certificate first) and its private key."""

    cert: Path
    key: Path


def tls_files(cert: Path | None, key: Path | None) -> TlsFiles | None:
    """The pair from ``--tls-cert`` / ``--tls-key``; None without either; ValueError for
    one without the other."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else \
            ("--tls-key", "--tls-cert")
        raise ValueError(f"{given} needs {missing} too")
    return TlsFiles(cert, key)


def _load_chain(context: ssl.SSLContext, files: TlsFiles) -> None:
    """Load ``files`` into ``context``; ValueError whose one line names the problem."""
    for flag, path, marker in (("--tls-cert", files.cert, b"-----BEGIN CERTIFICATE-----"),
                               ("--tls-key", files.key, b"PRIVATE KEY-----")):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"{flag} {path}: cannot read it: "
                             f"{exc.strerror or exc}") from exc
        if marker not in data:
            kind = "certificate" if flag == "--tls-cert" else "private key"
            raise ValueError(f"{flag} {path}: no PEM {kind} in it")
    try:
        context.load_cert_chain(files.cert, files.key)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ValueError(f"--tls-key {files.key} is not the key of the certificate in "
                             f"--tls-cert {files.cert}") from exc
        raise ValueError(f"cannot load --tls-cert {files.cert} with --tls-key {files.key}: "
                         f"{exc.reason or exc}") from exc
    except OSError as exc:  # the files changed under us
        raise ValueError(f"cannot load --tls-cert {files.cert} with --tls-key {files.key}: "
                         f"{exc.strerror or exc}") from exc


def _new_context() -> ssl.SSLContext:
    # The library's server defaults: TLS 1.2 or later, its recommended ciphers, no
    # compression, no client certificates.
    return ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)


def check(files: TlsFiles) -> None:
    """ValueError (one line) unless the pair loads: readable PEM files that match."""
    _load_chain(_new_context(), files)


class ServerTls:
    """The SSLContext of the listening port, whose certificate :meth:`reload` replaces."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self.context = _new_context()
        _load_chain(self.context, files)

    def reload(self) -> bool:
        """Load the files again (SIGHUP); False, logged, if they do not load (the
        previous certificate stays)."""
        try:
            # Tried on a scratch context first: a failed load can leave a context
            # with a new certificate and the old key.
            check(self.files)
            _load_chain(self.context, self.files)
        except ValueError as exc:
            log.error("TLS certificate not reloaded, the previous one stays: %s", exc)
            return False
        log.warning("TLS certificate reloaded from %s", self.files.cert)
        return True


def client_context(ca: Path | None, flag: str = "--peer-ca") -> ssl.SSLContext:
    """A client context that verifies servers against the system's CAs and, given
    ``ca``, the PEM CA certificates in it; ValueError (one line) for a bad ``ca``."""
    context = ssl.create_default_context()
    if ca is None:
        return context
    try:
        context.load_verify_locations(cafile=ca)
    except OSError as exc:
        raise ValueError(f"{flag} {ca}: cannot read it: {exc.strerror or exc}") from exc
    except ssl.SSLError as exc:
        raise ValueError(f"{flag} {ca}: no PEM CA certificate in it "
                         f"({exc.reason or exc})") from exc
    return context


def add_ca_bundle_option(parser: argparse.ArgumentParser) -> None:
    """``--ca-bundle FILE`` of the client commands."""
    parser.add_argument("--ca-bundle", type=Path, metavar="FILE",
                        help="PEM CA certificate(s) that verify an https:// endpoint "
                             "(default: $AWS_CA_BUNDLE, else the system's CAs)")


def ca_bundle(given: Path | None) -> Path | None:
    """``--ca-bundle``, else ``AWS_CA_BUNDLE`` (as the AWS CLI and SDKs read it)."""
    if given is not None:
        return given
    env = os.environ.get("AWS_CA_BUNDLE")
    return Path(env) if env else None


def endpoint_context(given: Path | None) -> ssl.SSLContext:
    """The client context of a command's ``--endpoint``; ValueError for a bad bundle."""
    return client_context(ca_bundle(given), "--ca-bundle")
