"""The object store on any S3-protocol service, through boto3 (AWS S3, Tianyi Cloud OOS, MinIO).

Settings (environment):

    PAIKA_OBJECT_STORE=s3://bucket/prefix   the bucket, and a key prefix (may be empty)
    PAIKA_S3_ENDPOINT_URL                   the service's URL, e.g. https://oos-cn.ctyunapi.cn
                                            (unset: AWS's own endpoints)
    PAIKA_S3_REGION                         e.g. cn-east-1 (unset: boto3's default)
    PAIKA_S3_ADDRESSING_STYLE               path | virtual | auto (unset: boto3 picks)
    PAIKA_S3_SIGNATURE_VERSION              s3v4 | s3 (unset: boto3's default, s3v4)

Credentials come only from boto3's own chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
AWS_SESSION_TOKEN, AWS_PROFILE and ~/.aws, instance roles); paika never reads, logs or shows
them, and `where` names only the bucket, prefix and endpoint. Timeouts are short (2 s to
connect, 10 s to read, two attempts) so an outage fails within seconds and the writes wait in
the spool instead of holding anyone up.

Versions. On first use the store asks the bucket whether versioning is Enabled:

- Enabled: the bucket keeps the versions. An object lives at `<prefix><key>`; its version ids
  are the bucket's VersionIds; `versions` lists them with ListObjectVersions.
- Not enabled (never enabled, Suspended, or the question refused): each put writes a new object
  `<prefix><key>@<stamp>`, `<stamp>` being `YYYYmmddTHHMMSSffffffZ` (UTC, microseconds; one
  process never repeats or goes back); the stamp is the version id and the newest stamp is the
  newest version. The bucket never sees a plain `<prefix><key>` in this mode.

The mode is decided once per process; a bucket switched to versioning later keeps the stamped
objects already written, which this store then no longer reads. Choose before the first start.

Meta. S3 user metadata must be ASCII, so each value is percent-encoded (UTF-8) on the way in and
decoded on the way out: a reason written in Chinese reads back as written. Names are lower-case
ASCII (`paika-author`, ...). Listing versions reads each version's metadata with one HEAD each.

Logs. At DEBUG botocore logs every request it sends with its headers, and the Authorization
header names the access key id (`Credential=AKIA…/…`); presigned URLs carry it in their query.
The store keeps those lines but masks, in the records of botocore's and urllib3's loggers,
the access key id, signatures and session tokens (`mask_credentials`), so DEBUG stays useful
and the key stays out of the logs.

Errors. Every botocore or network failure, and every refusal other than "not there", becomes
StoreUnavailable (raised from the original); a missing key or version becomes NoSuchObject.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from storage.objects.base import (
    NoSuchObject,
    ObjectVersion,
    StoreUnavailable,
    checked_key,
    checked_meta,
    meta_wire,
)
from storage.objects.keys import STAMP

MISSING = {"NoSuchKey", "NoSuchVersion", "404", "NotFound"}
STAMP_RE = re.compile(r"[0-9]{8}T[0-9]{12}Z")
# Refusals that mean "ask again later" are StoreUnavailable like any other; only these mean the
# question itself cannot be asked of this bucket, which then keeps time-stamped keys.
NO_VERSIONING_ANSWER = {"AccessDenied", "NotImplemented", "MethodNotAllowed", "InvalidRequest"}


# Where botocore and urllib3 write requests, URLs and signing steps at DEBUG.
REQUEST_LOGGERS = (
    "botocore.endpoint",
    "botocore.auth",
    "botocore.awsrequest",
    "botocore.hooks",
    "botocore.httpsession",
    "botocore.parsers",
    "botocore.retryhandler",
    "botocore.credentials",
    "botocore.utils",
    "urllib3.connectionpool",
)
MASK = "***"
_CREDENTIAL_PATTERNS = (
    # query parameters of presigned URLs (SigV4, SigV2) and a session token anywhere
    re.compile(r"(X-Amz-Credential=)[^&\s'\"]+", re.IGNORECASE),
    re.compile(r"(AWSAccessKeyId=)[^&\s'\"]+", re.IGNORECASE),
    re.compile(r"(X-Amz-Security-Token'?\s*[:=]\s*b?'?)[^'&\s,}]+", re.IGNORECASE),
    # the Authorization header: SigV4's Credential=<key id>/<scope>, SigV2's AWS <key id>:<sig>
    re.compile(r"(Credential=)[^/\s'\",&]+(?=/)"),
    re.compile(r"(\bAWS )[A-Za-z0-9]{8,128}:[A-Za-z0-9+/=]{8,}"),
    re.compile(r"(Signature=)[^&\s'\",]+", re.IGNORECASE),
    # a bare AWS access key id
    re.compile(r"()\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{12,}\b"),
)


def mask_credentials(text: str) -> str:
    """`text` with access key ids, signatures and session tokens replaced by ***."""
    for pattern in _CREDENTIAL_PATTERNS:
        if pattern.pattern.startswith(r"(\bAWS )"):
            text = pattern.sub(lambda m: f"{m[1]}{MASK}:{MASK}", text)
        else:
            text = pattern.sub(lambda m: f"{m[1]}{MASK}", text)
    return text


class CredentialsMasked(logging.Filter):
    """Masks credentials in the records of the logger it is on (the line is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot be formatted is the handler's to report
            return True
        masked = mask_credentials(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def mask_request_logs() -> None:
    """Put the mask on botocore's and urllib3's request loggers (once each)."""
    for name in REQUEST_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, CredentialsMasked) for f in logger.filters):
            logger.addFilter(CredentialsMasked())


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, spec: str) -> S3Location:
        """`s3://bucket/prefix` as bucket and prefix ('' or ending in '/')."""
        parts = urlsplit(spec)
        if parts.scheme != "s3" or not parts.netloc:
            raise ValueError(f"{spec!r} is not s3://bucket/prefix")
        prefix = parts.path.strip("/")
        return cls(parts.netloc, f"{prefix}/" if prefix else "")


