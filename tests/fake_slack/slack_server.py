"""FakeSlack: Slack's Web API on a random loopback port, served over real HTTP.

The bot talks to Slack only through slack_sdk's ``WebClient``; pointing that client at
``fake.api_url`` runs the real client code (encoding, auth header, retries, error raising)
against answers shaped like Slack's. The fake is strict where Slack is: it checks the
token, validates every message and view with slack_sdk's Block Kit models plus the limits
they lack, and answers ``invalid_blocks`` where Slack would, so a bot that passes here does
not fail on the first real workspace. Everything it receives is recorded for assertions.

It also takes what Bolt's ``respond()`` posts to a ``response_url``
(:meth:`FakeSlack.response_url`), the file bytes of ``files_upload_v2``, and, with
``socket_mode=True``, hands out a local Socket Mode WebSocket from ``apps.connections.open``.
A test can hold a method's calls, or the posts to response URLs (:meth:`FakeSlack.hold`),
to see what the bot does while Slack is slow.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, NoReturn
from urllib.parse import parse_qs, urlsplit

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from fake_slack import (
    APP_ID,
    APP_TOKEN,
    BOT_ID,
    BOT_NAME,
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_DOMAIN,
    TEAM_ID,
)
from fake_slack.socket_mode import SocketModeServer

MESSAGE_BLOCKS_MAX = 50
VIEW_BLOCKS_MAX = 100
MESSAGE_TEXT_MAX = 40_000
# Arguments Slack takes as JSON text in a form body; the fake decodes them for checks and
# records them decoded, so a test reads ``call.args["blocks"]`` as a list either way.
JSON_ARGS = ("blocks", "attachments", "view", "files", "metadata", "unfurls")
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})
FIRST_TS = 1_700_000_000
# What :meth:`FakeSlack.hold` calls the posts to every response URL.
RESPONSE_URLS = "response_url"
# A hold nobody released lets its calls through after this long, so no thread waits forever.
HOLD_LONGEST_S = 60.0


# -- validation ----------------------------------------------------------------------------


def _empty_texts(node: Any, path: str, out: list[str]) -> None:
    """Slack refuses a text object with empty text; slack_sdk's models let it through."""
    if isinstance(node, dict):
        if node.get("type") in ("plain_text", "mrkdwn") and node.get("text") == "":
            out.append(f"{path}: text must be more than 0 characters")
        for key, value in node.items():
            _empty_texts(value, f"{path}.{key}", out)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _empty_texts(value, f"{path}[{i}]", out)


def validate_blocks(blocks: Any, *, max_blocks: int = MESSAGE_BLOCKS_MAX) -> list[str]:
    """What Slack would reject in a list of blocks, one line per problem (empty: fine).

    Each block is parsed with ``Block.parse`` and serialised with ``to_dict()``, which runs
    slack_sdk's validators on it and on every element inside (text lengths, element counts,
    button text...). On top: the block count, unknown block types, duplicate ``block_id``s,
    duplicate ``action_id``s in one actions block, and empty text objects.
    """
    if not isinstance(blocks, list):
        return [f"blocks must be an array of blocks, not {type(blocks).__name__}"]
    problems: list[str] = []
    if len(blocks) > max_blocks:
        problems.append(f"no more than {max_blocks} blocks are allowed ({len(blocks)} given)")
    block_ids: set[str] = set()
    for i, raw in enumerate(blocks):
        where = f"blocks[{i}]"
        if not isinstance(raw, dict) or "type" not in raw:
            problems.append(f"{where}: not a block object")
            continue
        try:
            block = Block.parse(copy.deepcopy(raw))  # the models may touch what they parse
            if block is None:
                problems.append(f"{where}: unknown block type {raw['type']!r}")
                continue
            block.to_dict()
        except Exception as exc:  # any model error is Slack's invalid_blocks
            problems.append(f"{where} ({raw['type']}): {exc}")
        block_id = raw.get("block_id")
        if isinstance(block_id, str):
            if block_id in block_ids:
                problems.append(f"{where}: duplicate block_id {block_id!r}")
            block_ids.add(block_id)
        if raw["type"] == "actions" and isinstance(raw.get("elements"), list):
            action_ids = [e.get("action_id") for e in raw["elements"] if isinstance(e, dict)]
            named = [a for a in action_ids if a is not None]
            if len(named) != len(set(named)):
                problems.append(f"{where}: duplicate action_id in one actions block")
        _empty_texts(raw, where, problems)
    return problems


