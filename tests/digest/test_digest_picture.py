"""The digest's picture: a real PNG of a sensible size with the timeline's colours in it,
in English and Chinese (or English when no CJK font is installed), with no warnings."""

from __future__ import annotations

import dataclasses
import io
import itertools
import logging
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from paika_test_time import T0
from PIL import Image
from world import (
    BIG_HOSTS,
    BIG_RUNS,
    BIG_WAITING,
    WIDE_DOMAIN,
    WIDE_HOSTS,
    WIDE_RUNS,
    WIDE_WAITING,
    build,
    people,
    submit,
)

from bot.digest import picture
from bot.digest.hosts import ELLIPSIS, host_labels
from bot.digest.picture import (
    AXIS_PX,
    BOTTOM_PX,
    DOWN,
    GAP_PX,
    IDLE,
    JOB_COLOURS,
    JOB_LABEL,
    ROW_PX,
    TIMELINE,
    TOP_PX,
    UTIL_PX,
    WIDTH_PX,
    draw,
    gantt_px,
    render_png,
)
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.digest import Digest, digest_now
from scheduler.digest.model import SegmentKind
from scheduler.digest.timeline import MAX_ROWS
from scheduler.settings import Settings


@pytest.fixture(scope="module")
def big_day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Digest]:
    """A realistic day on 24 GPUs (4 hosts, 12 runs, 6 waiting jobs), built once."""
    path: Path = tmp_path_factory.mktemp("picture") / "paika.db"
    clock = ManualClock(T0)
    paika = Paika.start(
        Settings(database_url=f"sqlite:///{path}", admins=("UADMIN",), config=None), clock=clock
    )
    people(paika)
    build(paika, BIG_HOSTS, BIG_RUNS, samples_from_h=-25, quotas=[("vision", None, 200, 10)])
    submit(paika, clock, BIG_WAITING)
    yield digest_now(paika)
    paika.engine.dispose()


@pytest.fixture(scope="module")
def wide_day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Digest]:
    """64 GPUs on 8 long-named hosts, the last one down, 44 runs planned close together."""
    path: Path = tmp_path_factory.mktemp("wide") / "paika.db"
    clock = ManualClock(T0)
    paika = Paika.start(
        Settings(database_url=f"sqlite:///{path}", admins=("UADMIN",), config=None), clock=clock
    )
    people(paika)
    build(paika, WIDE_HOSTS, WIDE_RUNS, samples_from_h=-25)
    submit(paika, clock, WIDE_WAITING)
    yield digest_now(paika)
    paika.engine.dispose()


def timeline_axes(figure: Figure) -> Axes:
    (axes,) = [axes for axes in figure.axes if axes.get_gid() == TIMELINE]
    return axes


def extents(texts: list[Text], figure: Figure) -> list[Bbox]:
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    return [text.get_window_extent(renderer) for text in texts]


def decode(png: bytes) -> Image.Image:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(io.BytesIO(png))
    image.load()
    return image.convert("RGB")


def colours(image: Image.Image) -> set[tuple[int, int, int]]:
    found = image.getcolors(maxcolors=1 << 20)
    assert found is not None
    return {colour for _, colour in found}


def rgb(hex_colour: str) -> tuple[int, int, int]:
    value = hex_colour.lstrip("#")
    return (int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16))


def expected_height(rows: int) -> int:
    return round(TOP_PX + gantt_px(rows) + AXIS_PX + GAP_PX + UTIL_PX + BOTTOM_PX)


def test_the_picture_is_a_readable_png_with_every_job_in_its_colour(big_day: Digest) -> None:
    image = decode(render_png(big_day, "en"))
    assert image.size == (WIDTH_PX, expected_height(24))
    seen = colours(image)
    assert len(seen) > 200  # lines, text and many bars, not a blank canvas
    jobs = {s.job_id for row in big_day.timeline.rows for s in row.segments if s.job_id}
    assert len(jobs) == 12
    # Every job of the day has its own colour (fewer jobs than colours here), drawn solid.
    assert set(map(rgb, JOB_COLOURS[: len(jobs)])) <= seen
    assert rgb(IDLE) in seen and rgb(DOWN) in seen


