"""At DEBUG, botocore logs each request with its headers (the Authorization header names the
access key id: Credential=AKIA…/…), presigned URLs and its signing steps. The store keeps
those lines, with the key and any signature, token or secret masked; nothing else of them
is lost. Before, the access key id was in the DEBUG log of every request."""

from __future__ import annotations

import logging

import pytest
from paika_test_s3 import ACCESS_KEY, SECRET_KEY, S3Server, s3_store

from storage.objects import keys
from storage.objects.s3 import mask_credentials


def test_debug_logs_of_a_request_name_no_access_key(
    s3_server: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    store = s3_store(s3_server.url, versioned=True)  # the test's own bucket, made first
    caplog.set_level(logging.DEBUG)
    store.put(keys.CONFIG, b"x", {"paika-author": "U1"})
    assert store.get(keys.CONFIG) == b"x"
    text = caplog.text
    botocore = [r for r in caplog.records if r.name.startswith("botocore")]
    assert any("Authorization" in r.getMessage() for r in botocore)  # still logged…
    assert ACCESS_KEY not in text and SECRET_KEY not in text  # …without the key
    assert "Credential=***/" in text


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        (
            "Authorization: AWS4-HMAC-SHA256 Credential=AKIAXXXXXXXX/20250101/us-east-1/s3/"
            "aws4_request, SignedHeaders=host, Signature=abc123",
            "Authorization: AWS4-HMAC-SHA256 Credential=***/20250101/us-east-1/s3/"
            "aws4_request, SignedHeaders=host, Signature=***",
        ),
        (
            "{'Authorization': b'AWS AKIAXXXXXXXX:c2lnbmF0dXJl'}",
            "{'Authorization': b'AWS ***:***'}",
        ),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAXXXX%2F2025&X-Amz-Signature=ff&"
            "X-Amz-Security-Token=tok",
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&"
            "X-Amz-Security-Token=***",
        ),
        (
            "?AWSAccessKeyId=AKIAXXXX&Signature=xyz&Expires=1",
            "?AWSAccessKeyId=***&Signature=***&Expires=1",
        ),
        ("'X-Amz-Security-Token': b'FwoGZX'", "'X-Amz-Security-Token': b'***'"),
        ("key AKIAIOSFODNN7EXAMPLE in text", "key *** in text"),
        ("PUT /bucket/key 200", "PUT /bucket/key 200"),
    ],
)
def test_credentials_in_a_line_are_masked(line: str, masked: str) -> None:
    assert mask_credentials(line) == masked
