"""The digest's picture: every GPU's last day and next hours, and utilization by type.

Drawn with matplotlib's object API on the Agg canvas (never pyplot, whose global figure
state is not safe across threads), at a size that stays readable when Slack shrinks it
to a 360-720 px preview: large fonts, 30 px per GPU row. Past `GROW_ROWS` rows the
picture stops growing and the rows (and their labels) get thinner instead, down to
`MIN_ROW_PX` at `TIMELINE_MAX_ROWS` rows, so that every GPU of a cluster is drawn.

Chinese labels need a font with CJK glyphs. One is looked for among the fonts matplotlib
knows (Noto Sans CJK, Source Han Sans, WenQuanYi, Droid Sans Fallback, ...); without
one, the picture is drawn with English labels rather than with empty boxes, and that is
said: once in the log, naming what to install, and under the picture's message
(`font_note`).
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.ft2font import FT2Font
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.transforms import Bbox

from bot.digest.hosts import ABBREVIATED, HostLabels, ascii_name, host_labels
from bot.i18n import Lang, catalogue, duration, t
from scheduler.door import TIMELINE_MAX_ROWS, Digest, GpuRow, Planned, SegmentKind

log = logging.getLogger(__name__)

# What to install for Chinese labels, as the log and the message under the picture say it.
CJK_INSTALL = "apt install fonts-noto-cjk"
CJK_INSTALL_OTHERS = (
    "dnf install google-noto-sans-cjk-fonts; brew install --cask font-noto-sans-cjk"
)

DPI = 100
WIDTH_PX = 1600
ROW_PX = 30
GROW_ROWS = 64  # the picture grows by ROW_PX a GPU up to this many rows (a 2.6k px tall PNG)
MIN_ROW_PX = ROW_PX * GROW_ROWS / TIMELINE_MAX_ROWS
LEFT_PX = 300  # room for "host/gpuN TYPE" labels
RIGHT_PX = 40
TOP_PX = 190  # title, summary line, the timeline's title, legend and "now"
AXIS_PX = 45  # time labels under the timeline
GAP_PX = 70
UTIL_PX = 260
BOTTOM_PX = 95  # time labels and footnotes

# Job labels inside bars: room left around them in their bar, and between two labels.
LABEL_INSET_PX, LABEL_GAP_PX = 6, 4
JOB_LABEL = "job-label"  # the gid of a job's label in its bar
TIMELINE = "timeline"  # the gid of the timeline's axes
# Row labels: the gap to the timeline, the margin at the picture's left edge, the smallest
# size still readable.
LABEL_PAD_PT, LABEL_MARGIN_PX, MIN_PT = 3.5, 8, 7.0
# The shares of a row label's room (past "/gpuN ") a shortened GPU type may take, tried in turn.
TYPE_SHARES = (0.8, 0.7, 0.6, 0.5)

FONT = "DejaVu Sans"  # ships with matplotlib, so always there
TITLE_PT, TEXT_PT, SMALL_PT = 26, 17, 15

# Distinct, saturated colours for jobs; none is amber (idle), grey (down) or green, which
# would read as free (pale green) once faded for a job's expected run.
JOB_COLOURS = (
    "#1f77b4",
    "#d62728",
    "#17becf",
    "#9467bd",
    "#ff7f0e",
    "#393b79",
    "#e377c2",
    "#8c564b",
    "#7b4173",
    "#00838f",
    "#c2185b",
    "#5d4037",
)
IDLE = "#ffd54f"
DOWN = "#9e9e9e"
FREE = "#e4f2e1"
FUTURE = "#f3f3f3"
NOW = "#c62828"
# A host's planned maintenance: a hatched band over its rows, dark enough to read over a
# job's expected run and over free cards alike.
MAINTENANCE_FACE, MAINTENANCE_EDGE = "#d5d5d5", "#424242"
AHEAD_PX = 30  # one more line under the picture for the maintenance and bookings ahead
# The legend's font size and the room between its entries, tried in turn until it fits on
# one line (the last is drawn whatever its width).
LEGEND_FITS = ((14, 1.4), (14, 0.9), (13, 0.8), (12, 0.7), (11, 0.6))
TYPE_COLOURS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#4e342e")

# Families looked for, most complete first; any other font with the glyphs would do too.
CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans CJK",
    "Noto Sans SC",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "Source Han Sans",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "Microsoft YaHei",
    "PingFang SC",
    "Hiragino Sans GB",
    "SimHei",
    "AR PL UMing CN",
    "AR PL UKai CN",
)
CJK_FILE_HINTS = ("cjk", "wqy", "sourcehan", "droidsansfallback", "notosanssc", "msyh", "simhei")
_PROBE = "卡时空闲"

# The picture's labels: the catalogue's digest.chart.<name>, filled in as they are drawn.
CHART_WORDS = (
    "title",
    "summary",
    "timeline",
    "utilization",
    "now",
    "job",
    "idle",
    "down",
    "free",
    "expected",
    "planned",
    "more_gpus",
    "no_gpus",
    "no_samples",
    "planned_note",
    "hosts_short",
    "hosts_numbered",
    "shared",
    "shared_summary",
    "maintenance",
    "ahead",
    "ahead_maintenance",
    "ahead_booking",
)

# Agg and the font caches are shared by every figure in the process; the bot may draw
# from more than one thread, and a daily picture gains nothing from drawing in parallel.
_LOCK = threading.Lock()
_TOLD: set[str] = set()  # "no CJK font" goes to the log once per process


def render_png(digest: Digest, lang: str = "en") -> bytes:
    """The digest's picture as PNG bytes; Chinese labels when `lang` is "zh" and a CJK font exists."""
    with _LOCK:
        figure = draw(digest, lang)
        out = io.BytesIO()
        figure.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    return out.getvalue()


