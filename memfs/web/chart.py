"""A file's Life chart: turns that carried it and turns that opened it, per day, as inline SVG.

Pure: values in (``memfs.core.story.LifeDay``), an SVG string out, drawn on
the server so the page needs no JavaScript and loads nothing. Every text in
it (the title, the dates, each bar's tooltip) is escaped for XML, so a file
name can never open an element of its own. Days without turns in between
are drawn as empty, so the axis is time, not the list of active days; only
the last ``max_days`` are drawn.

The SVG has ``role="img"`` and an ``aria-label`` that says the totals, two
bars per day (``class="carried"`` and ``class="opened"``, each with a
``<title>`` tooltip), the first and last date under the axis and the
largest count beside it. Colours come from the classes; the page's CSS may
restyle them, and the inline defaults keep the chart readable without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from html import escape

from memfs.core.story import LifeDay

WIDTH = 600
HEIGHT = 160
MAX_DAYS = 60  # the chart shows the last two months of a file's life

_PAD_LEFT = 32
_PAD_BOTTOM = 22
_PAD_TOP = 24


def _x(text: str) -> str:
    return escape(text, quote=True)


def life_chart(
    days: Sequence[LifeDay],
    *,
    title: str = "",
    width: int = WIDTH,
    height: int = HEIGHT,
    max_days: int = MAX_DAYS,
) -> str:
    """The SVG of ``days``: per day, how many turns carried the file and how many opened it."""
    if width < 100 or height < 60 or max_days < 1:
        raise ValueError("the chart needs width >= 100, height >= 60 and max_days >= 1")
    by_day = {d.day: d for d in days}
    span: list[date] = []
    if by_day:
        last = max(by_day)
        first = max(min(by_day), last - timedelta(days=max_days - 1))
        span = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    top = max([max(d.carried, d.opened) for d in by_day.values() if d.day in span] or [0])
    carried_total = sum(by_day[d].carried for d in span if d in by_day)
    opened_total = sum(by_day[d].opened for d in span if d in by_day)
    if span:
        turns = "turn" if carried_total == 1 else "turns"
        summary = (
            f"{carried_total} {turns} carried it and {opened_total} opened it"
            f" from {span[0].isoformat()} to {span[-1].isoformat()}"
        )
    else:
        summary = "no turn carried or opened it"
    label = f"{title}: {summary}" if title else summary
    plot_w = width - _PAD_LEFT - 4
    plot_h = height - _PAD_TOP - _PAD_BOTTOM
    base = _PAD_TOP + plot_h
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="life-chart" role="img"'
        f' width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        f' aria-label="{_x(label)}">',
        f"<title>{_x(label)}</title>",
        f'<text x="{_PAD_LEFT}" y="14" font-size="12">{_x(title)}</text>' if title else "",
        f'<line x1="{_PAD_LEFT}" y1="{base}" x2="{width - 4}" y2="{base}" stroke="#888"/>',
    ]
    if span:
        slot = plot_w / len(span)
        bar = max(slot / 2 - 1, 0.5)
        scale = plot_h / top if top else 0.0
        for index, day in enumerate(span):
            entry = by_day.get(day, LifeDay(day=day, carried=0, opened=0))
            x = _PAD_LEFT + index * slot
            for offset, kind, count, fill in (
                (0.0, "carried", entry.carried, "#9bb7d4"),
                (bar, "opened", entry.opened, "#2b5d8a"),
            ):
                h = count * scale
                tip = f"{day.isoformat()}: {count} {'turns' if count != 1 else 'turn'} {kind} it"
                out.append(
                    f'<rect class="{kind}" x="{x + offset:.2f}" y="{base - h:.2f}"'
                    f' width="{bar:.2f}" height="{h:.2f}" fill="{fill}">'
                    f"<title>{_x(tip)}</title></rect>"
                )
        out.append(
            f'<text x="{_PAD_LEFT}" y="{height - 6}" font-size="10">{span[0].isoformat()}</text>'
        )
        if len(span) > 1:
            out.append(
                f'<text x="{width - 4}" y="{height - 6}" font-size="10" text-anchor="end">'
                f"{span[-1].isoformat()}</text>"
            )
        out.append(
            f'<text x="{_PAD_LEFT - 4}" y="{_PAD_TOP + 8}" font-size="10" text-anchor="end">'
            f"{top}</text>"
        )
    out.append("</svg>")
    return "".join(out)


__all__ = ["HEIGHT", "MAX_DAYS", "WIDTH", "life_chart"]
