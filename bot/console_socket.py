"""`paika cmd` through the running `paika up`: a Unix socket in the data dir.

A `paika cmd` process that starts the service itself spends most of its time importing the
database's and the models' libraries (bench/cli_timings.py). `paika up` has them loaded
already, so it listens on `<data dir>/paika.sock` (mode 0600) and answers a command there as
`paika cmd` would have answered it in process: the same text, the same exit status. The client
here imports nothing but the standard library.

The service answers only its own user (or root), by the peer's credentials (SO_PEERCRED; on a
system without them there is no socket), and only a client with the same settings as its own
(the database, the policy file, the admins, the agents' credentials, the data dir: compared as
a digest, relative paths resolved): a `paika cmd` run with other settings gets the answer of
its own settings, in process. So does one that finds no socket, or a socket no service
answers (left behind by a `paika up` that was killed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

SOCKET_NAME = "paika.sock"
# The settings whose values change what a command answers (scheduler/settings.py), and
# which of them name files (resolved against the working directory before they are compared).
ANSWER_SETTINGS = (
    "data_dir",
    "database_url",
    "config",
    "admins",
    "agent_token",
    "agent_secret_file",
    "agent_ca_file",
)
PATH_SETTINGS = frozenset({"data_dir", "config", "agent_secret_file", "agent_ca_file"})
DEFAULT_DATA_DIR = "paika-data"  # scheduler.settings.Settings.data_dir
# Seconds a client waits to connect, and for a command's answer (one may ask a host's agent).
CONNECT_TIMEOUT_S = 1.0
ANSWER_TIMEOUT_S = 120.0
MAX_REQUEST = 1 << 20  # bytes: a /gpu command's text is far shorter
# A Unix socket's path is at most this long (Linux: 108 bytes with the terminating NUL).
MAX_PATH = 107
_UCRED = struct.Struct("3i")  # pid, uid, gid

# (text, user or None, lang or None) -> (ok, words): what `paika cmd` prints, and where.
Answer = Callable[[str, str | None, str | None], tuple[bool, str]]


class NotAnswered(Exception):
    """The request reached the service but no answer came back: the command may have been
    carried out, so it must not be run again in process. Its text is the system's error, if
    one came (empty when the service closed the socket without a word)."""


def settings_digest(environ: Mapping[str, str], cwd: str) -> str:
    """A digest of the settings a command's answer depends on, as pydantic-settings reads them
    (PAIKA_ variables, any case), with relative paths resolved against `cwd`."""
    values = {key.lower(): value for key, value in environ.items()}
    chosen: dict[str, str | None] = {}
    for name in ANSWER_SETTINGS:
        value = values.get(f"paika_{name}")
        if name == "data_dir" and value is None:
            value = DEFAULT_DATA_DIR
        if value is not None and name in PATH_SETTINGS:
            value = os.path.normpath(os.path.join(cwd, os.path.expanduser(value)))
        if value is not None and name == "admins":
            value = ",".join(sorted(part.strip() for part in value.split(",") if part.strip()))
        chosen[name] = value
    if (chosen["database_url"] or "").startswith("sqlite") and not (
        chosen["database_url"] or ""
    ).startswith("sqlite:////"):
        chosen["cwd"] = cwd  # a relative SQLite file is a different database elsewhere
    encoded = json.dumps(chosen, sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()


def socket_path(environ: Mapping[str, str], cwd: str) -> Path:
    """Where the service of these settings listens: in its data dir."""
    values = {key.lower(): value for key, value in environ.items()}
    data_dir = values.get("paika_data_dir") or DEFAULT_DATA_DIR
    return Path(os.path.normpath(os.path.join(cwd, os.path.expanduser(data_dir)))) / SOCKET_NAME


# ---------------------------------------------------------------- the client (paika cmd)


def parse_cmd(args: list[str]) -> tuple[str, str | None, str | None] | None:
    """`paika cmd`'s arguments as (text, --user, --lang) when they are the plain forms; None
    for anything else (help, an unknown option, a missing value), which typer then reads and
    answers as it always does."""
    text: str | None = None
    options: dict[str, str] = {}
    names = {"--user": "user", "-u": "user", "--lang": "lang"}
    index = 0
    while index < len(args):
        arg = args[index]
        name, equals, value = arg.partition("=")
        if arg in names and index + 1 < len(args) and not args[index + 1].startswith("-"):
            options[names[arg]] = args[index + 1]
            index += 2
            continue
        if equals and name in ("--user", "--lang") and value:
            options[names[name]] = value
        elif arg.startswith("-") or text is not None:
            return None
        else:
            text = arg
        index += 1
    if text is None:
        return None
    return text, options.get("user"), options.get("lang")


def ask(
    path: Path, digest: str, text: str, user: str | None, lang: str | None
) -> tuple[bool, str] | None:
    """The service's answer to `paika cmd TEXT`; None when no service took the request (no
    socket, nothing listening, other settings): then it is answered in process. Raises
    NotAnswered when the request was sent and no answer came."""
    if len(os.fsencode(path)) > MAX_PATH:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(os.fspath(path))
        except OSError:  # no socket, or one no service listens on
            return None
        request = {"digest": digest, "text": text, "user": user, "lang": lang}
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
            sock.settimeout(ANSWER_TIMEOUT_S)
            reply = _read_line(sock)
        except OSError as exc:
            raise NotAnswered(str(exc)) from exc
    finally:
        sock.close()
    try:
        answer = json.loads(reply)
    except ValueError as exc:  # nothing, or half an answer: the service stopped meanwhile
        raise NotAnswered() from exc
    if answer.get("in_process"):  # other settings, or another user: answered in process
        return None
    return bool(answer["ok"]), str(answer["words"])


def _read_line(sock: socket.socket) -> bytes:
    """The service's answer: one line, however long the reply's text."""
    chunks: list[bytes] = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)


# ---------------------------------------------------------------- the service (paika up)


class ConsoleSocket:
    """`paika up`'s socket: one thread accepts, one short thread answers each connection."""

    def __init__(self, path: Path, digest: str, answer: Answer, languages: tuple[str, ...]) -> None:
        self.path, self.digest, self.answer = path, digest, answer
        self.languages = languages
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()

    @classmethod
    def open(
        cls, path: Path, digest: str, answer: Answer, languages: tuple[str, ...] = ("en",)
    ) -> ConsoleSocket | None:
        """Listen on `path` (mode 0600), replacing a socket no one answers on; None (and a
        line in the log) when there can be no socket here. `languages`: those `--lang` may
        name (bot.i18n.LANGUAGES)."""
        if not hasattr(socket, "SO_PEERCRED"):
            log.info("no console socket: this system cannot tell who connects to one")
            return None
        if len(os.fsencode(path)) > MAX_PATH:
            log.info("no console socket: its path %s is too long for one", path)
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            if _answers(path):
                log.warning(
                    "no console socket: another paika up answers on %s (the same data dir)", path
                )
                return None
            path.unlink()  # left behind by a paika up that did not stop cleanly
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_mask = os.umask(0o177)  # created 0600, never briefly wider
        try:
            server.bind(os.fspath(path))
        except OSError as exc:
            server.close()
            log.warning("no console socket at %s: %s", path, exc)
            return None
        finally:
            os.umask(old_mask)
        os.chmod(path, 0o600)
        server.listen(16)
        console = cls(path, digest, answer, languages)
        console._server = server
        console._thread = threading.Thread(
            target=console._accept, name="paika-console-socket", daemon=True
        )
        console._thread.start()
        return console

    def _accept(self) -> None:
        assert self._server is not None
        while not self._closing.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._serve, args=(conn,), name="paika-console-command", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(10)
                raw = _read_request(conn)
                if not raw:
                    return  # a probe (another paika up looking whether this one answers)
                request = json.loads(raw)
                uid = _peer_uid(conn)
                reply: dict[str, object]
                if uid not in (os.getuid(), 0):  # answered in process, with its own rights
                    log.warning("the console socket refused a process of uid %s", uid)
                    reply = {"in_process": "user"}
                elif request.get("digest") != self.digest:
                    reply = {"in_process": "settings"}
                elif request.get("lang") not in (None, *self.languages):
                    reply = {"in_process": "arguments"}  # typer's path says what is wrong
                else:
                    ok, words = self.answer(request["text"], request["user"], request["lang"])
                    reply = {"ok": ok, "words": words}
                conn.sendall(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("the console socket could not answer a command: %s", exc)
            except Exception:
                log.exception("a command through the console socket failed")

    def close(self) -> None:
        """Stop listening and remove the socket (a command being answered is finished)."""
        self._closing.set()
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end (the kernel's word, not the client's)."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return int(_UCRED.unpack(raw)[1])


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError("a request longer than any command")
    return data


def _answers(path: Path) -> bool:
    """Whether a service listens on the socket at `path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(CONNECT_TIMEOUT_S)
    try:
        probe.connect(os.fspath(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True