def draw(digest: Digest, lang: str = "en") -> Figure:
    """The picture as a figure on an Agg canvas, laid out but not yet rendered (its artists
    are there to inspect). Not thread-safe: `render_png` holds the lock around it."""
    cjk = _cjk()
    drawn = drawn_language(lang)
    if drawn != lang:
        _tell_no_cjk_font()
    words = chart_words(drawn)
    return _Drawing(digest, drawn, words, cjk).figure()


def drawn_language(lang: str) -> Lang:
    """The language the picture's labels are drawn in for a reader of `lang`: English when
    Chinese is asked for and no installed font has its glyphs."""
    return "zh" if lang == "zh" and _cjk() is not None else "en"


def font_note(lang: str) -> str | None:
    """The line said under the picture when it is drawn in English for a reader of `lang`
    (no CJK font installed), naming what to install; None when it is drawn as asked."""
    if drawn_language(lang) == lang:
        return None
    return t(lang, "digest.picture_no_font", install=CJK_INSTALL)


def _tell_no_cjk_font() -> None:
    if "told" in _TOLD:
        return
    _TOLD.add("told")
    log.warning(
        "No installed font has Chinese glyphs, so the digest picture is drawn with English "
        "labels. Install one on this machine (%s; elsewhere: %s) and restart paika.",
        CJK_INSTALL,
        CJK_INSTALL_OTHERS,
    )


def chart_words(lang: Lang) -> dict[str, str]:
    """The picture's labels in `lang`, as templates (their values are filled in as drawn)."""
    return {name: catalogue()[f"digest.chart.{name}"][lang] for name in CHART_WORDS}


def cjk_font() -> str | None:
    """The family name of an installed font that has Chinese glyphs, or None."""
    found = _cjk()
    return found[0] if found else None


@cache
def _cjk() -> tuple[str, str] | None:
    """(family, file) of a font with Chinese glyphs: first among those matplotlib knows,
    then on disk, since a font installed after matplotlib built its font cache is not in it."""
    manager = font_manager.fontManager
    known = {entry.name: entry.fname for entry in manager.ttflist}
    names = [name for name in CJK_FAMILIES if name in known]
    names += sorted(n for n in known if n not in names and any(w in n for w in ("CJK", "Han")))
    for name in names:
        if _covers(known[name], _PROBE):
            return name, known[name]
    for path in sorted(font_manager.findSystemFonts()):
        if any(hint in path.lower() for hint in CJK_FILE_HINTS) and _covers(path, _PROBE):
            manager.addfont(path)
            return FT2Font(path).family_name, path
    return None


