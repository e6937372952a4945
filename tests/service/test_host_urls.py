"""`/gpu admin host add` takes only an agent's own address: not a URL with a user or password
in it (paika keeps and shows host URLs), nor a link-local or cloud metadata address, where
the scheduler would send its agent token and read the instance's credentials back. Before,
both were registered and polled."""

from __future__ import annotations

import pytest
from test_jobs_flow import gpu

from scheduler.app import Paika
from scheduler.credentials import unsafe_agent_url, without_credentials
from scheduler.errors import Problem


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://user:pass@gpu-01.lab:8470", "credentials"),
        ("http://admin@10.0.0.5:8470", "credentials"),
        ("http://:secret@10.0.0.5:8470", "credentials"),
        ("http://169.254.169.254/latest/meta-data", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://100.100.100.200/latest/meta-data", "metadata"),
        ("http://metadata.google.internal/computeMetadata/v1", "metadata"),
        ("http://METADATA.google.internal./", "metadata"),
        ("http://[::ffff:169.254.169.254]/", "metadata"),
        ("http://169.254.10.1:8470", "link_local"),
        ("http://[fe80::1]:8470", "link_local"),
        ("http://[fe80::1%25eth0]:8470", "link_local"),
        ("http://10.0.0.5:8470", None),
        ("https://gpu-01.lab:8470", None),
        ("http://127.0.0.1:8470/", None),
        ("http://[::1]:8470", None),
        ("http://[fd00::5]:8470", None),
        ("http://100.100.100.201:8470", None),
    ],
)
def test_unsafe_agent_urls(url: str, why: str | None) -> None:
    assert unsafe_agent_url(url) == why


def test_credentials_are_never_shown_back() -> None:
    assert (
        without_credentials("https://user:pass@gpu-01.lab:8470/x")
        == "https://***@gpu-01.lab:8470/x"
    )
    assert without_credentials("https://gpu-01.lab:8470") == "https://gpu-01.lab:8470"


def test_admin_host_add_refuses_credentials_and_metadata_addresses_saying_what_to_do(
    paika: Paika,
) -> None:
    reply = paika.run("admin host add gpu-01 url=https://alice:hunter2@gpu-01.lab:8470", "UADMIN")
    assert reply.error is not None and reply.error.problem is Problem.HOST_URL_CREDENTIALS
    assert "hunter2" not in reply.text and "alice" not in reply.text
    assert "https://***@gpu-01.lab:8470" in reply.text
    assert "Give the URL without them" in reply.text
    for url in ("http://169.254.169.254:8470", "http://[fe80::2]:8470", "http://100.100.100.200"):
        reply = paika.run(f"admin host add gpu-02 url={url}", "UADMIN")
        assert reply.error is not None and reply.error.problem is Problem.HOST_URL_LINK_LOCAL, url
        assert "link-local or cloud metadata address" in reply.text
    assert "No hosts yet" in gpu(paika, "UADMIN", "admin host list").text
    gpu(paika, "UADMIN", "admin host add gpu-01 url=https://gpu-01.lab:8470")
