"""Tick labels that read apart, in a real headless Chromium: the error timeline of Errors and reliability and the
Replay page's latency CDFs, at a laptop's 1280 px and a desktop's 1920 px. Every shown label of an axis is
measured, and no two may overlap or touch ("03:0004:00", "0.40.5" read as one label)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page

from tests.processes import ARTIFACTS, chromium
from tests.test_browser import ZONE
from tests.test_browser import console as console  # the live console on the demo, for this module too

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # headless Chromium on a live console

GAP_PX = 2.0  # two labels closer than this read as one
WIDTHS = (1280, 1920)
# The box of every x-axis label Vega shows (it hides the ones it drops for overlap with opacity 0), of the chart
# whose title starts with the argument.
X_LABELS = """(title) => {
  const chart = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].find(c =>
    ((c.querySelector('svg g.role-title text') || {}).textContent || '').startsWith(title));
  if (!chart) return null;
  const texts = chart.querySelectorAll('g.role-axis[aria-label^="X-axis"] g.role-axis-label text');
  return [...texts].filter(t => t.getAttribute('opacity') !== '0').map(t => {
    const b = t.getBoundingClientRect();
    return {text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom};
  });
}"""
CDFS = ("TTFT: share of requests at or below", "TPOT: share of requests at or below",
        "e2e: share of requests at or below")


def crowded(boxes: list[dict[str, float]], gap: float = GAP_PX) -> list[tuple[str, str]]:
    """Pairs of labels whose boxes overlap or come closer than `gap` px side by side."""
    out = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            side = a["left"] < b["right"] + gap and b["left"] < a["right"] + gap
            level = a["top"] < b["bottom"] and b["top"] < a["bottom"]
            if side and level:
                out.append((str(a["text"]), str(b["text"])))
    return out


def test_labels_that_touch_are_crowded_and_labels_apart_are_not() -> None:
    row = {"top": 0.0, "bottom": 15.0}
    touching = [{"text": "95%", "left": 0.0, "right": 20.0, **row},
                {"text": "100%", "left": 20.1, "right": 45.0, **row}]
    assert crowded(touching) == [("95%", "100%")]  # what the reliability axis drew before
    apart = [{"text": "03:00", "left": 0.0, "right": 30.0, **row},
             {"text": "06:00", "left": 40.0, "right": 70.0, **row}]
    assert crowded(apart) == []
    stacked = [{"text": "a", "left": 0.0, "right": 30.0, "top": 0.0, "bottom": 15.0},
               {"text": "b", "left": 0.0, "right": 30.0, "top": 20.0, "bottom": 35.0}]
    assert crowded(stacked) == []  # one above the other: a y axis's labels


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as b:
        yield b


def open_at(browser: object, width: int) -> Page:
    page: Page = browser.new_context(viewport={"width": width, "height": 2400},  # type: ignore[attr-defined]
                                     timezone_id=ZONE).new_page()
    return page


def labels_of(page: Page, title: str) -> list[dict[str, float]]:
    """The shown x labels of the chart of that title, once it is drawn and stays the same."""
    last = None
    for _ in range(200):
        got = page.evaluate(X_LABELS, title)
        if got and got == last:
            return list(got)
        last = got
        page.wait_for_timeout(300)
    raise AssertionError(f"no settled chart titled {title!r}: {last}")


@pytest.mark.parametrize("window", ["24h", "6h", "all"])
@pytest.mark.parametrize("width", WIDTHS)
def test_the_error_timeline_ticks_stand_apart(console: str, browser: object, width: int, window: str) -> None:
    page = open_at(browser, width)
    page.goto(f"{console}/reliability?window={window}")
    page.locator("h1", has_text="Errors and reliability").first.wait_for(timeout=60_000)
    boxes = labels_of(page, "Error events by pool and class")
    page.screenshot(path=str(ARTIFACTS / f"axes-errors-{window}-{width}.png"), full_page=True)
    page.close()
    assert len(boxes) >= 3, boxes  # the axis still says when
    assert all(b["text"][-3] == ":" and len(b["text"]) in (5, 11) for b in boxes), boxes  # "[12-06 ]03:00"
    assert crowded(boxes) == []


@pytest.mark.parametrize("width", WIDTHS)
def test_the_replay_cdf_ticks_stand_apart(console: str, browser: object, width: int) -> None:
    page = open_at(browser, width)
    page.goto(f"{console}/replay")
    page.get_by_role("button", name="Run replay").wait_for(timeout=60_000)
    page.get_by_role("button", name="Run replay").click()
    page.get_by_text("Replayed ").first.wait_for(timeout=180_000)
    for title in CDFS:
        boxes = labels_of(page, title)
        assert len(boxes) >= 2, (title, boxes)
        assert crowded(boxes) == [], (title, width)
        assert all(float(b["right"]) <= width for b in boxes), (title, boxes)  # inside the screen, not cut off
    page.screenshot(path=str(ARTIFACTS / f"axes-replay-{width}.png"), full_page=True)
    page.close()