@cache
def _charmap(path: str) -> frozenset[int]:
    try:
        return frozenset(FT2Font(path).get_charmap())
    except (OSError, RuntimeError):  # an unreadable font file is a font we cannot use
        return frozenset()


def _covers(path: str, text: str) -> bool:
    chars = _charmap(path)
    return all(ord(char) in chars for char in text)


@cache
def _drawable_chars(cjk_path: str | None) -> frozenset[int]:
    """Every character the picture's fonts can draw (a job may be named in any script)."""
    paths: list[str] = [
        str(font_manager.findfont(FontProperties(family=FONT), fallback_to_default=True))
    ]
    if cjk_path is not None:
        paths.append(cjk_path)
    chars: set[int] = set()
    for path in paths:
        chars |= _charmap(path)
    return frozenset(chars)


@cache
def _has_bold(family: str) -> bool:
    manager = font_manager.fontManager
    return any(
        entry.name == family and manager.score_weight("bold", entry.weight) == 0
        for entry in manager.ttflist
    )


def row_px(rows: int) -> float:
    """The height of one GPU's row when `rows` are drawn."""
    return ROW_PX if rows <= GROW_ROWS else max(MIN_ROW_PX, ROW_PX * GROW_ROWS / rows)


def gantt_px(rows: int) -> float:
    """The timeline's height in pixels for `rows` GPUs (one row's room when there are none)."""
    count = max(1, min(rows, TIMELINE_MAX_ROWS))
    return row_px(count) * count


