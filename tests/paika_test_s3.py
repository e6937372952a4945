"""An S3-protocol server on 127.0.0.1 for the object store's tests: moto's, over real HTTP.

moto's ThreadedMotoServer stops listening when stopped, but the connections boto3 already
holds open (HTTP keep-alive) go on being served, so a "stopped" server keeps answering. This
one closes the listening socket and every open connection when killed, as a crashed server
would. moto keeps its buckets in this process, not in the server, so a server started again
on the same port finds them as a restarted S3 service finds its disks.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

from storage.objects.s3 import S3Location, S3Store

# Credentials the fake server accepts and that must never show up anywhere paika writes.
ACCESS_KEY = "AKIAPAIKATESTKEY0001"
SECRET_KEY = "paika-test-secret-do-not-leak-0123456789"
_buckets = itertools.count(1)


def fake_aws(env: Any, nowhere: Any) -> None:
    """boto3's credential chain finds only the fake keys (`env`: a pytest MonkeyPatch;
    `nowhere`: a path that does not exist, for the config and credentials files)."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        env.delenv(name, raising=False)
    env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    env.setenv("AWS_DEFAULT_REGION", "us-east-1")
    env.setenv("AWS_CONFIG_FILE", str(nowhere))
    env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere))
    env.setenv("AWS_EC2_METADATA_DISABLED", "true")


def wait_for(check: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll `check` until it holds, failing after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


class S3Server:
    """moto's S3 over HTTP on 127.0.0.1, that can be killed and started again on its port."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        server = self

        class Handler(MotoRequestHandler):
            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._connections.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._connections.discard(self.connection)
                super().finish()

        app: Any = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", self.port, app, True, request_handler=Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def kill(self) -> None:
        """Stop answering at once: no listener, every open connection cut."""
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        with self._lock:
            for connection in self._connections:
                with contextlib.suppress(OSError):  # already gone
                    connection.shutdown(socket.SHUT_RDWR)
            self._connections.clear()
        self._server = None


def new_bucket(endpoint: str, *, versioned: bool) -> str:
    """A fresh bucket on the server at `endpoint`, with or without versioning."""
    name = f"paika-test-{next(_buckets)}"
    admin = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    admin.create_bucket(Bucket=name)
    if versioned:
        admin.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def s3_store(endpoint: str, *, versioned: bool) -> S3Store:
    bucket = new_bucket(endpoint, versioned=versioned)
    return S3Store(S3Location(bucket, "team-a/"), endpoint_url=endpoint, addressing_style="path")