def validate_view(view: Any, *, types: tuple[str, ...] = ("modal", "home")) -> list[str]:
    """What Slack would reject in a view (modal or Home tab), one line per problem."""
    if not isinstance(view, dict):
        return [f"view must be an object, not {type(view).__name__}"]
    problems: list[str] = []
    if view.get("type") not in types:
        problems.append(f"view type must be one of {types}, not {view.get('type')!r}")
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        problems.append("a view needs blocks (1 to 100)")
    else:
        problems += validate_blocks(blocks, max_blocks=VIEW_BLOCKS_MAX)
    try:
        # Blocks were checked above; one stand-in block keeps the model from checking them
        # again, so what is left are the view's own limits.
        View(**{**view, "blocks": [{"type": "divider"}]}).to_dict()
    except Exception as exc:  # title/submit/close lengths, private_metadata, callback_id
        problems.append(f"view: {exc}")
    if view.get("type") == "modal":
        if not view.get("title"):
            problems.append("a modal needs a title")
        has_input = isinstance(blocks, list) and any(
            isinstance(b, dict) and b.get("type") == "input" for b in blocks
        )
        if has_input and not view.get("submit"):
            problems.append("a modal with input blocks needs a submit button")
    return problems


def validate_message(args: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """``(error, problems)`` for a message Slack would refuse, else ``None``."""
    text, blocks, attachments = args.get("text"), args.get("blocks"), args.get("attachments")
    if isinstance(blocks, str):
        return "invalid_blocks_format", ["blocks is not valid JSON"]
    if blocks is not None:
        problems = validate_blocks(blocks)
        if problems:
            return "invalid_blocks", problems
    if not text and not blocks and not attachments:
        return "no_text", ["a message needs text, blocks or attachments"]
    if isinstance(text, str) and len(text) > MESSAGE_TEXT_MAX:
        return "msg_too_long", [f"text is {len(text)} characters (max {MESSAGE_TEXT_MAX})"]
    return None


# -- records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One Web API request: the method, its arguments (JSON ones decoded), its headers
    (lower-case names), and what the fake answered."""

    method: str
    args: dict[str, Any]
    headers: dict[str, str]
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)
    received: float = 0.0  # time.perf_counter() when the request arrived (before any hold)

    @property
    def ok(self) -> bool:
        """Whether Slack would have said ``ok: true``."""
        return bool(self.response.get("ok"))


@dataclass(frozen=True)
class Invalid:
    """A message or view the fake refused, and why (``detail`` lists each problem)."""

    method: str
    error: str
    detail: list[str]
    args: dict[str, Any]


@dataclass(frozen=True)
class Response:
    """A body posted to a response URL (what Bolt's ``respond()`` sent)."""

    name: str
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class Upload:
    """A file announced by ``files.getUploadURLExternal`` and, once posted, its bytes."""

    file_id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    completed: bool = False


class Hold:
    """Requests of one kind kept waiting until released: to see what a bot does while Slack
    (or a response URL) is slow. Use it as a context manager; leaving releases them."""

    def __init__(self, what: str, longest_s: float = HOLD_LONGEST_S) -> None:
        self.what = what
        self.longest_s = longest_s
        self._released = threading.Event()
        self._cond = threading.Condition()
        self._arrived = 0

    @property
    def arrived(self) -> int:
        """How many requests reached the hold (released or not)."""
        with self._cond:
            return self._arrived

    def wait_arrived(self, count: int = 1, timeout: float = 20.0) -> None:
        """Wait until ``count`` requests are held (for work done in other threads)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._arrived >= count, timeout):
                raise AssertionError(
                    f"expected {count} {self.what} request(s) held within {timeout}s, "
                    f"got {self._arrived}"
                )

    def release(self) -> None:
        """Let every held request (and every later one) through."""
        self._released.set()

    def keep(self) -> None:
        """Called by the fake for each request it holds: wait for the release."""
        with self._cond:
            self._arrived += 1
            self._cond.notify_all()
        self._released.wait(self.longest_s)

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class _Fault:
    error: str
    times: int
    status: int = 200
    retry_after: int | None = None


class _ApiError(Exception):
    def __init__(self, error: str, detail: list[str] | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.detail = detail or []


# -- the HTTP side -------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeSlack

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Keep handler crashes in the record instead of printing them to stderr.

        A client hanging up early is not the fake's fault and is not kept.
        """
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError):
            self.fake.errors.append(repr(error))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the record is in FakeSlack.calls()."""

    def do_POST(self) -> None:
        self.server.fake._handle(self)

    def do_GET(self) -> None:
        self.server.fake._handle(self)

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _parse_args(content_type: str, raw: bytes, query: str) -> dict[str, Any]:
    args: dict[str, Any] = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            raise _ApiError("invalid_json", [str(exc)]) from exc
        if not isinstance(body, dict):
            raise _ApiError("invalid_json", ["the JSON body must be an object"])
        args.update(body)
    elif raw:
        form = parse_qs(raw.decode(), keep_blank_values=True)
        args.update({k: v[0] for k, v in form.items()})
    for key in JSON_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value[:1] in ("[", "{"):
            # Bad JSON stays text: the method then answers *_format / invalid_arguments.
            with contextlib.suppress(json.JSONDecodeError):
                args[key] = json.loads(value)
    return args


# -- the fake ------------------------------------------------------------------------------


class FakeSlack:
    """Slack's Web API for one workspace, on ``127.0.0.1`` at a random free port.

    Use it as a context manager, or from a fixture with ``yield from FakeSlack.serve()``.
    Build the client as ``WebClient(base_url=fake.api_url, token=BOT_TOKEN)``.
    """

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        socket_mode: bool = False,
        socket_mode_url: str | None = None,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        # A fixed URL for apps.connections.open; else the built-in server's (socket_mode=True).
        self.socket_mode_url = socket_mode_url
        self.socket_mode: SocketModeServer | None = SocketModeServer() if socket_mode else None
        self.invalid: list[Invalid] = []
        self.errors: list[str] = []
        self._lock = threading.RLock()
        self._calls: list[Call] = []
        self._responses: list[Response] = []
        self._faults: dict[str, list[_Fault]] = {}
        self._holds: dict[str, Hold] = {}
        self._messages: dict[tuple[str, str], dict[str, Any]] = {}
        self._views: dict[str, dict[str, Any]] = {}
        self._users: dict[str, dict[str, Any]] = {}
        self._channels: dict[str, dict[str, Any]] = {}  # by id: name, is_member
        self._uploads: dict[str, Upload] = {}
        self._seq = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "api.test": lambda a: {"ok": True, "args": a},
            "auth.test": self._auth_test,
            "apps.connections.open": self._connections_open,
            "chat.postMessage": self._post_message,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "chat.getPermalink": self._permalink,
            "conversations.open": self._conversations_open,
            "conversations.list": self._conversations_list,
            "conversations.info": self._conversations_info,
            "users.info": self._users_info,
            "views.open": lambda a: self._view_show("views.open", a, need="trigger_id"),
            "views.push": lambda a: self._view_show("views.push", a, need="trigger_id"),
            "views.update": self._views_update,
            "views.publish": self._views_publish,
            "files.getUploadURLExternal": self._upload_url,
            "files.completeUploadExternal": self._complete_upload,
            "reactions.add": lambda a: {"ok": True},
        }

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeSlack:
        """Bind a free loopback port and serve in a background thread."""
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        if self.socket_mode is not None:
            self.socket_mode.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (and the Socket Mode server)."""
        self.release_all()
        if self.socket_mode is not None:
            self.socket_mode.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @classmethod
    def serve(cls, **kwargs: Any) -> Iterator[FakeSlack]:
        """For a fixture: ``yield from FakeSlack.serve()`` starts it and stops it after."""
        with cls(**kwargs) as fake:
            yield fake

    # -- addresses ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/``."""
        if self._server is None:
            raise RuntimeError("FakeSlack is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    @property
    def api_url(self) -> str:
        """The Web API base URL for ``WebClient(base_url=...)`` (ends with ``/api/``)."""
        return self.base_url + "api/"

    def response_url(self, name: str = "default") -> str:
        """A response URL into the fake; what is posted there is kept under ``name``."""
        return f"{self.base_url}response_url/{name}"

    # -- scripting failures ---------------------------------------------------------------

    def fail_next(self, method: str, error: str = "channel_not_found", times: int = 1) -> None:
        """The next ``times`` calls of ``method`` answer ``{"ok": false, "error": error}``."""
        with self._lock:
            self._faults.setdefault(method, []).append(_Fault(error, times))

    def rate_limit_next(self, method: str, retry_after: int = 1, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` get HTTP 429 with ``Retry-After``."""
        with self._lock:
            self._faults.setdefault(method, []).append(
                _Fault("ratelimited", times, status=429, retry_after=retry_after)
            )

    def hold(self, what: str, longest_s: float = HOLD_LONGEST_S) -> Hold:
        """Keep calls of Web API method ``what`` (or, with ``RESPONSE_URLS``, every post to a
        response URL) waiting until the returned hold is released (at most ``longest_s``)."""
        hold = Hold(what, longest_s)
        with self._lock:
            previous = self._holds.get(what)
            self._holds[what] = hold
        if previous is not None:
            previous.release()
        return hold

    def release_all(self) -> None:
        """Let every held request through (a fake that stops must not leave threads waiting)."""
        with self._lock:
            holds, self._holds = list(self._holds.values()), {}
        for hold in holds:
            hold.release()

    def set_channel(self, channel_id: str, name: str, *, member: bool = True) -> None:
        """A channel ``conversations.list`` shows (set it again with another name: a rename)."""
        with self._lock:
            self._channels[channel_id] = {"id": channel_id, "name": name, "is_member": member}

    def set_user(self, user_id: str, **fields: Any) -> dict[str, Any]:
        """Set what ``users.info`` says about a user (``tz="Europe/Berlin"``, ``profile=...``)."""
        with self._lock:
            user = self._user(user_id) or {"id": user_id, "profile": {}}
            profile = {**user.get("profile", {}), **fields.pop("profile", {})}
            user.update(fields)
            user["profile"] = profile
            self._users[user_id] = user
            return dict(user)

    # -- the record -----------------------------------------------------------------------

    def calls(self, method: str | None = None) -> list[Call]:
        """Every Web API call received (of one method if given), oldest first."""
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def last(self, method: str) -> Call:
        """The latest call of ``method``; fails the test if there was none."""
        found = self.calls(method)
        if not found:
            seen = sorted({c.method for c in self.calls()})
            raise AssertionError(f"no {method} call was made (seen: {seen})")
        return found[-1]

    def wait_for(self, method: str, count: int = 1, timeout: float = 20.0) -> list[Call]:
        """Wait until ``count`` calls of ``method`` arrived (for work done in other threads)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.calls(method)
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                seen = [c.method for c in self.calls()]
                raise AssertionError(
                    f"expected {count} {method} call(s) within {timeout}s, got {len(found)}; "
                    f"calls seen: {seen}; refused: {self.invalid}"
                )
            time.sleep(0.01)

    def responses(self, name: str | None = None) -> list[dict[str, Any]]:
        """The bodies posted to response URLs (to one of them if ``name`` is given)."""
        with self._lock:
            return [r.body for r in self._responses if name is None or r.name == name]

    def wait_for_response(
        self, name: str | None = None, count: int = 1, timeout: float = 20.0
    ) -> list[dict[str, Any]]:
        """Wait until ``count`` bodies were posted to the response URL(s)."""
        deadline = time.monotonic() + timeout
        while len(found := self.responses(name)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"expected {count} response(s) to {name or 'any response URL'} within "
                    f"{timeout}s, got {len(found)}; refused: {self.invalid}"
                )
            time.sleep(0.01)
        return found

    def messages(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Messages as they stand now (after updates and deletes), in posting order."""
        with self._lock:
            return [
                dict(m) for (ch, _), m in self._messages.items() if channel is None or ch == channel
            ]

    def views(self) -> dict[str, dict[str, Any]]:
        """Views opened, pushed, updated or published, by view id (as they stand now)."""
        with self._lock:
            return {k: dict(v) for k, v in self._views.items()}

    def uploads(self) -> list[Upload]:
        """Files announced through ``files.getUploadURLExternal``, with their bytes."""
        with self._lock:
            return list(self._uploads.values())

    def assert_nothing_invalid(self) -> None:
        """Fail if any message or view was refused, listing why."""
        if self.invalid or self.errors:
            raise AssertionError(f"refused by FakeSlack: {self.invalid}; errors: {self.errors}")

    def clear(self) -> None:
        """Forget calls, responses, refusals and pending failures (not users or messages)."""
        with self._lock:
            self._calls.clear()
            self._responses.clear()
            self.invalid.clear()
            self.errors.clear()
            self._faults.clear()

    # -- dispatch -------------------------------------------------------------------------

    def _handle(self, req: _Handler) -> None:
        received = time.perf_counter()
        parts = urlsplit(req.path)
        raw = req.read_body()
        headers = {k.lower(): v for k, v in req.headers.items()}
        path = parts.path
        if path.startswith("/api/"):
            method = path[len("/api/") :]
            self._wait_if_held(method)
            status, body, extra = self._api(method, headers, raw, parts.query, received)
            data = json.dumps(body).encode()
            req.reply(status, data, "application/json; charset=utf-8", extra)
        elif path.startswith("/response_url/") and req.command == "POST":
            self._wait_if_held(RESPONSE_URLS)
            status, text = self._response_url(path[len("/response_url/") :], headers, raw)
            req.reply(status, text.encode(), "text/plain; charset=utf-8")
        elif path.startswith("/upload/") and req.command == "POST":
            status, text = self._upload(path[len("/upload/") :], raw)
            req.reply(status, text.encode(), "text/plain; charset=utf-8")
        else:
            req.reply(404, b"not found", "text/plain")

    def _wait_if_held(self, what: str) -> None:
        with self._lock:
            hold = self._holds.get(what)
        if hold is not None:
            hold.keep()

    def _api(
        self, method: str, headers: dict[str, str], raw: bytes, query: str, received: float
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        status, extra = 200, {}
        try:
            args = _parse_args(headers.get("content-type", ""), raw, query)
        except (_ApiError, ValueError) as exc:
            args = {"_raw": raw.decode(errors="replace")}
            error = exc.error if isinstance(exc, _ApiError) else "invalid_form_data"
            body: dict[str, Any] = {"ok": False, "error": error}
            with self._lock:
                self.invalid.append(Invalid(method, error, [str(exc)], args))
        else:
            try:
                self._check_token(method, headers, args)
                fault = self._take_fault(method)
                if fault is not None:
                    status = fault.status
                    if fault.retry_after is not None:
                        extra["Retry-After"] = str(fault.retry_after)
                    raise _ApiError(fault.error)
                handler = self._methods.get(method)
                if handler is None:
                    raise _ApiError("unknown_method")
                body = handler(args)
            except _ApiError as exc:
                body = {"ok": False, "error": exc.error}
                if exc.detail:
                    body["response_metadata"] = {"messages": [f"[ERROR] {d}" for d in exc.detail]}
            except Exception as exc:  # a gap in the fake: say so, as Slack's fatal_error
                body = {"ok": False, "error": "fatal_error"}
                with self._lock:
                    self.errors.append(f"{method}: {exc!r}")
        with self._lock:
            self._calls.append(Call(method, args, headers, status, body, received))
        return status, body, extra

    def _check_token(
        self, method: str, headers: Mapping[str, str], args: Mapping[str, Any]
    ) -> None:
        auth = headers.get("authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else args.get("token")
        if not token:
            raise _ApiError("not_authed")
        expected, other = (
            (self.app_token, self.bot_token)
            if method in APP_TOKEN_METHODS
            else (self.bot_token, self.app_token)
        )
        if token == other:
            raise _ApiError("not_allowed_token_type")
        if token != expected:
            raise _ApiError("invalid_auth")

    def _take_fault(self, method: str) -> _Fault | None:
        with self._lock:
            queue = self._faults.get(method)
            if not queue:
                return None
            fault = queue[0]
            fault.times -= 1
            if fault.times <= 0:
                queue.pop(0)
            return fault

    def _refuse(self, method: str, error: str, detail: list[str], args: dict[str, Any]) -> NoReturn:
        with self._lock:
            self.invalid.append(Invalid(method, error, detail, args))
        raise _ApiError(error, detail)

    def _next_ts(self) -> str:
        with self._lock:
            self._seq += 1
            return f"{FIRST_TS + self._seq // 10_000}.{(self._seq % 10_000) * 100:06d}"

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._seq += 1
            return f"{prefix}0FAKE{self._seq:05d}"

    @staticmethod
    def _require(args: Mapping[str, Any], *names: str) -> None:
        missing = [n for n in names if not args.get(n)]
        if missing:
            raise _ApiError("invalid_arguments", [f"missing required field: {n}" for n in missing])

    # -- methods --------------------------------------------------------------------------

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": f"https://{TEAM_DOMAIN}.slack.com/",
            "team": TEAM_DOMAIN,
            "user": BOT_NAME,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.socket_mode_url is not None:
            return {"ok": True, "url": self.socket_mode_url}
        if self.socket_mode is None:
            raise _ApiError("socket_mode_not_enabled", ["FakeSlack(socket_mode=True) serves it"])
        return {"ok": True, "url": self.socket_mode.issue_url()}

    def _channel_for(self, channel: str) -> str:
        """Posting to a user id lands in the DM with them, whose id Slack returns."""
        return "D" + channel if channel[:1] in ("U", "W") else channel

    def _check_message(self, method: str, args: dict[str, Any]) -> None:
        self._require(args, "channel")
        problem = validate_message(args)
        if problem is not None:
            self._refuse(method, problem[0], problem[1], args)

    def _message(self, args: Mapping[str, Any], channel: str, ts: str) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "type": "message",
            "subtype": "bot_message",
            "text": args.get("text") or "",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "team": TEAM_ID,
            "ts": ts,
            "channel": channel,
        }
        for key in ("blocks", "attachments", "thread_ts", "metadata"):
            if args.get(key):
                msg[key] = args[key]
        return msg

    def _post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        self._check_message("chat.postMessage", args)
        channel, ts = self._channel_for(str(args["channel"])), self._next_ts()
        msg = self._message(args, channel, ts)
        with self._lock:
            self._messages[(channel, ts)] = msg
        return {"ok": True, "channel": channel, "ts": ts, "message": msg}

    def _post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "user")
        self._check_message("chat.postEphemeral", args)
        return {"ok": True, "message_ts": self._next_ts()}

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "ts")
        self._check_message("chat.update", args)
        channel, ts = str(args["channel"]), str(args["ts"])
        msg = self._message(args, channel, ts)
        with self._lock:
            self._messages[(channel, ts)] = msg
        return {"ok": True, "channel": channel, "ts": ts, "text": msg["text"], "message": msg}

    def _delete(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "channel", "ts")
        with self._lock:
            if self._messages.pop((str(args["channel"]), str(args["ts"])), None) is None:
                raise _ApiError("message_not_found")
        return {"ok": True, "channel": args["channel"], "ts": args["ts"]}

    def _permalink(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "channel", "message_ts")
        ts = str(args["message_ts"]).replace(".", "")
        link = f"https://{TEAM_DOMAIN}.slack.com/archives/{args['channel']}/p{ts}"
        return {"ok": True, "channel": args["channel"], "permalink": link}

    def _conversations_list(self, args: dict[str, Any]) -> dict[str, Any]:
        # Pages of `limit`, the cursor being the next index, as Slack's cursors are opaque.
        limit = int(args.get("limit") or 100)
        start = int(args.get("cursor") or 0)
        with self._lock:
            channels = [dict(c) for _, c in sorted(self._channels.items())]
        page = channels[start : start + limit]
        following = str(start + limit) if start + limit < len(channels) else ""
        return {"ok": True, "channels": page, "response_metadata": {"next_cursor": following}}

    def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "channel")
        with self._lock:
            channel = self._channels.get(str(args["channel"]))
        if channel is None:
            raise _ApiError("channel_not_found")
        return {"ok": True, "channel": dict(channel)}

    def _conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("channel"):
            return {"ok": True, "channel": {"id": args["channel"]}}
        self._require(args, "users")
        users = [u for u in str(args["users"]).split(",") if u]
        channel_id = "D" + users[0] if len(users) == 1 else "G" + "".join(users)[:10]
        return {"ok": True, "channel": {"id": channel_id}}

    def _user(self, user_id: str) -> dict[str, Any] | None:
        if user_id in self._users:
            return copy.deepcopy(self._users[user_id])
        if user_id[:1] not in ("U", "W"):
            return None
        name = user_id.lower()
        is_bot = user_id == BOT_USER_ID
        return {
            "id": user_id,
            "team_id": TEAM_ID,
            "name": BOT_NAME if is_bot else name,
            "deleted": False,
            "real_name": BOT_NAME if is_bot else f"User {user_id}",
            "tz": "Asia/Shanghai",
            "tz_label": "China Standard Time",
            "tz_offset": 28800,
            "is_admin": False,
            "is_owner": False,
            "is_bot": is_bot,
            "is_app_user": False,
            "updated": FIRST_TS,
            "profile": {
                "real_name": f"User {user_id}",
                "display_name": name,
                "email": f"{name}@example.com",
                "team": TEAM_ID,
            },
        }

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "user")
        with self._lock:
            user = self._user(str(args["user"]))
        if user is None:
            raise _ApiError("user_not_found")
        return {"ok": True, "user": user}

    def _store_view(self, view: dict[str, Any], view_id: str) -> dict[str, Any]:
        stored = {
            "id": view_id,
            "team_id": TEAM_ID,
            "app_id": APP_ID,
            "bot_id": BOT_ID,
            "state": {"values": {}},
            "hash": f"{int(time.time())}.{self._next_id('h')}",
            "root_view_id": view_id,
            "previous_view_id": None,
            "private_metadata": "",
            "callback_id": "",
            "external_id": "",
            **view,
        }
        stored["id"] = view_id
        with self._lock:
            self._views[view_id] = stored
        return {"ok": True, "view": stored}

    def _checked_view(
        self, method: str, args: dict[str, Any], types: tuple[str, ...]
    ) -> dict[str, Any]:
        self._require(args, "view")
        view = args["view"]
        if isinstance(view, str):
            self._refuse(method, "invalid_arguments", ["view is not valid JSON"], args)
        problems = validate_view(view, types=types)
        if problems:
            self._refuse(method, "invalid_blocks", problems, args)
        return dict(view)

    def _view_show(self, method: str, args: dict[str, Any], need: str) -> dict[str, Any]:
        self._require(args, need)
        view = self._checked_view(method, args, ("modal",))
        return self._store_view(view, self._next_id("V"))

    def _views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        view = self._checked_view("views.update", args, ("modal", "home"))
        view_id = args.get("view_id")
        if not view_id and args.get("external_id"):
            with self._lock:
                view_id = next(
                    (
                        k
                        for k, v in self._views.items()
                        if v.get("external_id") == args["external_id"]
                    ),
                    None,
                )
            if view_id is None:
                raise _ApiError("not_found")
        if not view_id:
            raise _ApiError("invalid_arguments", ["either view_id or external_id is required"])
        return self._store_view(view, str(view_id))

    def _views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "user_id")
        view = self._checked_view("views.publish", args, ("home",))
        return self._store_view(view, f"VHOME{args['user_id']}")

    def _upload_url(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "filename", "length")
        file_id = self._next_id("F")
        upload = Upload(file_id, str(args["filename"]), int(args["length"]))
        with self._lock:
            self._uploads[file_id] = upload
        return {"ok": True, "upload_url": f"{self.base_url}upload/{file_id}", "file_id": file_id}

    def _complete_upload(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "files")
        files = args["files"]
        if not isinstance(files, list):
            raise _ApiError("invalid_arguments", ["files must be a JSON array"])
        out = []
        with self._lock:
            for item in files:
                upload = self._uploads.get(str(item.get("id")))
                if upload is None or upload.content is None:
                    raise _ApiError("file_not_found", [f"{item.get('id')} was not uploaded"])
                upload.title = item.get("title") or upload.filename
                upload.completed = True
                out.append(
                    {
                        "id": upload.file_id,
                        "name": upload.filename,
                        "title": upload.title,
                        "size": len(upload.content),
                        "user": BOT_USER_ID,
                        "created": FIRST_TS,
                        "channels": [args["channel_id"]] if args.get("channel_id") else [],
                    }
                )
        return {"ok": True, "files": out}

    # -- response URLs and uploads ----------------------------------------------------------

    def _response_url(self, name: str, headers: dict[str, str], raw: bytes) -> tuple[int, str]:
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {k: v[0] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()}
            if isinstance(body.get("payload"), str):
                body = json.loads(body["payload"])
        if not isinstance(body, dict):
            return 400, "invalid_payload"
        problem = None if body.get("delete_original") else validate_message(body)
        with self._lock:
            if problem is not None:
                self.invalid.append(Invalid(f"response_url/{name}", problem[0], problem[1], body))
                return 400, problem[0]
            self._responses.append(Response(name, body, headers))
        return 200, "ok"

    def _upload(self, file_id: str, raw: bytes) -> tuple[int, str]:
        with self._lock:
            upload = self._uploads.get(file_id)
            if upload is None:
                return 404, "file not found"
            upload.content = raw
        return 200, f"OK - {len(raw)}"
