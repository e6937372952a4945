"""Which object store a spec names: `s3://bucket/prefix` is S3, anything else a local folder.

The composition root calls `open_store(settings.object_store_spec(), endpoint_url=
settings.s3_endpoint_url, region=settings.s3_region, addressing_style=
settings.s3_addressing_style, signature_version=settings.s3_signature_version)`. Opening asks
nothing of the network: an unreachable store is found out by the first write (and spooled).
"""

from __future__ import annotations

from pathlib import Path

from storage.objects.base import ObjectStore
from storage.objects.local import LocalStore


def open_store(
    spec: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    addressing_style: str | None = None,
    signature_version: str | None = None,
) -> ObjectStore:
    """The store `spec` names (see the module docstring)."""
    if spec.startswith("s3://"):
        # boto3 loads only for an S3 store: it takes a fifth of a second, which a command
        # reading a local store (paika state show) would pay for nothing.
        from storage.objects.s3 import S3Location, S3Store

        return S3Store(
            S3Location.parse(spec),
            endpoint_url=endpoint_url,
            region=region,
            addressing_style=addressing_style,
            signature_version=signature_version,
        )
    return LocalStore(Path(spec))
