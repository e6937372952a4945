"""Every relative link in README.md reaches something: a file or folder of the repository,
and where the link names an anchor, a heading (or an explicit anchor) of that Markdown
file, slugged as GitHub slugs headings."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"(?<!!)\[(?:[^\]\n]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)


def _prose(text: str) -> str:
    """The text without code blocks and code spans (a link shown as code is no link)."""
    return CODE.sub("", FENCE.sub("", text))


def github_slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: markup dropped, lower case, punctuation
    removed (letters of any script kept), spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    found: set[str] = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(text):
        slug = github_slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(_prose(path.read_text(encoding="utf-8")))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)
    ]


def test_readme_links_into_the_docs() -> None:
    links = relative_links(README)
    assert any(link.startswith("docs/") for link in links), "README.md links to no docs page"


def test_every_relative_link_in_the_readme_resolves() -> None:
    broken = []
    for link in relative_links(README):
        target, _, anchor = link.partition("#")
        path = README if not target else (README.parent / unquote(target)).resolve()
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and unquote(anchor) not in anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, "README.md has broken links:\n" + "\n".join(broken)


def test_slugs_follow_github() -> None:
    assert github_slug("The ledger's reports") == "the-ledgers-reports"
    assert github_slug("Why a job waits: `/gpu why` and `/gpu priority`") == (
        "why-a-job-waits-gpu-why-and-gpu-priority"
    )
    assert github_slug("可抢占任务：检查点、停止与续跑") == "可抢占任务检查点停止与续跑"
