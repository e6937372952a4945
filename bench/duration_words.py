"""How the bot says a length of time: its own words (bot.i18n.duration) against Babel's
`format_timedelta`, in wording and in time per call.

Babel is not a dependency of paika's server: it comes with the docs extra (mkdocs-material).
This bench is what decided against it for durations, and says so again when run:

- wording: Babel says one unit, rounded ("2 hours" for an hour and a half, "1 day" for
  thirty hours, no "3 h 20 min"), where a queue's estimates and waits need the finer forms;
- cost: both are printed per call, en and zh, over lengths from 30 s to 5 days.

    .venv/bin/python bench/duration_words.py [--calls 20000]

Prints a table of both wordings, the figures, and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import timedelta

from bot.i18n import duration

SECONDS = (30, 600, 2700, 5400, 12_000, 30 * 3600, 3 * 86400, 5 * 86400 + 7200)
BABEL_LOCALES = {"en": "en", "zh": "zh_Hans"}


def per_call_us(say: Callable[[float], str], calls: int) -> float:
    """Microseconds per call, over `calls` calls cycling through SECONDS."""
    say(SECONDS[0])  # the catalogue and Babel's locale data load outside the timing
    begin = time.perf_counter()
    for i in range(calls):
        say(SECONDS[i % len(SECONDS)])
    return (time.perf_counter() - begin) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    from babel.dates import format_timedelta

    def babel(lang: str) -> Callable[[float], str]:
        locale = BABEL_LOCALES[lang]
        return lambda s: format_timedelta(timedelta(seconds=s), locale=locale, format="short")

    def own(lang: str, exact: bool = False) -> Callable[[float], str]:
        return lambda s: duration(lang, s, to_the_minute=exact)

    print(f"{'seconds':>8}  {'paika':<14} {'to the minute':<14} {'Babel':<10} | zh")
    for s in SECONDS:
        zh = f"{own('zh')(s)} · {own('zh', True)(s)} · {babel('zh')(s)}"
        print(f"{s:>8}  {own('en')(s):<14} {own('en', True)(s):<14} {babel('en')(s):<10} | {zh}")
    figures = {
        f"{name}_{lang}_us": round(per_call_us(say(lang), args.calls), 2)
        for lang in ("en", "zh")
        for name, say in (("paika", own), ("babel", babel))
    }
    for name, value in figures.items():
        print(f"{name}: {value} µs per call")
    print(json.dumps({"bench": "duration_words", "calls": args.calls, **figures}))


if __name__ == "__main__":
    main()
