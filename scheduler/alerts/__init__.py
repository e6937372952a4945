"""Alerts paika raises on its own: quota expiry and use, idle GPUs, the daily digest.

Every alert goes through the outbox (`outbox.py`): a check claims the occasion once in
SQL (the `alerts` table, keyed by the occasion), then the outbox delivers it through an
`Announcer` and marks it sent only when delivery got through. A restart, a missed run or
a second instance therefore neither repeats an alert nor skips it.
"""
