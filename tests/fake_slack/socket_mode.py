"""A local Socket Mode endpoint: a small RFC 6455 WebSocket server on 127.0.0.1.

In production ``SocketModeHandler(app, app_token)`` asks ``apps.connections.open`` for a
WebSocket URL and keeps one connection open to Slack. Here :class:`FakeSlack` hands out
this server's URL (with a single-use ticket), so the real client connects, gets the
``hello`` Slack sends, and a test can push an envelope (a slash command, an interactive
payload, an event) and wait for the client's ack, the same round trip as in production.

It speaks just what slack_sdk's built-in client uses: the HTTP/1.1 upgrade, unmasked text,
ping, pong and close frames out, masked frames in. The built-in client connects without
TLS to any port but 443, so a ``ws://127.0.0.1:<port>/link/?ticket=...`` URL works.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import struct
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, BinaryIO
from urllib.parse import parse_qs, urlsplit

from fake_slack import APP_ID

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for a client's ``Sec-WebSocket-Key`` (RFC 6455, 4.2.2)."""
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()


def encode_frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked, final frame, as a server sends it."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += struct.pack("!BH", 126, n)
    else:
        head += struct.pack("!BQ", 127, n)
    return head + payload


class _Closed(Exception):
    """The peer went away or broke the protocol."""


def _read_exact(rfile: BinaryIO, n: int) -> bytes:
    data = rfile.read(n) if n else b""
    if len(data) < n:
        raise _Closed("connection closed")
    return data


def read_frame(rfile: BinaryIO, *, require_mask: bool = True) -> tuple[bool, int, bytes]:
    """Read one frame: ``(fin, opcode, payload)``. Client frames must be masked (5.1)."""
    b1, b2 = _read_exact(rfile, 2)
    fin, opcode = bool(b1 & 0x80), b1 & 0x0F
    masked, length = bool(b2 & 0x80), b2 & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", _read_exact(rfile, 2))
    elif length == 127:
        (length,) = struct.unpack("!Q", _read_exact(rfile, 8))
    if require_mask and not masked:
        raise _Closed("unmasked frame from a client")
    mask = _read_exact(rfile, 4) if masked else b""
    data = _read_exact(rfile, length)
    if masked:
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return fin, opcode, data


