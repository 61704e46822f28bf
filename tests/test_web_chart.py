"""The Life chart: a pure function from days to an SVG string, escaped, with no script."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date

import pytest

from memfs.core.story import LifeDay
from memfs.web.chart import life_chart

SVG = "{http://www.w3.org/2000/svg}"


def bars(svg: str, kind: str) -> list[float]:
    root = ET.fromstring(svg)
    return [float(r.attrib["height"]) for r in root.iter(f"{SVG}rect") if r.attrib["class"] == kind]


def test_the_chart_draws_two_bars_per_day_scaled_to_the_busiest_and_fills_quiet_days() -> None:
    days = [
        LifeDay(day=date(2026, 11, 1), carried=4, opened=1),
        LifeDay(day=date(2026, 11, 3), carried=2, opened=2),
    ]
    svg = life_chart(days, title="rules/a.md")
    root = ET.fromstring(svg)  # well-formed XML
    assert root.attrib["role"] == "img"
    assert (
        "6 turns carried it and 3 opened it from 2026-11-01 to 2026-11-03"
        in root.attrib["aria-label"]
    )
    carried, opened = bars(svg, "carried"), bars(svg, "opened")
    assert len(carried) == len(opened) == 3  # 1st, the quiet 2nd, the 3rd
    assert carried[1] == opened[1] == 0
    assert carried[0] == 2 * carried[2] == 4 * opened[0] > 0
    assert "2026-11-02: 0 turns carried it" in svg
    assert "<script" not in svg and "javascript:" not in svg


def test_every_text_in_the_chart_is_escaped() -> None:
    evil = '"><script>alert(1)</script><text x="'
    svg = life_chart([LifeDay(day=date(2026, 1, 1), carried=1, opened=0)], title=evil)
    assert "<script" not in svg
    root = ET.fromstring(svg)
    assert root.attrib["aria-label"].startswith(evil)  # the text survives, as text
    first = root.find(f"{SVG}title")
    assert first is not None and str(first.text).startswith(evil)


def test_the_chart_has_no_inline_style_so_it_passes_the_pages_csp() -> None:
    days = [LifeDay(day=date(2026, 1, d), carried=d, opened=1) for d in range(1, 4)]
    root = ET.fromstring(life_chart(days, title="a.md"))
    assert [el.tag for el in root.iter() if "style" in el.attrib or el.tag == f"{SVG}style"] == []


def test_one_turn_is_told_as_one_turn() -> None:
    svg = life_chart([LifeDay(day=date(2026, 1, 1), carried=1, opened=1)])
    assert ET.fromstring(svg).attrib["aria-label"].startswith("1 turn carried it and 1 opened")


def test_an_empty_life_is_an_empty_chart_that_says_so() -> None:
    svg = life_chart([])
    root = ET.fromstring(svg)
    assert root.attrib["aria-label"] == "no turn carried or opened it"
    assert list(root.iter(f"{SVG}rect")) == []


def test_only_the_last_max_days_are_drawn() -> None:
    days = [LifeDay(day=date(2026, 1, d), carried=d, opened=0) for d in range(1, 31)]
    svg = life_chart(days, max_days=7)
    assert len(bars(svg, "carried")) == 7
    assert "2026-01-24" in svg and "2026-01-23" not in svg


@pytest.mark.parametrize("kw", [{"width": 99}, {"height": 59}, {"max_days": 0}])
def test_a_chart_too_small_to_draw_is_refused(kw: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        life_chart([], **kw)  # type: ignore[arg-type]
