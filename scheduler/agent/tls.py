"""`paika agent init`: a small private CA and a certificate for each agent, for small sites.

The CA (`ca.pem`, `ca-key.pem`) is made once and reused: a second run only adds hosts. The
scheduler trusts `ca.pem` (PAIKA_AGENT_CA_FILE) and checks each agent's name against its
certificate, so a host's certificate names it as its agent URL does (a DNS name or an IP
address). Keys are written 0600, and never over an existing file. Imported only by that
command: the agent serving jobs never loads `cryptography`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


class TlsSetupError(Exception):
    """A file that cannot be made or read, or a host name no certificate can carry."""


@dataclass(frozen=True)
class Authority:
    """The private CA: its certificate and key, and where they are."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_path: Path
    key_path: Path


@dataclass(frozen=True)
class HostFiles:
    """One host's certificate and key files."""

    name: str
    cert_path: Path
    key_path: Path


def make_or_load_ca(directory: Path, *, now: dt.datetime | None = None) -> Authority:
    """The CA in `directory`: loaded when both files are there, else made."""
    cert_path, key_path = directory / "ca.pem", directory / "ca-key.pem"
    if cert_path.exists() and key_path.exists():
        return _load_ca(cert_path, key_path)
    if cert_path.exists() or key_path.exists():
        raise TlsSetupError(
            f"{directory} holds only half a CA (ca.pem or ca-key.pem); move it away"
        )
    directory.mkdir(parents=True, exist_ok=True)
    at = now or dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "paika agents CA")])
    cert = (
        _builder(name, name, key.public_key(), at, CA_DAYS)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return Authority(cert, key, cert_path, key_path)


def make_host(ca: Authority, directory: Path, name: str, *, days: int = 825) -> HostFiles:
    """A certificate for the agent reached as `name`, signed by the CA, and its key."""
    if not HOST_NAME.match(name):
        raise TlsSetupError(f"{name!r} is not a host name or IP address (e.g. gpu-01.lab)")
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}-key.pem"
    if cert_path.exists() or key_path.exists():
        raise TlsSetupError(
            f"{cert_path} or {key_path} exists already; remove them to make new ones"
        )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        _builder(subject, ca.cert.subject, key.public_key(), dt.datetime.now(dt.UTC), days)
        .add_extension(x509.SubjectAlternativeName([_alt_name(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return HostFiles(name, cert_path, key_path)


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    at: dt.datetime,
    days: int,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(at - dt.timedelta(minutes=5))  # a little clock skew between hosts
        .not_valid_after(at + dt.timedelta(days=days))
    )


def _load_ca(cert_path: Path, key_path: Path) -> Authority:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise TlsSetupError(f"cannot read the CA in {cert_path.parent}: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TlsSetupError(f"{key_path} is not a key made by paika agent init")
    return Authority(cert, key, cert_path, key_path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    """Create `path` with `mode` from the start (a key is never readable by others, even
    for an instant), refusing to overwrite."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise TlsSetupError(f"cannot create {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, mode)  # the umask may have taken bits away from a certificate's mode
