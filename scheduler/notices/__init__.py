"""Notices: everything paika tells people, through one outbox.

    outbox.py   the outbox: claim a notice in the change's own transaction, deliver it
                through the Announcer of its medium (Slack, console), retry with backoff;
                the Courier that delivers on its own thread
    events.py   job and host events (started, finished, unknown, host down …), recorded
                in the outbox by the cycle; observers that watch them (tests, the demo)

Alerts (scheduler/alerts/) and the digest (scheduler/digest/) raise their notices into the
same outbox.
"""
