"""The S3 backend: its two layouts, its settings, its errors, and what it must never show."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import boto3
import pytest
from paika_test_s3 import ACCESS_KEY, SECRET_KEY, S3Server, new_bucket, s3_store

from storage.objects import keys
from storage.objects.base import StoreUnavailable
from storage.objects.local import LocalStore
from storage.objects.open import open_store
from storage.objects.s3 import S3Location, S3Store, client_config


def _raw(server: S3Server, bucket: str) -> list[str]:
    admin = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")
    return [item["Key"] for item in admin.list_objects_v2(Bucket=bucket).get("Contents", [])]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_versioned_bucket_keeps_the_versions_under_the_plain_key(s3_server: S3Server) -> None:
    store = s3_store(s3_server.url, versioned=True)
    store.put(keys.CONFIG, b"1")
    store.put(keys.CONFIG, b"2")
    assert store.versioned()
    assert _raw(s3_server, store.bucket) == ["team-a/config/policy.yml"]
    admin = boto3.client("s3", endpoint_url=s3_server.url, region_name="us-east-1")
    listed = admin.list_object_versions(Bucket=store.bucket)["Versions"]
    assert sorted(v["VersionId"] for v in listed) == sorted(
        v.version_id for v in store.versions(keys.CONFIG)
    )


@pytest.mark.parametrize("status", [None, "Suspended"])
def test_without_bucket_versioning_each_version_is_a_stamped_key(
    s3_server: S3Server, status: str | None
) -> None:
    bucket = new_bucket(s3_server.url, versioned=False)
    if status:
        admin = boto3.client("s3", endpoint_url=s3_server.url, region_name="us-east-1")
        admin.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})
    store = S3Store(S3Location(bucket, "p/"), endpoint_url=s3_server.url)
    first = store.put(keys.CONFIG, b"1")
    second = store.put(keys.CONFIG, b"2")
    assert not store.versioned()
    assert _raw(s3_server, bucket) == [
        f"p/config/policy.yml@{first.version_id}",
        f"p/config/policy.yml@{second.version_id}",
    ]
    assert second.at > first.at
    assert store.keys("config/") == [keys.CONFIG]


def test_meta_on_the_bucket_is_ascii_and_holds_no_credentials(
    s3_server: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    store = s3_store(s3_server.url, versioned=True)
    store.put(keys.CONFIG, b"x", {"paika-reason": "调高配额", "paika-author": "U1"})
    admin = boto3.client("s3", endpoint_url=s3_server.url, region_name="us-east-1")
    raw = admin.head_object(Bucket=store.bucket, Key="team-a/config/policy.yml")["Metadata"]
    assert set(raw) == {"paika-reason", "paika-author"}
    assert all(value.isascii() for value in raw.values())
    seen = " ".join([store.where, *raw.values(), caplog.text])
    assert ACCESS_KEY not in seen and SECRET_KEY not in seen


def test_where_names_bucket_prefix_and_endpoint_but_never_a_password(
    s3_server: S3Server,
) -> None:
    store = S3Store(
        S3Location.parse("s3://team-bucket/paika/prod"),
        endpoint_url="https://user:hunter2@oos-cn.ctyunapi.cn:8443",
    )
    assert store.where == "s3://team-bucket/paika/prod/ at https://oos-cn.ctyunapi.cn:8443"
    assert ACCESS_KEY not in store.where and SECRET_KEY not in store.where


@pytest.mark.parametrize(
    ("spec", "bucket", "prefix"),
    [("s3://b-1", "b-1", ""), ("s3://b-1/", "b-1", ""), ("s3://b-1/x/y/", "b-1", "x/y/")],
)
def test_the_location_is_bucket_and_prefix(spec: str, bucket: str, prefix: str) -> None:
    assert S3Location.parse(spec) == S3Location(bucket, prefix)


def test_a_location_without_a_bucket_is_refused() -> None:
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        S3Location.parse("s3:///prefix")


def test_the_client_speaks_the_dialect_it_is_told_and_fails_fast() -> None:
    config = client_config(region="cn-east-1", addressing_style="path", signature_version="s3")
    assert config.region_name == "cn-east-1"
    assert config.s3 == {"addressing_style": "path"}
    assert config.signature_version == "s3"
    assert config.connect_timeout <= 5 and config.read_timeout <= 15
    assert config.retries["max_attempts"] <= 3


@pytest.mark.parametrize("signature_version", ["s3v4", "s3"])
def test_both_signature_versions_reach_the_server(
    s3_server: S3Server, signature_version: str
) -> None:
    bucket = new_bucket(s3_server.url, versioned=True)
    store = S3Store(
        S3Location(bucket, ""),
        endpoint_url=s3_server.url,
        region="cn-east-1",
        addressing_style="path",
        signature_version=signature_version,
    )
    store.put(keys.CONFIG, "原因".encode(), {"paika-reason": "原因"})
    assert store.get(keys.CONFIG) == "原因".encode()
    assert store.versions(keys.CONFIG)[0].meta["paika-reason"] == "原因"


def test_an_unreachable_endpoint_is_store_unavailable(aws_env: None) -> None:
    store = S3Store(S3Location("b-1", ""), endpoint_url=f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(StoreUnavailable):
        store.check()
    with pytest.raises(StoreUnavailable):
        store.put(keys.CONFIG, b"x")
    with pytest.raises(StoreUnavailable):
        store.head(keys.CONFIG)


def test_a_missing_bucket_is_store_unavailable_not_a_missing_object(s3_server: S3Server) -> None:
    store = S3Store(S3Location("no-such-bucket-here", ""), endpoint_url=s3_server.url)
    with pytest.raises(StoreUnavailable):
        store.get(keys.CONFIG)
    with pytest.raises(StoreUnavailable):
        store.check()


def test_open_store_picks_the_backend_from_the_spec(s3_server: S3Server, tmp_path: Path) -> None:
    local = open_store(str(tmp_path / "objects"))
    assert isinstance(local, LocalStore)
    bucket = new_bucket(s3_server.url, versioned=True)
    remote = open_store(
        f"s3://{bucket}/memory", endpoint_url=s3_server.url, addressing_style="path"
    )
    assert isinstance(remote, S3Store)
    assert (remote.bucket, remote.prefix) == (bucket, "memory/")
    remote.put(keys.CONFIG, b"x")
    assert _raw(s3_server, bucket) == ["memory/config/policy.yml"]