def test_chinese_labels_when_a_cjk_font_exists(
    big_day: Digest, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="matplotlib")
    english, chinese = render_png(big_day, "en"), render_png(big_day, "zh")
    decode(chinese)
    # Nothing to fix in matplotlib's log either (a missing bold face, a missing family).
    assert [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("matplotlib")
    ] == []
    if picture.cjk_font() is None:
        assert chinese == english  # no font with the glyphs: English labels, not empty boxes
    else:
        assert chinese != english


def test_without_a_cjk_font_chinese_falls_back_to_english_and_says_so_once(
    big_day: Digest, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(picture, "_cjk", lambda: None)
    monkeypatch.setattr(picture, "_TOLD", set())
    caplog.set_level(logging.WARNING, logger="bot.digest.picture")
    # Job names in Chinese cannot be drawn either: the bar shows the job's number only.
    # (pytest turns a "Glyph missing" warning into an error.)
    rows = tuple(
        dataclasses.replace(
            row,
            segments=tuple(
                dataclasses.replace(s, job_name="中文任务") if s.job_id else s for s in row.segments
            ),
        )
        for row in big_day.timeline.rows
    )
    chinese_names = dataclasses.replace(
        big_day, timeline=dataclasses.replace(big_day.timeline, rows=rows)
    )
    assert render_png(chinese_names, "zh") == render_png(chinese_names, "en")
    render_png(chinese_names, "zh")
    told = [r.getMessage() for r in caplog.records if r.name == "bot.digest.picture"]
    assert len(told) == 1, told  # once a process, not every morning's picture
    assert "drawn with English labels" in told[0] and "apt install fonts-noto-cjk" in told[0]
    note = picture.font_note("zh")
    assert note is not None and "apt install fonts-noto-cjk" in note and "英文" in note
    assert picture.font_note("en") is None


def _fonts(monkeypatch: pytest.MonkeyPatch, families: dict[str, str], files: list[str]) -> None:
    """matplotlib's font list and the fonts on disk, as a test says them."""
    manager = font_manager.fontManager
    entries = [font_manager.FontEntry(fname=path, name=name) for name, path in families.items()]
    monkeypatch.setattr(manager, "ttflist", entries)
    monkeypatch.setattr(manager, "addfont", lambda path: None)
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda: files)
    picture._cjk.cache_clear()


@pytest.fixture
def fresh_cjk() -> Iterator[None]:
    """The CJK font looked for again after a test controlled the font list."""
    picture._cjk.cache_clear()
    yield
    picture._cjk.cache_clear()


def test_a_cjk_font_is_found_by_its_glyphs_not_its_name(
    monkeypatch: pytest.MonkeyPatch, fresh_cjk: None
) -> None:
    dejavu = font_manager.findfont("DejaVu Sans")
    # No font at all, and a font named like a CJK one without the glyphs: none is found.
    _fonts(monkeypatch, {}, [])
    assert picture.cjk_font() is None and picture.drawn_language("zh") == "en"
    _fonts(monkeypatch, {"Noto Sans CJK SC": dejavu}, [dejavu])
    assert picture.cjk_font() is None and picture.font_note("zh") is not None
    # A font that has them is found, and the picture is drawn in Chinese, with nothing to say.
    monkeypatch.setattr(picture, "_covers", lambda path, text: path == "/fonts/wqy-microhei.ttc")
    _fonts(monkeypatch, {"WenQuanYi Micro Hei": "/fonts/wqy-microhei.ttc"}, [])
    assert picture.cjk_font() == "WenQuanYi Micro Hei"
    assert picture.drawn_language("zh") == "zh" and picture.font_note("zh") is None


