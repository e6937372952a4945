"""`paika cmd` through the running service's socket (bot/console_socket.py): the same words
and exit status as in process, without loading the database's libraries; answered in
process when the settings differ, the socket is stale or the peer is another user; and never
run twice when the service took a command and did not answer."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from paika_test_cli import run_paika

from bot.cli import console_reply
from bot.console import render
from bot.console_socket import (
    SOCKET_NAME,
    ConsoleSocket,
    ask,
    parse_cmd,
    settings_digest,
    socket_path,
)
from bot.i18n import LANGUAGES
from scheduler.app import Paika
from scheduler.running import ALL_STOPPED_WITHIN_S
from scheduler.settings import Settings

PAIKA = Path(sys.executable).with_name("paika")
ADMIN = "UADMIN"

# The console script's entry; says on its last line of stderr whether the database's
# libraries were loaded (they are when the command ran in this process).
COUNTING = """
import json, sys
sys.argv = ["paika", *sys.argv[1:]]
from bot.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
else:
    code = 0
print(json.dumps({"in_process": "sqlalchemy" in sys.modules}), file=sys.stderr)
sys.exit(code)
"""


def _wait(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _env(data: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    return {**clean, "PAIKA_DATA_DIR": str(data), "PAIKA_ADMINS": ADMIN}


def _cmd(env: dict[str, str], *args: str, cwd: Path | None = None) -> tuple[int, str, str, bool]:
    """`paika cmd ARGS` as a process: its exit status, stdout, stderr, and whether it ran the
    command itself."""
    done = subprocess.run(
        [sys.executable, "-c", COUNTING, "cmd", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    *said, last = done.stderr.splitlines()
    return done.returncode, done.stdout, "\n".join(said), json.loads(last)["in_process"]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Paika, dict[str, str]]]:
    """A service on a SQLite data dir, a member and a job, listening on the console socket
    as `paika up` does."""
    data = tmp_path / "data"
    env = _env(data)
    paika = Paika.start(Settings(data_dir=data, admins=(ADMIN,), config=None), words=render)
    assert paika.run("admin member add <@UALICE> team=vision", ADMIN).ok
    submit = 'submit name=bert gpus=1 hours=2 priority=normal data=ready cmd="python bert.py"'
    assert paika.run(submit, "UALICE").ok
    path = socket_path(env, os.getcwd())
    console = ConsoleSocket.open(
        path, settings_digest(env, os.getcwd()), partial(console_reply, paika), LANGUAGES
    )
    assert console is not None
    try:
        yield paika, env
    finally:
        console.close()
        paika.engine.dispose()


@pytest.mark.parametrize(
    "args",
    [
        ("help",),
        ("--user", "UALICE", "queue"),
        ("status 1", "--user=UALICE"),
        ("-u", "UALICE", "status 1", "--lang", "zh"),
        ("--user", "UALICE", "status 99"),  # a user error: stderr, exit status 1
        ("--user", "UALICE", "frobnicate"),
        ("--user", "UALICE", "queue", "--lang", "fr"),  # typer's path says what is wrong
    ],
)
def test_the_socket_answers_as_the_process_would(
    service: tuple[Paika, dict[str, str]], args: tuple[str, ...]
) -> None:
    _, env = service
    code, out, err, in_process = _cmd(env, *args)
    assert not in_process, err
    here = run_paika(["cmd", *args], env)
    assert (code, out, err.strip()) == (here.exit_code, here.stdout, here.stderr.strip())


def test_a_change_through_the_socket_is_made_once(service: tuple[Paika, dict[str, str]]) -> None:
    paika, env = service
    submit = "submit name=gpt gpus=1 hours=1 priority=normal data=ready cmd='python gpt.py'"
    code, out, err, in_process = _cmd(env, "--user", "UALICE", submit)
    assert (code, in_process) == (0, False), err
    assert "#2" in out
    queue = paika.run("queue", "UALICE").text
    assert queue.count("gpt") == 1 and "#3" not in queue


def test_other_settings_are_answered_in_process(service: tuple[Paika, dict[str, str]]) -> None:
    _, env = service
    other = {**env, "PAIKA_ADMINS": f"{ADMIN},UOTHER"}  # another admin: other answers may differ
    code, out, err, in_process = _cmd(other, "--user", "UALICE", "queue")
    assert (code, in_process) == (0, True), err
    assert "bert" in out


def test_a_relative_data_dir_finds_the_socket_from_its_own_folder(
    service: tuple[Paika, dict[str, str]],
) -> None:
    _, env = service
    data = Path(env["PAIKA_DATA_DIR"])
    relative = {**env, "PAIKA_DATA_DIR": data.name}
    code, out, err, in_process = _cmd(relative, "--user", "UALICE", "queue", cwd=data.parent)
    assert (code, in_process) == (0, False), err
    assert "bert" in out


def test_arguments_typer_reads_are_left_to_it() -> None:
    assert parse_cmd(["queue", "--user", "U1"]) == ("queue", "U1", None)
    assert parse_cmd(["--lang=zh", "-u", "U1", "help"]) == ("help", "U1", "zh")
    for args in (["--help"], ["queue", "--user"], ["a", "b"], ["queue", "--verbose"], []):
        assert parse_cmd(args) is None, args


def test_a_stale_socket_is_answered_in_process_and_replaced(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(data / SOCKET_NAME))
    stale.close()  # the file stays; nothing listens: a paika up that was killed
    env = _env(data)
    code, out, err, in_process = _cmd(env, "help")
    assert (code, in_process) == (0, True), err
    assert "/gpu" in out
    console = ConsoleSocket.open(data / SOCKET_NAME, "digest", lambda *_: (True, "answered"))
    assert console is not None
    try:
        assert stat.S_IMODE((data / SOCKET_NAME).stat().st_mode) == 0o600
    finally:
        console.close()
    assert not (data / SOCKET_NAME).exists()


@pytest.mark.parametrize(
    ("lang", "said"),
    [
        ("en", "stopped before it answered; it may have been carried out"),
        ("zh", "但在答复前停止了；命令可能已经执行"),
    ],
)
def test_a_command_taken_and_not_answered_is_not_run_again(
    tmp_path: Path, lang: str, said: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(data / SOCKET_NAME))
    server.listen(1)

    def take_and_drop() -> None:  # a service that stops while the command runs
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)

    thread = threading.Thread(target=take_and_drop, daemon=True)
    thread.start()
    try:
        code, _, err, in_process = _cmd(_env(data), "--user", "UALICE", "--lang", lang, "cancel 1")
    finally:
        thread.join(timeout=10)
        server.close()
    assert (code, in_process) == (2, False)
    assert said in err  # in the reader's language, and no English of the socket's own


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another user")
def test_another_user_is_answered_in_process() -> None:
    # A folder others may enter, and a socket they may open: here the peer check is tested.
    folder = Path(tempfile.mkdtemp(prefix="paika-peer-"))
    try:
        folder.chmod(0o755)
        path = folder / SOCKET_NAME
        console = ConsoleSocket.open(path, "digest", lambda *_: (True, "answered"))
        assert console is not None
        path.chmod(0o666)
        try:
            pid = os.fork()
            if pid == 0:  # pragma: no cover (the child)
                try:
                    os.setuid(65534)
                    answer = ask(path, "digest", "help", None, None)
                    os._exit(0 if answer is None else 3)
                except BaseException:
                    os._exit(4)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            assert ask(path, "digest", "help", None, None) == (True, "answered")  # root is
        finally:
            console.close()
    finally:
        shutil.rmtree(folder)


def test_paika_up_answers_on_its_socket_and_removes_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**_env(data), "PAIKA_AGENT_TOKEN": "agent-token-0123456789"}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        env["PAIKA_HTTP_PORT"] = str(sock.getsockname()[1])
    log = tmp_path / "up.log"
    with log.open("w") as sink:
        up = subprocess.Popen([str(PAIKA), "up"], env=env, stdout=sink, stderr=sink)
    path = data / SOCKET_NAME
    try:
        _wait(lambda: path.is_socket() or up.poll() is not None, "paika up's socket")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, log.read_text()
        code, out, err, in_process = _cmd(env, "help")
        assert (code, in_process) == (0, False), err
        assert "/gpu" in out
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=ALL_STOPPED_WITHIN_S + 15)  # its parts' bound, and a margin
    assert up.returncode == 0, log.read_text()
    assert not path.exists()
    assert f"paika cmd is answered here, through {path}" in log.read_text()