class _Drawing:
    """One picture: the layout in pixels, and each part drawn by its own method."""

    def __init__(
        self,
        digest: Digest,
        lang: Lang,
        words: Mapping[str, str],
        cjk: tuple[str, str] | None,
    ) -> None:
        self.digest, self.lang, self.words = digest, lang, words
        self.zone = ZoneInfo(digest.timezone)
        self.timeline = digest.timeline
        self.rows = self.timeline.rows[:TIMELINE_MAX_ROWS]
        self.hidden = self.timeline.more_gpus + len(self.timeline.rows) - len(self.rows)
        # Latin from DejaVu Sans, Chinese from the CJK font (matplotlib falls back per glyph).
        self.font = FontProperties(family=[FONT, cjk[0]] if cjk else [FONT])
        self.colours = self._job_colours()
        self.chars = _drawable_chars(cjk[1] if cjk else None)
        self.latin = _drawable_chars(None)
        self.cjk_bold = cjk is not None and _has_bold(cjk[0])
        # Thinner rows get smaller labels, in proportion, so neighbours do not touch.
        self.scale = row_px(len(self.rows)) / ROW_PX
        self.placed: list[Bbox] = []  # the job labels drawn so far, in pixels
        # How the rows name the hosts and GPU types (set as the timeline is drawn).
        self.hosts = HostLabels({})
        self.types: dict[str, str] = {}
        self.renderer: RendererAgg | None = None

    # -- layout --------------------------------------------------------------------------

    def figure(self) -> Figure:
        rows_px = gantt_px(len(self.rows))
        height = TOP_PX + rows_px + AXIS_PX + GAP_PX + UTIL_PX + BOTTOM_PX
        if self._calendar():
            height += AHEAD_PX
        figure = Figure(figsize=(WIDTH_PX / DPI, height / DPI), dpi=DPI, facecolor="white")
        self.renderer = FigureCanvasAgg(figure).get_renderer()  # type: ignore[no-untyped-call]

        def box(top_px: float, height_px: float) -> tuple[float, float, float, float]:
            return (
                LEFT_PX / WIDTH_PX,
                1 - (top_px + height_px) / height,
                (WIDTH_PX - LEFT_PX - RIGHT_PX) / WIDTH_PX,
                height_px / height,
            )

        self._header(figure, height)
        gantt = figure.add_axes(box(TOP_PX, rows_px), gid=TIMELINE)
        util = figure.add_axes(box(TOP_PX + rows_px + AXIS_PX + GAP_PX, UTIL_PX))
        self._gantt(gantt)
        self._utilization(util)
        self._footnotes(figure, height)
        return figure

    def _text(self, size: float) -> FontProperties:
        font = self.font.copy()
        font.set_size(size)
        return font

    def _bold(self, size: float, text: str) -> FontProperties:
        """Bold for `text`. Text DejaVu Sans can draw alone is set in its bold; other text is
        bold only if the CJK font has a bold face (matplotlib would otherwise log that it
        fell back to the regular one, every time)."""
        if all(ord(char) in self.latin for char in text):
            font = FontProperties(family=FONT, size=size, weight="bold")
        else:
            font = self._text(size)
            font.set_weight("bold" if self.cjk_bold else "normal")
        return font

    def _header(self, figure: Figure, height: float) -> None:
        digest, words = self.digest, self.words
        title = words["title"].format(day=digest.day.isoformat())
        timeline = words["timeline"].format(ahead=self._ahead(), zone=digest.timezone)
        figure.text(
            20 / WIDTH_PX,
            1 - 14 / height,
            title,
            va="top",
            fontproperties=self._bold(TITLE_PT, title),
        )
        summary = words["summary"].format(
            free=digest.free_gpus,
            total=digest.total_gpus,
            running=digest.running,
            waiting=digest.waiting,
            data=digest.waiting_for_data,
            at=digest.at.astimezone(self.zone).strftime("%H:%M %Z"),
        )
        if digest.shared_gpus:
            summary = words["shared_summary"].format(summary=summary, n=digest.shared_gpus)
        figure.text(
            20 / WIDTH_PX,
            1 - 58 / height,
            summary,
            va="top",
            fontproperties=self._text(TEXT_PT),
        )
        figure.text(
            20 / WIDTH_PX,
            1 - 100 / height,
            timeline,
            va="top",
            fontproperties=self._bold(TEXT_PT, timeline),
        )
        handles = [
            Patch(facecolor=JOB_COLOURS[0], label=words["job"]),
            Patch(facecolor=IDLE, hatch="///", edgecolor="#6d5a00", label=words["idle"]),
            Patch(facecolor=DOWN, label=words["down"]),
            Patch(facecolor=FREE, edgecolor="#b8d8b0", label=words["free"]),
            Patch(facecolor=JOB_COLOURS[0], alpha=0.3, label=words["expected"]),
            Patch(
                facecolor="white",
                edgecolor=JOB_COLOURS[0],
                linestyle="--",
                linewidth=2,
                label=words["planned"],
            ),
        ]
        if self._maintenance_drawn():
            handles.append(
                Patch(
                    facecolor=MAINTENANCE_FACE,
                    edgecolor=MAINTENANCE_EDGE,
                    hatch="xx",
                    label=words["maintenance"],
                )
            )
        if self._any_shared():
            # Only where a card is shared: a whole card's picture keeps its legend.
            handles.append(
                Patch(
                    facecolor=JOB_COLOURS[0],
                    edgecolor="white",
                    hatch="--",
                    label=words["shared"],
                )
            )
        # One line: closer, then smaller, as entries are added (a shared card's, a planned
        # maintenance's), until it fits the picture's width.
        for size, spacing in LEGEND_FITS:
            legend = figure.legend(
                handles=handles,
                loc="upper left",
                bbox_to_anchor=(12 / WIDTH_PX, 1 - 128 / height),
                ncol=len(handles),
                frameon=False,
                prop=self._text(size),
                handlelength=1.6,
                columnspacing=spacing,
            )
            fits = legend.get_window_extent(self.renderer).x1 <= WIDTH_PX - 8
            if fits or (size, spacing) == LEGEND_FITS[-1]:
                break
            legend.remove()

    # -- the timeline --------------------------------------------------------------------

    def _hours(self, moment: datetime) -> float:
        """A moment as hours from now (negative: past): the x axis of both panels."""
        return (moment - self.timeline.now).total_seconds() / 3600

    def _x_axis(self, axes: Axes, labels: bool) -> None:
        left, right = self._hours(self.timeline.start), self._hours(self.timeline.end)
        axes.set_xlim(left, right)
        ticks, names = [], []
        local = self.timeline.start.astimezone(self.zone)
        moment = local.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        while moment.hour % 3:
            moment += timedelta(hours=1)
        while self._hours(moment) <= right:
            ticks.append(self._hours(moment))
            names.append(moment.strftime("%m-%d" if moment.hour == 0 else "%H:%M"))
            moment += timedelta(hours=3)
        axes.set_xticks(ticks)
        axes.set_xticklabels(names if labels else [], fontproperties=self._text(SMALL_PT))
        axes.grid(axis="x", color="#d0d0d0", linewidth=0.8)
        axes.set_axisbelow(True)
        axes.axvspan(0, right, color=FUTURE, zorder=0)
        axes.axvline(0, color=NOW, linewidth=2.2, zorder=5)

    def _gantt(self, axes: Axes) -> None:
        words, rows = self.words, self.rows
        count = max(1, len(rows))
        axes.set_ylim(count, 0)
        self._x_axis(axes, labels=True)
        axes.text(
            0,
            1.0,
            words["now"],
            color=NOW,
            ha="center",
            va="bottom",
            transform=axes.get_xaxis_transform(),
            fontproperties=self._bold(SMALL_PT, words["now"]),
        )
        if not rows:
            axes.set_yticks([])
            axes.text(
                0.5,
                0.5,
                words["no_gpus"],
                ha="center",
                va="center",
                transform=axes.transAxes,
                fontproperties=self._text(TEXT_PT),
            )
            return
        axes.set_yticks([i + 0.5 for i in range(len(rows))])
        font = self._text(self._row_pt())
        axes.set_yticklabels(self._row_labels(font), fontproperties=font)
        axes.tick_params(axis="y", length=0, pad=LABEL_PAD_PT)
        for i, row in enumerate(rows):
            self._row(axes, i, row)
        for planned in self.timeline.planned:
            self._planned(axes, planned)
        for a, b, rows_of_host in self._maintenance_spans():
            for i in rows_of_host:
                axes.add_patch(
                    Rectangle(
                        (a, i),
                        b - a,
                        1,
                        facecolor=MAINTENANCE_FACE,
                        edgecolor=MAINTENANCE_EDGE,
                        hatch="xx",
                        linewidth=0,
                        alpha=0.9,
                        zorder=4,
                    )
                )
        # A rule between hosts, so a host's cards read as one group.
        for i in range(1, len(rows)):
            if rows[i].host != rows[i - 1].host:
                axes.axhline(i, color="#404040", linewidth=1.6, zorder=6)

    def _row_pt(self) -> float:
        return max(MIN_PT, SMALL_PT * self.scale)

    def _size(self, text: str, font: FontProperties) -> tuple[float, float]:
        """`text`'s width and height in pixels as Agg will draw it."""
        assert self.renderer is not None
        measure = self.renderer.get_text_width_height_descent
        width, height, _ = measure(text, font, ismath=False)  # type: ignore[no-untyped-call]
        return float(width), float(height)

    def _width(self, text: str, font: FontProperties) -> float:
        return self._size(text, font)[0]

    def _row_labels(self, font: FontProperties) -> list[str]:
        """Each row's "host/gpuN TYPE", fitting left of the timeline with every host told
        apart (see bot/digest/hosts.py). Where a GPU type's name leaves the hosts too little
        room to keep their names' words whole, the types are shortened too (the utilization
        legend names them), if the hosts then read better."""
        room = LEFT_PX - LABEL_MARGIN_PX - LABEL_PAD_PT * DPI / 72
        kinds = sorted({row.gpu_type for row in self.rows})
        found = self._host_labels(font, room, {kind: kind for kind in kinds})
        if found.way >= ABBREVIATED:
            # The longest type names under which the hosts keep whole words, down to half
            # the room; else those under which they read best.
            widest = max(self._width(f"/gpu{row.index} ", font) for row in self.rows)
            for share in TYPE_SHARES:
                short = host_labels(
                    kinds,
                    self._fits_in(font, share * (room - widest)),
                    self._drawable,
                    balanced=True,
                )
                better = self._host_labels(font, room, short.labels)
                if not short.numbered and better.way < found.way:
                    found, self.types = better, dict(short.labels)
                if found.way < ABBREVIATED:
                    break
        self.hosts = found
        return [
            f"{found.labels[row.host]}/gpu{row.index} {self.types.get(row.gpu_type, row.gpu_type)}"
            for row in self.rows
        ]

    def _host_labels(
        self, font: FontProperties, room: float, kinds: Mapping[str, str]
    ) -> HostLabels:
        """The hosts' labels where each row ends in "/gpuN" and its type as `kinds` says it."""
        widest: dict[str, float] = {}
        for row in self.rows:
            suffix = self._width(f"/gpu{row.index} {kinds[row.gpu_type]}", font)
            widest[row.host] = max(widest.get(row.host, 0.0), suffix)
        return host_labels(
            list(widest),
            lambda host, name: self._width(name, font) <= room - widest[host],
            self._drawable,
        )

    def _fits_in(self, font: FontProperties, width: float) -> Callable[[str, str], bool]:
        return lambda _, label: self._width(label, font) <= width

    def _drawable(self, text: str) -> bool:
        return all(ord(char) in self.chars for char in text)

    def _maintenance_spans(self) -> list[tuple[float, float, list[int]]]:
        """Each planned maintenance inside the timeline, as (from, to) in hours from now,
        with the rows of its host."""
        left, right = self._hours(self.timeline.start), self._hours(self.timeline.end)
        spans = []
        for window in self.digest.maintenance:
            a = max(self._hours(window.starts), left)
            b = min(self._hours(window.ends), right)
            rows = [i for i, row in enumerate(self.rows) if row.host == window.host]
            if b > a and rows:
                spans.append((a, b, rows))
        return spans

    def _maintenance_drawn(self) -> bool:
        return bool(self._maintenance_spans())

    def _calendar(self) -> bool:
        """Whether anything is planned ahead: a maintenance or a booking not over."""
        return bool(self.digest.maintenance or self.digest.bookings)

    def _ahead_line(self, room: float) -> str:
        """The maintenance and bookings not over, soonest first, as far as `room` (pixels)
        allows."""
        words, zone = self.words, self.zone

        def span(starts: datetime, ends: datetime) -> tuple[str, str]:
            a, b = starts.astimezone(zone), ends.astimezone(zone)
            return a.strftime("%m-%d %H:%M"), b.strftime(
                "%H:%M" if a.date() == b.date() else "%m-%d %H:%M"
            )

        items: list[tuple[datetime, str]] = []
        for window in self.digest.maintenance:
            host = window.host if self._drawable(window.host) else ascii_name(window.host)
            a, b = span(window.starts, window.ends)
            items.append(
                (window.starts, words["ahead_maintenance"].format(host=host, starts=a, ends=b))
            )
        for booking in self.digest.bookings:
            team = booking.team if self._drawable(booking.team) else ascii_name(booking.team)
            a, b = span(booking.starts, booking.ends)
            said = words["ahead_booking"].format(
                gpus=booking.gpus, gpu_type=booking.gpu_type, team=team, starts=a, ends=b
            )
            items.append((booking.starts, said))
        items.sort(key=lambda item: item[0])
        font = self._text(SMALL_PT)
        said = ""
        for _, item in items:
            more = f"{said}   ·   {item}" if said else item
            if self._width(words["ahead"].format(items=more + "   ·   …"), font) > room:
                said = f"{said}   ·   …" if said else "…"
                break
            said = more
        return words["ahead"].format(items=said)

    def _any_shared(self) -> bool:
        return any(row.also or any(s.also for s in row.segments) for row in self.rows)

    def _row(self, axes: Axes, i: int, row: GpuRow) -> None:
        # A stretch of a shared card is one stripe per job on it, each in its job's colour.
        runs: dict[tuple[int, ...], list[tuple[float, float, str]]] = {}
        for segment in row.segments:
            a, b = self._hours(segment.start), self._hours(segment.end)
            if segment.kind == SegmentKind.FREE:
                self._bar(axes, i, a, b, FREE)
            elif segment.kind == SegmentKind.DOWN:
                self._bar(axes, i, a, b, DOWN)
            elif segment.job_id is not None:
                jobs = (segment.job_id, *segment.also)
                for stripe, job_id in enumerate(jobs):
                    colour = self.colours.get(job_id, JOB_COLOURS[0])
                    part = (stripe, len(jobs))
                    if segment.kind == SegmentKind.IDLE:
                        self._bar(axes, i, a, b, IDLE, hatch="///", edge=colour, part=part)
                    else:
                        self._bar(axes, i, a, b, colour, part=part)
                runs.setdefault(jobs, []).append((a, b, segment.kind))
        if row.job_id is not None and row.expected_end is not None:
            end = min(self._hours(row.expected_end), self._hours(self.timeline.end))
            if end > 0:
                jobs = (row.job_id, *row.also)
                for stripe, job_id in enumerate(jobs):
                    colour = self.colours.get(job_id, JOB_COLOURS[0])
                    self._bar(axes, i, 0, end, colour, alpha=0.3, part=(stripe, len(jobs)))
        names = {s.job_id: s.job_name or "" for s in row.segments if s.job_id is not None}
        for jobs, pieces in runs.items():
            a, b, kind = max(pieces, key=lambda piece: piece[1] - piece[0])
            background = IDLE if kind == SegmentKind.IDLE else self.colours[jobs[0]]
            if len(jobs) == 1:
                self._label(axes, i, a, b, jobs[0], names.get(jobs[0], ""), background)
            else:  # a shared stretch names its jobs by number: "#12+#13"
                short = "+".join(f"#{job_id}" for job_id in jobs)
                self._label(axes, i, a, b, jobs[0], "", background, short=short)

    def _bar(
        self,
        axes: Axes,
        i: int,
        a: float,
        b: float,
        colour: str,
        *,
        hatch: str | None = None,
        edge: str | None = None,
        alpha: float = 1.0,
        part: tuple[int, int] = (0, 1),
    ) -> None:
        """A bar on row `i` from `a` to `b`; `part` (k, n): the k-th of n stripes of it, one
        per job of a shared card."""
        stripe, stripes = part
        axes.add_patch(
            Rectangle(
                (a, i + 0.1 + 0.8 * stripe / stripes),
                b - a,
                0.8 / stripes,
                facecolor=colour,
                edgecolor=edge or "none",
                hatch=hatch,
                linewidth=0,
                alpha=alpha,
                zorder=2,
            )
        )

    def _planned(self, axes: Axes, planned: Planned) -> None:
        right = self._hours(self.timeline.end)
        a, b = self._hours(planned.start), min(self._hours(planned.end), right)
        if b <= a:
            return
        colour = self.colours.get(planned.job_id, JOB_COLOURS[0])
        for i in planned.rows:
            if i >= len(self.rows):
                continue
            axes.add_patch(
                Rectangle(
                    (a, i + 0.12),
                    b - a,
                    0.76,
                    facecolor="white",
                    edgecolor=colour,
                    linestyle="--",
                    linewidth=2,
                    zorder=3,
                )
            )
            self._label(axes, i, a, b, planned.job_id, planned.name, "#ffffff")

    def _label(
        self,
        axes: Axes,
        i: int,
        a: float,
        b: float,
        job_id: int,
        name: str,
        background: str,
        *,
        short: str | None = None,
    ) -> None:
        """The job's number (and name, when it fits and can be drawn) inside its bar, measured
        as drawn; a label that would not fit its bar, or would touch one already drawn (planned
        runs close together), is left out rather than drawn over another."""
        left, bottom = axes.transData.transform((a, i + 1))
        right, top = axes.transData.transform((b, i))
        size = 14 * self.scale
        short = short or f"#{job_id}"
        full = f"#{job_id} {name[:18]}"
        choices = [full, short] if name and all(ord(c) in self.chars for c in full) else [short]
        for text in choices:
            font = self._bold(size, text)
            width, height = self._size(text, font)
            if width + LABEL_INSET_PX > right - left or height > top - bottom:
                continue
            middle_x, middle_y = (left + right) / 2, (bottom + top) / 2
            extent = Bbox.from_bounds(
                middle_x - width / 2 - LABEL_GAP_PX / 2,
                middle_y - height / 2,
                width + LABEL_GAP_PX,
                height,
            )
            if any(extent.overlaps(other) for other in self.placed):
                continue
            self.placed.append(extent)
            break
        else:
            return
        red, green, blue = to_rgb(background)
        dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.55
        axes.text(
            a + (b - a) / 2,
            i + 0.5,
            text,
            ha="center",
            va="center",
            color="white" if dark else "#1a1a1a",
            clip_on=True,
            zorder=7,
            gid=JOB_LABEL,
            fontproperties=font,
        )

    def _ahead(self) -> str:
        return duration(self.lang, (self.timeline.end - self.timeline.now).total_seconds())

    def _job_colours(self) -> dict[int, str]:
        """A colour per job, in the order jobs first appear, so neighbours differ."""
        seen: list[tuple[datetime, int]] = []
        for row in self.rows:
            seen += [(s.start, s.job_id) for s in row.segments if s.job_id is not None]
            seen += [(s.start, other) for s in row.segments for other in s.also]
            seen += [(self.timeline.now, other) for other in row.also]
        seen += [(p.start, p.job_id) for p in self.timeline.planned]
        colours: dict[int, str] = {}
        for _, job_id in sorted(seen):
            if job_id not in colours:
                colours[job_id] = JOB_COLOURS[len(colours) % len(JOB_COLOURS)]
        return colours

    # -- utilization ---------------------------------------------------------------------

    def _utilization(self, axes: Axes) -> None:
        self._x_axis(axes, labels=True)
        axes.set_ylim(0, 100)
        axes.set_yticks([0, 25, 50, 75, 100])
        axes.set_yticklabels(["0", "25", "50", "75", "100"], fontproperties=self._text(SMALL_PT))
        axes.grid(axis="y", color="#e0e0e0", linewidth=0.8)
        title = self.words["utilization"]
        axes.set_title(title, loc="left", fontproperties=self._bold(TEXT_PT, title))
        series = [u for u in self.digest.utilization if any(v is not None for v in u.hourly)]
        if not series:
            axes.text(
                -12,
                50,
                self.words["no_samples"],
                ha="center",
                va="center",
                fontproperties=self._text(TEXT_PT),
            )
            return
        start = self._hours(self.timeline.start)
        handles = []
        for n, usage in enumerate(series):
            colour = TYPE_COLOURS[n % len(TYPE_COLOURS)]
            xs = [start + k + 0.5 for k, value in enumerate(usage.hourly) if value is not None]
            ys = [value for value in usage.hourly if value is not None]
            axes.plot(xs, ys, color=colour, linewidth=2.6, marker="o", markersize=5, zorder=4)
            handles.append(Line2D([], [], color=colour, linewidth=3, label=usage.gpu_type))
        # The hours ahead have no readings: the legend goes there, off the lines.
        axes.legend(
            handles=handles,
            loc="upper right",
            framealpha=0.0,
            prop=self._text(SMALL_PT),
            borderaxespad=0.4,
        )

    def _host_notes(self, room: float) -> list[str]:
        """What a shortened host label stands for: one example (the others read alike), or
        every number where the hosts are numbered, as far as `room` (pixels) allows."""
        # A name the fonts cannot draw is said as the rows say it: in its ASCII form.
        shortened = {
            short: host if self._drawable(host) else ascii_name(host)
            for short, host in self.hosts.shortened.items()
        }
        shortened = {short: whole for short, whole in shortened.items() if short != whole}
        if not shortened:
            return []
        if not self.hosts.numbered:
            short, whole = next(iter(shortened.items()))
            return [self.words["hosts_short"].format(short=short, whole=whole)]
        font = self._text(SMALL_PT)
        room -= self._width(self.words["hosts_numbered"].format(hosts=""), font)
        said = ""
        for number, host in shortened.items():
            more = f"{said}, {number} {host}" if said else f"{number} {host}"
            if self._width(more + ", …", font) > room:
                said += ", …"
                break
            said = more
        return [self.words["hosts_numbered"].format(hosts=said)]

    def _footnotes(self, figure: Figure, height: float) -> None:
        notes: list[str] = []
        if self.hidden > 0:
            notes.append(self.words["more_gpus"].format(n=self.hidden))
        if any(p.rows for p in self.timeline.planned):
            notes.append(self.words["planned_note"])
        font = self._text(SMALL_PT)
        used = self._width("   ·   ".join([*notes, ""]), font) if notes else 0.0
        notes += self._host_notes(WIDTH_PX - 40 - used)
        if notes:
            figure.text(
                20 / WIDTH_PX,
                22 / height,
                "   ·   ".join(notes),
                va="bottom",
                color="#505050",
                fontproperties=self._text(SMALL_PT),
            )
        if self._calendar():
            figure.text(
                20 / WIDTH_PX,
                (22 + AHEAD_PX) / height,
                self._ahead_line(WIDTH_PX - 40),
                va="bottom",
                color="#303030",
                fontproperties=self._text(SMALL_PT),
            )
