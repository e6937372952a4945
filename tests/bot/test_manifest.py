"""manifest.yml declares everything the code registers, within Slack's field limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from slack_bolt import App

from bot.listeners import register

MANIFEST = Path(__file__).resolve().parents[2] / "manifest.yml"


class RecordingApp(App):
    """A real Bolt app that also notes what was registered on it."""

    def __init__(self) -> None:
        super().__init__(token="xoxb-test", signing_secret="s", token_verification_enabled=False)
        self.seen: dict[str, list[Any]] = {"command": [], "event": [], "action": [], "view": []}

    def command(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        self.seen["command"].append(command)
        return super().command(command, *args, **kwargs)

    def event(self, event: Any, *args: Any, **kwargs: Any) -> Any:
        self.seen["event"].append(event)
        return super().event(event, *args, **kwargs)

    def action(self, constraints: Any, *args: Any, **kwargs: Any) -> Any:
        self.seen["action"].append(constraints)
        return super().action(constraints, *args, **kwargs)

    def view(self, constraints: Any, *args: Any, **kwargs: Any) -> Any:
        self.seen["view"].append(constraints)
        return super().view(constraints, *args, **kwargs)


def _manifest() -> dict[str, Any]:
    loaded = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _registered() -> RecordingApp:
    app = RecordingApp()
    register(app, services=None, messenger=None, modals=None, answers=None)  # type: ignore[arg-type]  # listeners only close over them
    return app


def test_every_registered_command_and_event_is_declared() -> None:
    manifest, app = _manifest(), _registered()
    declared_commands = {c["command"] for c in manifest["features"]["slash_commands"]}
    assert set(app.seen["command"]) == declared_commands == {"/gpu"}
    declared_events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert set(app.seen["event"]) == declared_events


def test_buttons_and_modals_need_interactivity_and_the_home_tab_is_on() -> None:
    manifest, app = _manifest(), _registered()
    assert app.seen["action"] and app.seen["view"]
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True


def test_scopes_cover_what_the_bot_calls() -> None:
    scopes = set(_manifest()["oauth_config"]["scopes"]["bot"])
    # commands: /gpu; chat:write: replies, DMs, updates; im:write: conversations.open;
    # users:read: users.info for the locale; files:write: the digest picture.
    assert {"commands", "chat:write", "im:write", "users:read", "files:write"} <= scopes
    used = {
        "chat_postMessage": "chat:write",
        "chat_update": "chat:write",
        "conversations_open": "im:write",
        "users_info": "users:read",
    }
    source = "\n".join(
        p.read_text(encoding="utf-8") for p in (MANIFEST.parent / "bot").rglob("*.py")
    )
    for method, scope in used.items():
        if method in source:
            assert scope in scopes, f"{method} needs {scope}"


def test_fields_are_within_slacks_limits() -> None:
    manifest = _manifest()
    info = manifest["display_information"]
    assert 1 <= len(info["name"]) <= 35
    assert len(info["description"]) <= 140
    assert 175 <= len(info["long_description"]) <= 4000
    assert len(manifest["features"]["bot_user"]["display_name"]) <= 80
    for command in manifest["features"]["slash_commands"]:
        assert command["command"].startswith("/") and len(command["command"]) <= 32
        assert len(command["description"]) <= 2000
        assert len(command.get("usage_hint", "")) <= 1000