def client_config(
    *, region: str | None, addressing_style: str | None, signature_version: str | None
) -> Config:
    """botocore's settings: the service's dialect, and timeouts that fail fast in an outage."""
    options: dict[str, Any] = {
        "connect_timeout": 2,
        "read_timeout": 10,
        "retries": {"max_attempts": 2, "mode": "standard"},
    }
    if region:
        options["region_name"] = region
    if addressing_style:
        options["s3"] = {"addressing_style": addressing_style}
    if signature_version:
        options["signature_version"] = signature_version
    return Config(**options)


class S3Store:
    """Versioned objects in one bucket under one prefix."""

    def __init__(
        self,
        location: S3Location,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        addressing_style: str | None = None,
        signature_version: str | None = None,
    ) -> None:
        self.bucket = location.bucket
        self.prefix = location.prefix
        config = client_config(
            region=region, addressing_style=addressing_style, signature_version=signature_version
        )
        mask_request_logs()
        self._s3 = boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)
        self.where = f"s3://{self.bucket}/{self.prefix}" + (
            f" at {_public(endpoint_url)}" if endpoint_url else ""
        )
        self._bucket_versions: bool | None = None
        self._last_stamp = datetime.min.replace(tzinfo=UTC)

    # -- the interface ---------------------------------------------------------------------

    def put(self, key: str, data: bytes, meta: Mapping[str, str] | None = None) -> ObjectVersion:
        name = self._name(key)
        meta = checked_meta(meta)
        encoded = {k: meta_wire(v) for k, v in meta.items()}
        if self.versioned():
            with _mapped(key):
                done = self._s3.put_object(
                    Bucket=self.bucket, Key=name, Body=data, Metadata=encoded
                )
            # No VersionId: versioning was suspended since this process asked; the newest it is.
            head = self.head(key, done.get("VersionId"))
            if head is None:
                raise StoreUnavailable(f"{key}: the store lost the version it just took")
            return head
        at = self._next_stamp()
        with _mapped(key):
            self._s3.put_object(
                Bucket=self.bucket, Key=f"{name}@{at.strftime(STAMP)}", Body=data, Metadata=encoded
            )
        return ObjectVersion(key, at.strftime(STAMP), at, len(data), meta)

    def get(self, key: str, version_id: str | None = None) -> bytes:
        args = self._address(key, version_id)
        with _mapped(key):
            return bytes(self._s3.get_object(**args)["Body"].read())

    def head(self, key: str, version_id: str | None = None) -> ObjectVersion | None:
        try:
            args = self._address(key, version_id)
            with _mapped(key):
                answer = self._s3.head_object(**args)
        except NoSuchObject:
            return None
        return self._version(key, args, answer)

    def versions(self, key: str) -> list[ObjectVersion]:
        found = []
        for version_id in self._version_ids(key):
            version = self.head(key, version_id)
            if version is not None:  # removed since it was listed
                found.append(version)
        return found

    def keys(self, prefix: str) -> list[str]:
        found = set()
        for name in self._list(self.prefix + prefix):
            key = name.removeprefix(self.prefix)
            if not self.versioned():
                key, _, stamp = key.rpartition("@")
                if not STAMP_RE.fullmatch(stamp):
                    continue
            found.add(key)
        return sorted(found)

    def check(self) -> None:
        try:
            self._s3.head_bucket(Bucket=self.bucket)
        except (ClientError, BotoCoreError) as exc:  # a missing bucket too: nothing can be stored
            raise StoreUnavailable(f"{self.where}: {exc}") from exc

    def versioned(self) -> bool:
        """Whether the bucket keeps versions itself (asked once, on first use)."""
        if self._bucket_versions is None:
            try:
                answer = self._s3.get_bucket_versioning(Bucket=self.bucket)
                self._bucket_versions = answer.get("Status") == "Enabled"
            except ClientError as exc:
                if _code(exc) not in NO_VERSIONING_ANSWER:
                    raise StoreUnavailable(f"{self.where}: {exc}") from exc
                self._bucket_versions = False
            except BotoCoreError as exc:
                raise StoreUnavailable(f"{self.where}: {exc}") from exc
        return self._bucket_versions

    # -- helpers ---------------------------------------------------------------------------

    def _name(self, key: str) -> str:
        return self.prefix + checked_key(key)

    def _address(self, key: str, version_id: str | None) -> dict[str, str]:
        """The arguments that name one version of `key` (the newest when None)."""
        name = self._name(key)
        if self.versioned():
            args = {"Bucket": self.bucket, "Key": name}
            return args | ({"VersionId": version_id} if version_id else {})
        if version_id is None:
            stamps = self._stamps(key)
            if not stamps:
                raise NoSuchObject(key)
            version_id = stamps[0]
        if not STAMP_RE.fullmatch(version_id):
            raise NoSuchObject(f"{key} version {version_id}")
        return {"Bucket": self.bucket, "Key": f"{name}@{version_id}"}

    def _version(
        self, key: str, args: Mapping[str, str], answer: Mapping[str, Any]
    ) -> ObjectVersion:
        meta = {k: unquote(v) for k, v in answer.get("Metadata", {}).items()}
        if self.versioned():
            version_id = answer.get("VersionId") or "null"
            at = answer["LastModified"].astimezone(UTC)
        else:
            version_id = args["Key"].rpartition("@")[2]
            at = datetime.strptime(version_id, STAMP).replace(tzinfo=UTC)
        return ObjectVersion(key, version_id, at, int(answer.get("ContentLength", 0)), meta)

    def _version_ids(self, key: str) -> list[str]:
        """`key`'s version ids, newest first."""
        if not self.versioned():
            return self._stamps(key)
        name = self._name(key)
        ids: list[str] = []
        with _mapped(key):
            pages = self._s3.get_paginator("list_object_versions").paginate(
                Bucket=self.bucket, Prefix=name
            )
            for page in pages:
                # The service lists each key's versions newest first.
                ids.extend(v["VersionId"] for v in page.get("Versions", []) if v["Key"] == name)
        return ids

    def _stamps(self, key: str) -> list[str]:
        name = self._name(key)
        stamps = [
            stamp
            for base, _, stamp in (found.rpartition("@") for found in self._list(f"{name}@"))
            if base == name and STAMP_RE.fullmatch(stamp)
        ]
        return sorted(stamps, reverse=True)

    def _list(self, prefix: str) -> Iterator[str]:
        with _mapped(prefix):
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            )
            for page in pages:
                yield from (item["Key"] for item in page.get("Contents", []))

    def _next_stamp(self) -> datetime:
        """Now, or a microsecond after the last stamp if the clock stood still or stepped back."""
        at = max(datetime.now(UTC), self._last_stamp + timedelta(microseconds=1))
        self._last_stamp = at
        return at


@contextmanager
def _mapped(what: str) -> Iterator[None]:
    """botocore's failures as the store's two errors."""
    try:
        yield
    except ClientError as exc:
        if _code(exc) in MISSING:
            raise NoSuchObject(what) from exc
        raise StoreUnavailable(f"{what}: {exc}") from exc
    except BotoCoreError as exc:
        raise StoreUnavailable(f"{what}: {exc}") from exc


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _public(url: str) -> str:
    """The endpoint without any user:password@ part."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