@dataclass
class Connection:
    """One client connection: where it connected and what it sent."""

    sock: socket.socket
    path: str = ""
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    open: bool = False
    greeted: bool = False
    close_code: int | None = None
    pings: int = 0
    pongs: int = 0
    _send_lock: threading.Lock = field(default_factory=threading.Lock)

    def send_frame(self, opcode: int, payload: bytes) -> None:
        """Send one frame; a closed socket just marks the connection closed."""
        with self._send_lock:
            try:
                self.sock.sendall(encode_frame(opcode, payload))
            except OSError:
                self.open = False

    def send_json(self, message: Mapping[str, Any]) -> None:
        """Send a JSON text frame."""
        self.send_frame(OP_TEXT, json.dumps(message).encode())

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send a close frame (if still open) and shut the socket, which ends its reader."""
        if self.open:
            self.send_frame(OP_CLOSE, struct.pack("!H", code) + reason.encode())
        self.open = False
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


class SocketModeServer:
    """Slack's Socket Mode side of one app, on a random loopback port.

    ``require_ticket`` makes it accept only URLs from :meth:`issue_url` (once each), so a
    client must go through ``apps.connections.open`` first, as with Slack.
    """

    def __init__(
        self, *, app_id: str = APP_ID, require_ticket: bool = True, ping_interval: float = 0.1
    ) -> None:
        self.app_id = app_id
        self.require_ticket = require_ticket
        # Slack pings its clients too. slack_sdk's built-in client holds a lock while it
        # waits to receive (up to 3 s) and needs that lock to close, so frequent pings are
        # what lets a test close a client at once.
        self.ping_interval = ping_interval
        self.rejected: list[str] = []
        self._tickets: set[str] = set()
        self._connections: list[Connection] = []
        self._messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> SocketModeServer:
        """Listen on 127.0.0.1 (a free port) and accept clients in a background thread."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.settimeout(0.05)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._spawn(self._accept_loop, "socket-mode-accept")
        if self.ping_interval > 0:
            self._spawn(self._ping_loop, "socket-mode-ping")
        return self

    def stop(self) -> None:
        """Close every connection (with a close frame) and stop listening."""
        self._stopping.set()
        with self._cond:
            conns = list(self._connections)
        for conn in conns:
            conn.close(1001, "server stopping")
        for t in list(self._threads):
            t.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> SocketModeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The WebSocket URL without a ticket."""
        return f"ws://127.0.0.1:{self.port}/link/"

    def issue_url(self) -> str:
        """A fresh single-use URL, as ``apps.connections.open`` returns."""
        ticket = str(uuid.uuid4())
        with self._cond:
            self._tickets.add(ticket)
        return f"{self.url}?ticket={ticket}&app_id={self.app_id}"

    # -- what a test does -----------------------------------------------------------------

    def connections(self) -> list[Connection]:
        """Every connection so far, oldest first (closed ones too)."""
        with self._cond:
            return list(self._connections)

    def wait_connected(self, timeout: float = 5.0, count: int = 1) -> Connection:
        """Wait until ``count`` clients have been greeted; return the newest open one."""

        def ready() -> bool:
            greeted = sum(1 for c in self._connections if c.greeted)
            return greeted >= count and any(c.open for c in self._connections)

        with self._cond:
            if not self._cond.wait_for(ready, timeout):
                raise AssertionError(
                    f"no Socket Mode client connected within {timeout}s (rejected: {self.rejected})"
                )
            return [c for c in self._connections if c.open][-1]

    def push(self, envelope: Mapping[str, Any]) -> str:
        """Send an envelope to the newest open connection; returns its ``envelope_id``."""
        env = dict(envelope)
        env.setdefault("envelope_id", str(uuid.uuid4()))
        with self._cond:
            open_conns = [c for c in self._connections if c.open]
        if not open_conns:
            raise AssertionError("no Socket Mode client is connected")
        open_conns[-1].send_json(env)
        return str(env["envelope_id"])

    def push_slash_command(self, fields: Mapping[str, str]) -> str:
        """A slash command envelope; ``fields`` as from ``signing.slash_command_fields``."""
        return self.push(
            {"type": "slash_commands", "accepts_response_payload": True, "payload": dict(fields)}
        )

    def push_interactive(self, payload: Mapping[str, Any]) -> str:
        """An interactive envelope (block actions, view submissions, shortcuts)."""
        accepts = payload.get("type") in ("view_submission", "block_suggestion")
        return self.push(
            {"type": "interactive", "accepts_response_payload": accepts, "payload": dict(payload)}
        )

    def push_event(
        self, envelope: Mapping[str, Any], retry_attempt: int = 0, retry_reason: str = ""
    ) -> str:
        """An Events API envelope; ``envelope`` as from ``signing.event_envelope``."""
        return self.push(
            {
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": retry_attempt,
                "retry_reason": retry_reason,
                "payload": dict(envelope),
            }
        )

    def request_reconnect(self, reason: str = "refresh_requested") -> None:
        """Send Slack's ``disconnect`` message, which makes the client open a new connection."""
        self.push({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}})

    def received(self) -> list[dict[str, Any]]:
        """Every JSON message the clients sent, oldest first."""
        with self._cond:
            return list(self._messages)

    def acks(self) -> list[dict[str, Any]]:
        """The acks the clients sent (messages with an ``envelope_id``)."""
        return [m for m in self.received() if "envelope_id" in m]

    def wait_for_ack(self, envelope_id: str, timeout: float = 5.0) -> dict[str, Any]:
        """Wait for the client's ack of one envelope and return it (``payload`` if any)."""

        def found() -> dict[str, Any] | None:
            return next((m for m in self._messages if m.get("envelope_id") == envelope_id), None)

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None, timeout):
                raise AssertionError(
                    f"no ack for envelope {envelope_id} within {timeout}s; got {self._messages}"
                )
            ack = found()
            assert ack is not None
            return ack

    # -- server side ----------------------------------------------------------------------

    def _spawn(self, target: Any, name: str, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        listener = self._listener
        while not self._stopping.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            conn = Connection(sock)
            with self._cond:
                self._connections.append(conn)
            self._spawn(self._serve, "socket-mode-conn", conn)

    def _ping_loop(self) -> None:
        while not self._stopping.wait(self.ping_interval):
            for conn in self.connections():
                if conn.open:
                    conn.send_frame(OP_PING, b"fake-slack")

    def _serve(self, conn: Connection) -> None:
        rfile = conn.sock.makefile("rb")
        try:
            if self._handshake(conn, rfile):
                self._read_loop(conn, rfile)
        except (_Closed, OSError, ValueError):
            pass
        finally:
            conn.open = False
            rfile.close()
            conn.sock.close()
            with self._cond:
                self._cond.notify_all()

    def _handshake(self, conn: Connection, rfile: BinaryIO) -> bool:
        request_line = rfile.readline(8192).decode("latin-1").strip()
        headers: dict[str, str] = {}
        while True:
            line = rfile.readline(8192).decode("latin-1")
            if not line:
                raise _Closed("closed during the handshake")
            if line in ("\r\n", "\n"):
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        method, _, rest = request_line.partition(" ")
        target = rest.rpartition(" ")[0]
        parts = urlsplit(target)
        conn.path = parts.path
        conn.query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        conn.headers = headers
        ticket = conn.query.get("ticket", "")
        with self._cond:
            ticket_ok = not self.require_ticket or ticket in self._tickets
            self._tickets.discard(ticket)
        problem = None
        if method != "GET" or headers.get("upgrade", "").lower() != "websocket":
            problem = "400 Bad Request"
        elif "sec-websocket-key" not in headers or headers.get("sec-websocket-version") != "13":
            problem = "426 Upgrade Required"
        elif not ticket_ok:
            problem = "401 Unauthorized"
        if problem is not None:
            with self._cond:
                self.rejected.append(f"{problem}: {target}")
            conn.sock.sendall(
                f"HTTP/1.1 {problem}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
            )
            return False
        conn.sock.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\n"
                "Upgrade: websocket\r\n"
                "Connection: Upgrade\r\n"
                f"Sec-WebSocket-Accept: {accept_key(headers['sec-websocket-key'])}\r\n\r\n"
            ).encode()
        )
        conn.open = True
        conn.send_json(
            {
                "type": "hello",
                "num_connections": sum(1 for c in self.connections() if c.open),
                "debug_info": {
                    "host": "applink-fake",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
                "connection_info": {"app_id": self.app_id},
            }
        )
        with self._cond:
            conn.greeted = True
            self._cond.notify_all()
        return True

    def _read_loop(self, conn: Connection, rfile: BinaryIO) -> None:
        pieces: list[bytes] = []
        first_op = OP_TEXT
        while not self._stopping.is_set():
            fin, opcode, data = read_frame(rfile)
            if opcode == OP_PING:
                conn.pings += 1
                conn.send_frame(OP_PONG, data)
            elif opcode == OP_PONG:
                conn.pongs += 1
            elif opcode == OP_CLOSE:
                conn.close_code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005
                conn.close(conn.close_code)
                return
            elif opcode in (OP_TEXT, OP_BINARY, OP_CONT):
                if opcode != OP_CONT:
                    first_op, pieces = opcode, []
                pieces.append(data)
                if fin and first_op == OP_TEXT:
                    self._on_text(b"".join(pieces).decode())
            else:
                raise _Closed(f"unknown opcode {opcode}")

    def _on_text(self, text: str) -> None:
        try:
            message = json.loads(text)
        except json.JSONDecodeError:
            message = {"raw": text}
        if not isinstance(message, dict):
            message = {"raw": message}
        with self._cond:
            self._messages.append(message)
            self._cond.notify_all()
