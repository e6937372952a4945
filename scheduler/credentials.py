"""Each host's own agent token, and how the scheduler presents it although it keeps no copy.

token = "pk1_" + base64url(HMAC-SHA256(secret, "paika-agent-token" \\0 host \\0 generation \\0 salt))

The secret is 32 random bytes in a file of the scheduler's (PAIKA_AGENT_SECRET_FILE, 0600,
made by `paika agent-secret`). The database keeps each host's generation, a public salt
(so a host removed and added again under its old name gets a new token) and the token's
SHA-256 only, so a copy of the database opens no agent, and a leaked agent token opens only
its own host. A token is shown once, when issued (`/gpu admin host add|rotate`); rotating
bumps the generation, revoking stops the scheduler from using the host until a new one is
issued. Hosts of generation 0 have no token of their own and use the shared
PAIKA_AGENT_TOKEN (installs from before per-host tokens, the demo).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from scheduler.errors import PaikaError

SECRET_BYTES = 32
TOKEN_PREFIX = "pk1_"
# Where the install command puts a host's token (the agent reads PAIKA_AGENT_TOKEN_FILE).
HOST_TOKEN_PATH = "/etc/paika/agent.token"


def travels_in_clear(url: str) -> bool:
    """Whether the scheduler reaches this agent over plain HTTP across a network (the token
    and each job's command readable on the way); loopback is not a network."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        return False
    host = parts.hostname or ""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


# Addresses a cloud's instance metadata service answers on (AWS, GCP, Azure, Tianyi Cloud:
# 169.254.169.254, AWS over IPv6: fd00:ec2::254, Alibaba Cloud: 100.100.100.200), and its
# names: a scheduler that polled one would hand its agent token to the metadata service and
# read the instance's credentials back as an "agent".
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "instance-data"})


def unsafe_agent_url(url: str) -> str | None:
    """Why the scheduler must not be pointed at `url` for an agent, as a code, or None:
    "credentials" (a user or password in it: the URL is shown to admins and logged),
    "metadata" (a cloud's metadata service), "link_local" (169.254.0.0/16, fe80::/10: no
    agent's address, and where metadata services live)."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "credentials"
    name = (parts.hostname or "").rstrip(".").lower()
    if name in METADATA_NAMES:
        return "metadata"
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return None  # a host name: what it resolves to is the network's matter
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return "metadata"
    if address.is_link_local:
        return "link_local"
    return None


def without_credentials(url: str) -> str:
    """`url` with any user and password in it replaced by ***, to show it back."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"***@{host}").geturl()


class AgentSecretError(PaikaError):
    """The agent secret file is missing, open to others or not a secret; says how to fix it."""


def host_token(secret: bytes, host: str, generation: int, salt: str) -> str:
    """The token of `host` at `generation`, derived from the scheduler's secret."""
    parts = ("paika-agent-token", host, str(generation), salt)
    message = b"\0".join(part.encode() for part in parts)
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    return TOKEN_PREFIX + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def token_sha256(token: str) -> str:
    """What the database keeps of a token (a 256-bit random value needs no slow hash)."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_secret(path: Path) -> bool:
    """Write a new secret to `path` (0600) unless one is there; True when it was made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(SECRET_BYTES) + "\n")
    return True


def read_secret(path: Path) -> bytes:
    """The secret in `path`; AgentSecretError saying how to fix a missing, open or bad file."""
    try:
        mode = os.stat(path).st_mode
        text = path.read_text().strip()
    except OSError as exc:
        raise AgentSecretError(
            f"cannot read the agent secret {path}: {exc.strerror}; "
            f"make one with: paika agent-secret --file {path}"
        ) from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AgentSecretError(
            f"the agent secret {path} can be read by others; run: chmod 600 {path}"
        )
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < SECRET_BYTES:
        raise AgentSecretError(
            f"{path} does not hold an agent secret ({SECRET_BYTES * 2} hex digits); "
            "make one with paika agent-secret --file <new file>"
        )
    return secret


class HostCredentialRow(Protocol):
    """What the scheduler reads of a host to present its token."""

    @property
    def name(self) -> str: ...
    @property
    def token_generation(self) -> int: ...
    @property
    def token_salt(self) -> str | None: ...
    @property
    def token_sha256(self) -> str | None: ...
    @property
    def token_revoked_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class HostKey:
    """The token to present to one host, or why none can be (`problem`, for people)."""

    token: str | None
    problem: str | None = None


class AgentKeys:
    """The tokens of every host, worked out from their rows: the poller and the dispatcher
    both ask here, so a rotation or revocation takes effect in the next cycle."""

    def __init__(self, shared_token: str | None, secret: bytes | None) -> None:
        self.shared_token, self.secret = shared_token, secret
        self._keys: dict[str, HostKey] = {}

    def refresh(self, rows: Iterable[HostCredentialRow]) -> None:
        """Work out each host's key from its row (called once a cycle)."""
        self._keys = {row.name: self.key_of(row) for row in rows}

    def key(self, host: str) -> HostKey:
        """The key last worked out for `host` (the shared token for a host not seen yet)."""
        return self._keys.get(host) or self._shared(host)

    def key_of(self, row: HostCredentialRow) -> HostKey:
        if row.token_revoked_at is not None:
            return HostKey(
                None,
                f"its agent token was revoked; issue a new one: /gpu admin host rotate {row.name}",
            )
        if not row.token_generation:
            return self._shared(row.name)
        if self.secret is None:
            return HostKey(
                None,
                "it has a token of its own but PAIKA_AGENT_SECRET_FILE is not set on this "
                "scheduler; set it to the secret its token was issued with",
            )
        token = host_token(self.secret, row.name, row.token_generation, row.token_salt or "")
        if not hmac.compare_digest(token_sha256(token), row.token_sha256 or ""):
            return HostKey(
                None,
                "its token was issued under another agent secret than this scheduler's; use "
                f"that secret, or issue a new token: /gpu admin host rotate {row.name}",
            )
        return HostKey(token)

    def revoked_token_of(self, row: HostCredentialRow) -> str | None:
        """The token a host's agent should be told to refuse: its own, revoked one (None when
        it has none, or this scheduler cannot work it out)."""
        if row.token_revoked_at is None or not row.token_generation or self.secret is None:
            return None
        token = host_token(self.secret, row.name, row.token_generation, row.token_salt or "")
        return token if hmac.compare_digest(token_sha256(token), row.token_sha256 or "") else None

    def _shared(self, host: str) -> HostKey:
        if self.shared_token:
            return HostKey(self.shared_token)
        return HostKey(
            None,
            "it has no token of its own and PAIKA_AGENT_TOKEN is not set; "
            f"issue one: /gpu admin host rotate {host}",
        )
