"""A real headless Chromium (Debian's, never a downloaded one) opens every page of a running `hetpool console`.

Fails on any Streamlit exception box or "page not found" dialog, on a chart whose plot is squeezed below
MIN_PLOT_PX and on a tile whose value is cut off; saves a screenshot per page at all pools and at one pool
under test-artifacts/ for a person to look at. The browser runs in a zone far from UTC, so a time axis drawn
in the browser's zone instead of UTC shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.processes import ARTIFACTS, chromium, running_console

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # headless Chromium on a live console

VIEWPORT = {"width": 1280, "height": 2400}  # a laptop's width: where eight tiles in a row cut their values
ZONE = "America/New_York"
MIN_PLOT_PX = 60  # the plot of any chart, without its title, axes and legend
PAGES = [  # (url path, title, text that must be on the page once it has run)
    ("", "Fleet health", "Devices reporting"),
    ("reliability", "Errors and reliability", "Nodes to drain"),
    ("versions", "Versions", "Model × pool compatibility"),
    ("onboarding", "Onboarding", "Detail of pool"),
    ("cost", "Cost", "Cost per million tokens"),
    ("replay", "Replay what-if", "Run replay"),
    ("export", "Export", "Rows (raw samples)"),
    ("collectors", "Collectors", "Sources, by their last ingest run"),
    ("fleet", "Fleet registry", "Vendors"),
    ("node", "Node", "Pick a node above"),
    ("device", "Device", "Pick a device above"),
]
ONE_POOL = [  # (screenshot name, page title, its pool, url or None to go there by the sidebar, text on it)
    ("health", "Fleet health", "h100-a", "?pool=h100-a", "Devices reporting"),
    ("reliability", "Errors and reliability", "h100-a", None, "Reliability index"),
    ("cost", "Cost", "h100-a", None, "Cost per million tokens"),
    ("versions", "Versions", "h100-a", None, "Model × pool compatibility"),
    ("collectors", "Collectors", "h100-a", None, "Sources, by their last ingest run"),
    ("onboarding", "Onboarding", "mlu370-a", "onboarding?pool=mlu370-a", "Detail of pool"),
    ("node", "Node", "h100-a", "node?node=h100-a-02&pool=h100-a", "Metrics"),
    ("device", "Device", "mi300x-a", "device?node=mi300x-a-02&pool=mi300x-a&device=0", "Metrics"),
]
# Each chart's plot height (the background of its view) and whether its SVG is drawn; each tile's value text and
# whether it, or an element inside it, is wider than its box (Streamlit cuts it with an ellipsis).
MEASURE = """() => ({
  waiting: document.querySelectorAll('[data-testid="stSkeleton"], [data-stale="true"]').length,
  charts: [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].map(c => {
    const view = c.querySelector('svg g.mark-group.role-frame.root > g > path.background');
    return {drawn: !!view, plot: view ? view.getBBox().height : 0,
            title: (c.querySelector('svg g.role-title text') || {}).textContent || ''};
  }),
  tiles: [...document.querySelectorAll('[data-testid="stMetricValue"]')].map(m => ({
    text: m.innerText, cut: [m, ...m.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1)})),
})"""


@pytest.fixture(scope="module")
def console(demo_db: Path) -> Iterator[str]:
    """`hetpool console` on the demo database (streamlit writes its machine id under $HOME)."""
    with running_console(demo_db, demo_db.parent) as url:
        yield url


@pytest.fixture(scope="module")
def page(console: str) -> Iterator[Page]:
    """One headless Chromium page for the whole module, at a laptop's width, in a zone five hours off UTC."""
    with chromium() as browser:
        yield browser.new_context(viewport=VIEWPORT, timezone_id=ZONE).new_page()


