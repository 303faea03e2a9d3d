"""The client credentials of every client of the gateway: ``SQUALL_ACCESS_KEY``/
``SQUALL_SECRET_KEY``, else ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (with
``AWS_SESSION_TOKEN`` when set), as S3 clients read them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

#: The variable pairs read, in order of preference.
PAIRS = (("SQUALL_ACCESS_KEY", "SQUALL_SECRET_KEY"),
         ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"))
#: Where the credentials come from, as the commands' help and messages say it.
FROM = "SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"


class MissingCredentials(ValueError):
    """Neither pair of variables is set (both of a pair are needed)."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """A key pair (and, for temporary AWS credentials, a session token)."""

    access_key: str
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)


def credentials_from_env(environ: Mapping[str, str] = os.environ) -> Credentials:
    """The first pair of :data:`PAIRS` set in ``environ``; MissingCredentials (one line)
    when neither is."""
    for access, secret in PAIRS:
        if environ.get(access) and environ.get(secret):
            token = environ.get("AWS_SESSION_TOKEN") if access.startswith("AWS") else None
            return Credentials(environ[access], environ[secret], token or None)
    raise MissingCredentials(f"no credentials: set {FROM}")
