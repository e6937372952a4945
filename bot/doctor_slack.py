"""`paika doctor`'s Slack checks: the bot token works (auth.test), HTTP mode has its signing
secret, the channel for the digest is set, and the bot is in every channel the policy names
(it can post only where it is). The same findings as scheduler/doctor.py, asked of the Web API
at PAIKA_SLACK_API_URL (else Slack's own)."""

from __future__ import annotations

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.channels import _MENTION, CHANNEL_ID, ChannelDirectory
from scheduler.door import Finding, PolicyConfig, Settings, Severity

# The findings about one configured channel (paika up's bot logs those itself at start).
CHANNEL_CODES = frozenset({"slack.channel_ok", "slack.channel_missing", "slack.not_member"})


def check_slack(
    settings: Settings, policy: PolicyConfig | None, timeout: int = 10
) -> list[Finding]:
    token = settings.slack_bot_token
    if token is None:
        return [Finding("slack.off", Severity.OK)]
    found: list[Finding] = []
    if settings.slack_app_token is None and settings.slack_signing_secret is None:
        found.append(Finding("slack.no_signing_secret", Severity.BLOCK))
    client = WebClient(
        token=token.get_secret_value(),
        base_url=settings.slack_api_url or WebClient.BASE_URL,
        timeout=timeout,
    )
    try:
        who = client.auth_test()
    except SlackApiError as exc:
        error = str(exc.response.get("error") or exc)
        return [*found, Finding("slack.auth_failed", Severity.BLOCK, {"error": error})]
    except SlackClientError as exc:  # no answer at all
        return [*found, Finding("slack.unreachable", Severity.BLOCK, {"error": str(exc)})]
    except OSError as exc:
        return [*found, Finding("slack.unreachable", Severity.BLOCK, {"error": str(exc)})]
    found.append(
        Finding(
            "slack.ok",
            Severity.OK,
            {"team": str(who.get("team") or ""), "bot": str(who.get("user") or "")},
        )
    )
    if policy is None:
        return found
    if not policy.slack.channel:
        found.append(Finding("slack.no_channel", Severity.WARN))
    named = [policy.slack.channel, policy.slack.approvals_channel]
    named += [team.channel for team in policy.teams.values()]
    directory = ChannelDirectory(client)
    for channel in dict.fromkeys(name for name in named if name):
        found.append(_channel(client, directory, channel))
    return found


def _channel(client: WebClient, directory: ChannelDirectory, channel: str) -> Finding:
    mention = _MENTION.fullmatch(channel)
    channel_id = mention[1] if mention else channel if CHANNEL_ID.fullmatch(channel) else None
    if channel_id is not None:
        try:
            info = client.conversations_info(channel=channel_id)
        except SlackClientError:
            return Finding("slack.channel_missing", Severity.WARN, {"channel": channel})
        member = bool((info.get("channel") or {}).get("is_member"))
    else:
        found = directory.find(channel)
        if found is None:
            return Finding("slack.channel_missing", Severity.WARN, {"channel": channel})
        channel_id, member = found.id, found.member
    values = {"channel": channel, "id": channel_id}
    if not member:
        return Finding("slack.not_member", Severity.WARN, values)
    return Finding("slack.channel_ok", Severity.OK, values)