def settled(page: Page, url: str | None, title: str, text: str) -> dict[str, list[dict[str, object]]]:
    """Open url (None: the page of that title, by the sidebar, keeping the session and its filters), wait until
    the page has run and its charts are drawn and stay the same; their measures."""
    if url is None:
        page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    else:
        page.goto(url)
    page.locator("h1", has_text=title).first.wait_for(timeout=60_000)
    page.get_by_text(text).first.wait_for(timeout=60_000)
    last, same = None, 0
    for _ in range(200):
        got = page.evaluate(MEASURE)
        ready = not got["waiting"] and all(c["drawn"] for c in got["charts"]) and page.get_by_text(text).count()
        same = same + 1 if got == last and ready else 0
        if same == 2:  # Streamlit reruns once the URL's filters are read: unchanged for two looks is done
            return got
        last = got
        page.wait_for_timeout(300)
    raise AssertionError(f"{url or title}: the charts did not settle: {last}")


def svg_texts(page: Page, selector: str) -> list[str]:
    """The text of every SVG text element the selector finds (SVG text has no innerText)."""
    return page.evaluate(f"() => [...document.querySelectorAll({selector!r})].map(t => t.textContent)")


def check(page: Page, where: str, got: dict[str, list[dict[str, object]]], shot: Path) -> None:
    """Screenshot, then fail on an exception, a missing page, a squeezed chart or a cut tile."""
    page.screenshot(path=str(shot), full_page=True)
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, f"{where}: {exceptions.first.inner_text()}"
    assert page.get_by_text("Page not found").count() == 0, f"{where} was not found"
    squeezed = [c for c in got["charts"] if float(c["plot"]) < MIN_PLOT_PX]  # type: ignore[arg-type]
    assert not squeezed, f"{where}: charts plotted under {MIN_PLOT_PX} px high: {squeezed}"
    cut = [t["text"] for t in got["tiles"] if t["cut"]]
    assert not cut, f"{where}: tiles cut off: {cut}"
    assert shot.stat().st_size > 10_000


def test_every_page_opens_in_chromium_at_all_pools(console: str, page: Page) -> None:
    for i, (path, title, text) in enumerate(PAGES):
        got = settled(page, f"{console}/{path}" if i == 0 else None, title, text)
        check(page, f"/{path}", got, ARTIFACTS / f"{path or 'health'}-all.png")


def test_pages_with_charts_or_tiles_at_one_pool(console: str, page: Page) -> None:
    for name, title, pool, url, text in ONE_POOL:
        got = settled(page, f"{console}/{url}" if url is not None else None, title, text)
        check(page, f"{name} at {pool}", got, ARTIFACTS / f"{name}-{pool}.png")
        if url is None:
            assert page.url.endswith(f"pool={pool}"), page.url  # the sidebar kept the filter
        if name == "health":
            legends = svg_texts(page, '[data-testid="stVegaLiteChart"] g.role-legend-label')
            assert set(legends) == {pool}  # a one-pool filter: a one-pool legend on every chart


def test_fleet_health_in_the_browser_shows_the_story(console: str, page: Page) -> None:
    got = settled(page, f"{console}/", "Fleet health", "Worst devices")
    assert len(got["tiles"]) == 48                                  # 6 pools x 8 tiles
    assert page.get_by_text("1 / 2").count() == 2                    # h100-a and the onboarding pool
    titles = [c["title"] for c in got["charts"]]
    assert titles == ["utilization", "power per device (W)", "clock (MHz)", "HBM used", "temperature (°C)",
                      "p99 TTFT (s)"]  # two columns
    # the demo's 24 hours end at 08:00 UTC: the last tick of a UTC axis every 3 hours is 06:00 (in New York's
    # zone the axis would end on 03:00 local), and the labels use a 24-hour clock
    texts = svg_texts(page, '[data-testid="stVegaLiteChart"] g.role-axis[aria-label^="X-axis"] g.role-axis-label text')
    texts = texts[:len(texts) // 6]  # the first chart's
    assert texts[-1] == "06:00" and "00:00" in texts, texts
    assert all(len(t) == 5 and t[2] == ":" for t in texts), texts
    # the p99 TTFT chart carries the SLA line of the standard tier, and the fatal error events are marked
    ttft = page.locator('[data-testid="stVegaLiteChart"]').nth(5).locator("svg").text_content() or ""
    assert "SLA standard: p99 2 s" in ttft and "▼ fatal errors" in ttft, ttft[:300]