def test_a_cjk_font_installed_here_is_found(fresh_cjk: None) -> None:
    fc_list = shutil.which("fc-list")
    listed = (
        subprocess.run(
            [fc_list, ":lang=zh", "family"], capture_output=True, text=True, check=False
        ).stdout
        if fc_list
        else ""
    )
    if not listed.strip():
        pytest.skip("no font with Chinese glyphs on this machine (fc-list :lang=zh is empty)")
    assert picture.cjk_font() is not None, listed


def test_rows_thin_past_64_and_stop_at_the_most_and_an_empty_cluster_still_draws(
    big_day: Digest,
) -> None:
    timeline = big_day.timeline
    assert expected_height(64) == expected_height(1) + 63 * ROW_PX  # grows up to 64 rows
    many = dataclasses.replace(
        big_day,
        timeline=dataclasses.replace(timeline, rows=timeline.rows * 8, more_gpus=10),
    )
    assert len(many.timeline.rows) > MAX_ROWS
    assert decode(render_png(many, "en")).size == (WIDTH_PX, expected_height(64))
    figure = draw(many, "en")
    labels = timeline_axes(figure).get_yticklabels()
    assert len(labels) == MAX_ROWS
    # Thinner rows, smaller labels: no row's label runs into the next one's.
    boxes = extents(labels, figure)
    assert all(not a.overlaps(b) for a, b in zip(boxes, boxes[1:], strict=False))
    empty = dataclasses.replace(
        big_day,
        types=(),
        utilization=(),
        timeline=dataclasses.replace(timeline, rows=(), planned=(), more_gpus=0),
    )
    image = decode(render_png(empty, "en"))
    assert image.size == (WIDTH_PX, expected_height(1))
    assert rgb(JOB_COLOURS[0]) in colours(image)  # the legend still explains the colours


