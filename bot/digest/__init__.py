"""The daily digest as people see it: the scheduler builds it (scheduler/digest/), the bot
says and draws it.

    slack.py    posts the Block Kit board (bot/blocks/digest.py) and uploads its picture
    text.py     the digest as plain text, for `paika digest --print`
    picture.py  the PNG: every GPU's last day and next hours, utilization by type
                (matplotlib, so imported only where drawn)
"""
