"""Every Web API call the bot makes on its own initiative: DMs, approval requests, App Home.

Posting is best effort: a Slack error is logged and never undoes what paika already did
(the job stays queued, the decision stays made); the WebClient retries rate limits itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.blocks.bump import bump_decided, bump_request
from bot.blocks.home import home_view
from bot.blocks.logs import is_long, upload_logs
from bot.blocks.notices import bump_decision_dm
from bot.blocks.replies import Message
from bot.channels import ChannelDirectory
from bot.pacing import AcksFirst
from bot.services import ApprovalRequest, BotServices
from scheduler.door import (
    BumpResult,
    BumpState,
    ChangeResult,
    DecisionResult,
    JobView,
    LogsResult,
    Reply,
    SubmitResult,
)

log = logging.getLogger(__name__)


class Messenger:
    """Posts for the bot through one WebClient."""

    def __init__(
        self, client: WebClient, services: BotServices, pacing: AcksFirst | None = None
    ) -> None:
        self.client = client
        self.services = services
        self.pacing = pacing or AcksFirst()  # the HTTP layer tells it when requests arrive
        self._dm_channels: dict[str, str] = {}
        self.channels = ChannelDirectory(client)  # #names to ids, looked up once
        self._lock = threading.Lock()
        self._background = ThreadPoolExecutor(max_workers=4, thread_name_prefix="paika-slack-post")
        # The bot's other pools (build_app's: the answers, the modals), whose work posts here:
        # closed before this one, so none of it finds the posting pool gone.
        self.feeding: list[ThreadPoolExecutor] = []

    def close(self) -> None:
        """End the bot's pools once their queued work is done: the feeding ones, then the
        posts (SlackBot.stop, once no request can come in)."""
        for pool in (*self.feeding, self._background):
            pool.shutdown(wait=True)

    def later(self, work: Callable[..., object], *args: object) -> None:
        """Post in the background (after a modal's ack); a failure is logged, not raised."""

        def run() -> None:
            try:
                work(*args)
            except Exception:  # nobody waits for this work; the log is where it can be seen
                log.exception("background Slack work failed")

        self._background.submit(run)

    def dm(self, user_id: str, message: Message) -> bool:
        """Send `message` to the user's DM with the app."""
        channel = self._dm_channel(user_id)
        return channel is not None and self.post(channel, message) is not None

    def post(self, channel: str, message: Message) -> tuple[str, str] | None:
        """Post to a channel (id or #name); the channel id and ts Slack gives the message."""
        channel = self.channels.id_of(channel)
        try:
            answer = self.client.chat_postMessage(
                channel=channel, text=message.text, blocks=message.blocks
            )
        except SlackClientError as exc:
            log.warning("could not post to %s: %s", channel, _why(exc))
            return None
        # Slack answers with the channel's id, which chat.update needs (a #name will not do).
        return str(answer.get("channel") or channel), str(answer.get("ts"))

    def update(self, channel: str, ts: str, message: Message) -> bool:
        try:
            self.client.chat_update(
                channel=channel, ts=ts, text=message.text, blocks=message.blocks
            )
        except SlackClientError as exc:
            log.warning("could not update message %s in %s: %s", ts, channel, _why(exc))
            return False
        return True

    def publish_home(self, user_id: str) -> bool:
        """Draw the user's App Home afresh: their jobs, the board, their quotas."""
        lang = self.services.language(user_id)
        data = self.services.home(user_id)
        view = home_view(
            user_id,
            data.my_jobs,
            data.board,
            data.quotas,
            lang,
            self.services.zone,
            self.services.now(),
            data.estimates,
        )
        try:
            self.client.views_publish(user_id=user_id, view=view)
        except SlackClientError as exc:
            log.warning("could not publish the home tab of %s: %s", user_id, _why(exc))
            return False
        return True

    def follow_up(self, reply: Reply, user_id: str) -> None:
        """What a successful command changes in Slack beyond its reply: fresh homes, a long
        output tail as a file in the DM (`/gpu logs`). (Its
        notices, such as asking approvers, go through the outbox.)"""
        if not reply.ok:
            return
        if isinstance(reply.result, LogsResult) and is_long(reply.result):
            self.upload_logs(user_id, reply.result)
        view = _job_view(reply.result)
        if view is not None:
            for owner in {user_id, view.job.owner}:
                self.publish_home(owner)

    def upload_logs(self, user_id: str, result: LogsResult) -> bool:
        """A job's long output tail, as a text file in the user's DM with the app."""
        channel = self._dm_channel(user_id)
        lang = self.services.language(user_id)
        return channel is not None and upload_logs(self.client, channel, result, lang)

    def ask_approvers(self, request_id: int) -> bool:
        """Post the request with Approve/Deny buttons where its approvers are; False if
        nobody could be asked (tried again by the outbox). A request decided or withdrawn
        meanwhile asks nobody."""
        approval = self.services.approval(request_id)
        if approval is None or approval.request.state != BumpState.PENDING:
            return True
        if self._ask(request_id, approval, approval.targets):
            return True
        # The channel refused (the bot not invited, archived …): ask each approver directly,
        # so the request never sits where nobody can see it.
        log.warning("no channel took bump request #%s; asking its approvers by DM", request_id)
        return self._ask(
            request_id, approval, [a for a in approval.approvers if a not in approval.targets]
        )

    def announce_decision_of(self, request_id: int) -> bool:
        """The decision of request `request_id`, in its approval message and to whoever
        asked; False if the DM did not get through (tried again by the outbox)."""
        approval = self.services.approval(request_id)
        if approval is None:
            return True
        return self.announce_decision(DecisionResult(approval.request, approval.view, True))

    def _ask(self, request_id: int, approval: ApprovalRequest, targets: Sequence[str]) -> bool:
        """Post the request to each target; True if at least one took it."""
        asked = False
        for target in targets:
            lang = self.services.language(target) if _is_user(target) else self._channel_lang()
            message = bump_request(approval.request, approval.view, lang)
            channel = self._dm_channel(target) if _is_user(target) else target
            posted = self.post(channel, message) if channel else None
            if posted is not None:
                self.services.remember_approval_message(request_id, *posted)
                asked = True
        return asked

    def announce_decision(self, result: DecisionResult) -> bool:
        """Replace the buttons with the decision, and tell the person who asked (True when
        they were told)."""
        request = result.request
        if request.message_channel and request.message_ts:
            message = bump_decided(request, result.view, self._channel_lang(), self.services.zone)
            self.update(request.message_channel, request.message_ts, message)
        requester = request.requested_by
        return self.dm(requester, bump_decision_dm(result, self.services.language(requester)))

    def _channel_lang(self) -> str:
        return self.services.paika.policy.slack.default_language

    def _dm_channel(self, user_id: str) -> str | None:
        with self._lock:
            known = self._dm_channels.get(user_id)
        if known:
            return known
        try:
            answer = self.client.conversations_open(users=user_id)
        except SlackClientError as exc:
            log.warning("could not open a DM with %s: %s", user_id, _why(exc))
            return None
        channel = str((answer.get("channel") or {}).get("id") or "")
        if not channel:
            return None
        with self._lock:
            self._dm_channels[user_id] = channel
        return channel


def _job_view(result: object) -> JobView | None:
    if isinstance(result, SubmitResult | ChangeResult | BumpResult | DecisionResult):
        return result.view
    return None


def _is_user(target: str) -> bool:
    return target[:1] in ("U", "W")


def _why(exc: SlackClientError) -> str:
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error", exc))
    return str(exc)