def test_drawing_from_two_threads_at_once(big_day: Digest) -> None:
    results: list[bytes] = []

    def draw() -> None:
        results.append(render_png(big_day, "en"))

    threads = [threading.Thread(target=draw) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 2 and results[0] == results[1]


def test_the_day_has_what_the_picture_is_meant_to_show(big_day: Digest) -> None:
    kinds = {s.kind for row in big_day.timeline.rows for s in row.segments}
    assert kinds == {SegmentKind.JOB, SegmentKind.IDLE, SegmentKind.FREE, SegmentKind.DOWN}
    assert big_day.timeline.planned and all(p.rows for p in big_day.timeline.planned)


# -- a 64-GPU cluster --------------------------------------------------------------------


def test_every_gpu_of_64_is_drawn_the_down_host_s_too(wide_day: Digest) -> None:
    assert len(wide_day.timeline.rows) == 64 and wide_day.timeline.more_gpus == 0
    assert decode(render_png(wide_day, "en")).size == (WIDTH_PX, expected_height(64))
    axes = timeline_axes(draw(wide_day, "en"))
    labels = [label.get_text() for label in axes.get_yticklabels()]
    assert len(labels) == 64
    assert sum("slot08" in label for label in labels) == 8  # the down host, sorted last
    down_rows = {
        int(patch.get_y())
        for patch in axes.patches
        if isinstance(patch, Rectangle) and patch.get_facecolor()[:3] == to_rgb(DOWN)
    }
    assert set(range(56, 64)) <= down_rows


def test_long_host_names_are_shortened_to_fit_and_stay_apart(wide_day: Digest) -> None:
    figure = draw(wide_day, "en")
    axes = timeline_axes(figure)
    labels = axes.get_yticklabels()
    left_of_timeline = axes.get_window_extent().x0
    for label, box in zip(labels, extents(labels, figure), strict=True):
        assert box.x0 >= 0 and box.x1 <= left_of_timeline, label.get_text()
    hosts = {label.get_text().split("/gpu")[0] for label in labels}
    assert len(hosts) == 8  # still one name per host
    for slot in range(1, 9):
        (name,) = [host for host in hosts if host.endswith(f"slot{slot:02d}")]
        assert name.startswith(ELLIPSIS) and len(name) >= len("…slot01")
    # A host name that fits is left whole.
    short = timeline_axes(draw(wide_day_renamed(wide_day), "en")).get_yticklabels()
    assert short[0].get_text() == "gpu-01/gpu0 A100-80GB"


def wide_day_renamed(digest: Digest) -> Digest:
    rows = tuple(
        dataclasses.replace(row, host=f"gpu-{row.host[-len(WIDE_DOMAIN) - 2 : -len(WIDE_DOMAIN)]}")
        for row in digest.timeline.rows
    )
    return dataclasses.replace(digest, timeline=dataclasses.replace(digest.timeline, rows=rows))


def test_shortened_host_names_keep_their_domain_cut_or_what_tells_them_apart() -> None:
    def room(chars: int) -> Callable[[str, str], bool]:
        return lambda host, name: len(name) <= chars

    def labels(hosts: list[str], chars: int) -> dict[str, str]:
        found = host_labels(hosts, room(chars))
        assert not found.numbered
        return dict(found.labels)

    hosts = ["gpu-node-rack12-slot07.cluster.example", "gpu-node-rack12-slot08.cluster.example"]
    assert labels(hosts, 60) == {host: host for host in hosts}
    assert labels(hosts, 24)[hosts[0]] == "gpu-node-rack12-slot07…"
    # What both share is left out, cut where a word of the name begins.
    assert labels(hosts, 9) == {hosts[0]: "…slot07", hosts[1]: "…slot08"}
    assert labels(hosts, 3) == {hosts[0]: "…07", hosts[1]: "…08"}
    # Names that differ only at their start keep it rather than share an ending.
    twins = ["east-gpu-node-0001", "west-gpu-node-0001"]
    assert labels(twins, 10) == {twins[0]: "east…", twins[1]: "west…"}
    # Twelve nodes: never "…1" for both gpu-node-01 and gpu-node-11.
    nodes = [f"gpu-node-{n:02d}" for n in range(1, 13)]
    assert labels(nodes, 3) == {host: f"…{host[-2:]}" for host in nodes}
    # Names in another script, where its characters can be drawn…
    cjk = ["训练节点-01", "训练节点-02", "推理节点-01"]
    assert labels(cjk, 5) == {cjk[0]: "训…-01", cjk[1]: "…点-02", cjk[2]: "推…-01"}
    # …and where they cannot: the name DNS knows, never boxes, still two names.
    ascii_only = host_labels(cjk, room(40), drawable=str.isascii).labels
    assert all(label.isascii() for label in ascii_only.values())
    assert len(set(ascii_only.values())) == 3
    # No room to tell them apart: numbered, for the legend under the picture.
    assert host_labels(nodes, room(2)).numbered
    assert host_labels(["a-very-long-name"], room(0)).labels == {"a-very-long-name": "H1"}


def test_planned_labels_are_never_drawn_over_each_other(wide_day: Digest) -> None:
    planned = wide_day.timeline.planned
    by_row: dict[int, list[tuple[float, float]]] = {}
    for run in planned:
        for i in run.rows:
            by_row.setdefault(i, []).append((run.start.timestamp(), run.end.timestamp()))
    # What makes labels collide is there: runs back to back on the same card.
    assert sum(len(runs) > 1 for runs in by_row.values()) >= 8
    figure = draw(wide_day, "en")
    axes = timeline_axes(figure)
    texts = [text for text in axes.texts if text.get_gid() == JOB_LABEL]
    planned_ids = {f"#{run.job_id}" for run in planned}
    drawn = {text.get_text().split()[0] for text in texts}
    assert len(drawn & planned_ids) == len(planned_ids)  # every planned run still says its number
    boxes = extents(texts, figure)
    for n, (a, b) in enumerate(itertools.combinations(boxes, 2)):
        assert not a.overlaps(b), n
    # And each label stays inside the timeline.
    frame = axes.get_window_extent()
    assert all(frame.x0 <= box.x0 and box.x1 <= frame.x1 for box in boxes)


# -- host names of any length ------------------------------------------------------------

NODES = tuple(f"gpu-node-{n:02d}" for n in range(1, 13))
LONG = ("very-long-cluster-name-a100-rack3-node-01", "very-long-cluster-name-a100-rack3-node-02")
CJK = ("训练节点-01", "训练节点-02", "推理节点-01", "推理节点-02")
DOMAINS = tuple(f"gpu-node-{n:02d}.cluster.example.com" for n in range(1, 13))


def on_hosts(digest: Digest, hosts: tuple[str, ...], per_host: int, gpu_type: str) -> Digest:
    """The digest's first row copied onto `per_host` cards of each of `hosts`."""
    first = digest.timeline.rows[0]
    rows = tuple(
        dataclasses.replace(first, host=host, index=index, gpu_type=gpu_type)
        for host in hosts
        for index in range(per_host)
    )
    timeline = dataclasses.replace(digest.timeline, rows=rows, planned=(), more_gpus=0)
    return dataclasses.replace(digest, timeline=timeline)


@pytest.mark.parametrize("hosts", [NODES, LONG, CJK, DOMAINS], ids=["nodes", "long", "cjk", "fqdn"])
@pytest.mark.parametrize(
    ("per_host", "gpu_type"),
    [(1, "A100-80GB"), (8, "A100-SXM4-80GB"), (2, "RTX-6000-Ada-48GB")],
    ids=["one-card", "eight-cards", "long-type"],
)
def test_host_labels_are_distinct_readable_and_fit_at_any_name_length(
    big_day: Digest, hosts: tuple[str, ...], per_host: int, gpu_type: str
) -> None:
    figure = draw(on_hosts(big_day, hosts, per_host, gpu_type), "en")
    axes = timeline_axes(figure)
    labels = axes.get_yticklabels()
    assert len(labels) == len(hosts) * per_host
    left_of_timeline = axes.get_window_extent().x0
    for label, box in zip(labels, extents(labels, figure), strict=True):
        assert box.x0 >= 0 and box.x1 <= left_of_timeline, label.get_text()
        # The GPU type whole, or where it leaves the host too little room, around an ellipsis.
        kind = label.get_text().rsplit(" ", 1)[1]
        head, _, tail = kind.partition(ELLIPSIS)
        assert kind == gpu_type or (gpu_type.startswith(head) and gpu_type.endswith(tail)), kind
    said = [label.get_text().rsplit("/gpu", 1)[0] for label in labels]
    cjk = picture._cjk()
    drawable = picture._drawable_chars(cjk[1] if cjk else None)
    by_host = {host: said[n * per_host] for n, host in enumerate(hosts)}
    assert len(set(by_host.values())) == len(hosts), by_host  # pairwise distinct
    for host, name in by_host.items():
        assert all(
            said[n * per_host + i] == name for i in range(per_host) for n in [hosts.index(host)]
        )
        # Readable: the part that tells it from the others is there, not cut to "g…1".
        if host.isascii():
            number = host.split(".")[0].rsplit("-", 1)[1]
            assert number in name and len(name.strip(ELLIPSIS)) >= len(number), by_host
        # Drawn, not boxes: every character is one the picture's fonts have.
        assert all(ord(char) in drawable for char in name), name
    # Under the picture, what a shortened name stands for.
    notes = [text.get_text() for text in figure.texts if "Host names shortened" in text.get_text()]
    shortened = {name: host for host, name in by_host.items() if name != host}
    if shortened and all(host.isascii() for host in hosts):
        (note,) = notes
        short, whole = note.split("Host names shortened: ", 1)[1].split(" is ", 1)
        assert shortened[short] == whole.split("   ·   ")[0]
