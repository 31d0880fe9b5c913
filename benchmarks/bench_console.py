"""Console speed on a week of a 160-device fleet: first render and cached re-render of every page.

Builds (or reuses) a 7-day demo at a 30 s scrape interval with 32 devices per pool through `hetpool demo`,
then renders each page with Streamlit's AppTest: once with every data cache cleared (first render) and once
more (cached re-render), for the default window (last 24 hours) and for the whole week. The baseline, measured
in the same run, is what the rollups save: the Fleet health tile query run on raw samples (the same code,
with the window moved by 1 ms so that no rollup tiles it).

    .venv/bin/python -m benchmarks.bench_console [--db PATH] [--rebuild] [--browser [N]]

Targets: first render < 2 s and re-render < 0.5 s for every page.

With --browser, it times instead what a user waits for: `hetpool console` started afresh on the database (a
cold process: its imports, its connection and every cache empty), then Fleet health opened in headless
Chromium (the Debian package) at /health for the last 24 hours and for the last 7 days, until its tiles and
every chart are drawn and nothing on the page is still running; N runs each (default 3), the console
restarted before each.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks.common import peak_rss_mib, report, timed

MAIN = Path(__file__).resolve().parents[1] / "app" / "console" / "main.py"
PAGES = ("screens/health.py", "screens/reliability.py", "screens/cost.py", "screens/export.py")
WINDOWS = ("Last 24 hours", "Last 7 days")
DEMO = ["--days", "7", "--devices-per-pool", "32", "--interval", "30s", "--seed", "7",
        "--end", "2026-11-27T00:00:00Z"]
FIRST_S, CACHED_S = 2.0, 0.5
CHROMIUM = Path("/usr/bin/chromium")
BROWSER_URLS = (("Last 24 hours", "health?window=24h"), ("Last 7 days", "health?window=7d"))
# done: every tile and chart drawn, no skeleton or stale element, and Streamlit's "running" widget gone
DRAWN = """() => {
  const charts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
  return document.querySelectorAll('[data-testid="stMetricValue"]').length >= 8 && charts.length > 0
    && charts.every(c => c.querySelector('svg g.mark-group.role-frame.root > g > path.background'))
    && !document.querySelector('[data-testid="stSkeleton"], [data-stale="true"], [data-testid="stStatusWidget"]');
}"""


def build(db: Path) -> float:
    """Build the demo; returns seconds."""
    from app.cli import main

    db.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    assert main(["--db", str(db), "demo", "--replace", *DEMO]) == 0
    return time.perf_counter() - start


def sizes(db: Path) -> tuple[int, int, int, float]:
    """Raw samples, 1-minute and 1-hour rollup rows, and the file size in MiB."""
    from store import connect

    con = connect(db, read_only=True)
    try:
        counts = [con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
                  for t in ("samples", "rollup_1m", "rollup_1h")]
    finally:
        con.close()
    mib = sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 2**20
    return counts[0], counts[1], counts[2], mib


def raw_baseline(db: Path, window_h: int) -> float:
    """Seconds to compute the Fleet health tiles from raw samples: the same query, window shifted by 1 ms."""
    from canonical.timeunits import HOUR_MS
    from store import connect
    from store.views.health import pool_tiles
    from store.views.window import Window, data_span

    con = connect(db, read_only=True)
    try:
        span = data_span(con)
        assert span is not None
        end = span[1] - span[1] % HOUR_MS + HOUR_MS
        pools = ["h100-a", "mi300x-a", "ascend-a", "gaudi3-a", "mlu370-a"]
        seconds, _ = timed(lambda: pool_tiles(con, Window(end - window_h * HOUR_MS + 1, end), pools))
        return seconds
    finally:
        con.close()


def render_times(db: Path, page: str, window: str) -> tuple[float, float]:
    """(first render with cold data caches, cached re-render) of one page and window, in seconds."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["HETPOOL_DB"] = str(db)
    at = AppTest.from_file(str(MAIN), default_timeout=300).run()
    at.selectbox(key="window").set_value(window).run()
    at.switch_page(page)
    st.cache_data.clear()
    st.cache_resource.clear()  # a new connection too: DuckDB's buffers start cold
    start = time.perf_counter()
    at.run()
    first = time.perf_counter() - start
    assert not at.exception, at.exception
    start = time.perf_counter()
    at.run()
    cached = time.perf_counter() - start
    return first, cached


def _console(db: Path, port: int, warm: bool = True) -> subprocess.Popen[bytes]:
    """`hetpool console` on the database in its own process group, once its health endpoint answers.

    warm=False is the baseline: `streamlit run` itself, so the first visitor's session imports the layers."""
    from app.commands.console import streamlit_command

    home = db.parent / "console-home"  # streamlit writes its machine id under $HOME
    home.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "app.cli", "--db", str(db), "console", "--port", str(port)] if warm else \
        [sys.executable, "-m", "streamlit", *streamlit_command(port, "127.0.0.1")[2:]]
    proc = subprocess.Popen(cmd, cwd=MAIN.parents[2], env={**os.environ, "HOME": str(home), "HETPOOL_DB": str(db)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc
        except OSError:
            time.sleep(0.2)
    _stop(proc)
    raise SystemExit("the console did not answer its health check in 120 s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def browser_times(db: Path, runs: int) -> None:
    """Fleet health's first render in Chromium on a freshly started console: tiles shown, everything drawn; the
    baseline is the same console started as plain `streamlit run`, measured in the same run, runs interleaved."""
    from playwright.sync_api import sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        try:
            for window, path in BROWSER_URLS:
                times: dict[bool, tuple[list[float], list[float]]] = {False: ([], []), True: ([], [])}
                for _ in range(runs):
                    for warm in (False, True):
                        proc = _console(db, port, warm)
                        try:
                            context = browser.new_context(viewport={"width": 1280, "height": 2400})
                            page = context.new_page()
                            start = time.perf_counter()
                            page.goto(f"http://127.0.0.1:{port}/{path}")
                            page.get_by_text("Devices reporting").first.wait_for(timeout=120_000)
                            times[warm][0].append(time.perf_counter() - start)
                            page.wait_for_function(DRAWN, timeout=120_000, polling=20)
                            times[warm][1].append(time.perf_counter() - start)
                            context.close()
                        finally:
                            _stop(proc)
                (cold_tiles, cold_drawn), (tiles, drawn) = times[False], times[True]
                report(f"browser, {window}: tiles shown, plain streamlit run (best of {runs})",
                       min(cold_tiles) * 1000, "ms")
                report(f"browser, {window}: tiles shown (best of {runs})", min(tiles) * 1000, "ms",
                       min(cold_tiles) * 1000, "plain")
                report(f"browser, {window}: all drawn, plain streamlit run (best of {runs})",
                       min(cold_drawn) * 1000, "ms")
                report(f"browser, {window}: all drawn (best of {runs})", min(drawn) * 1000, "ms",
                       min(cold_drawn) * 1000, "plain")
                print(json.dumps({"window": window, "tiles_s": [round(x, 2) for x in tiles],
                                  "drawn_s": [round(x, 2) for x in drawn],
                                  "plain_tiles_s": [round(x, 2) for x in cold_tiles],
                                  "plain_drawn_s": [round(x, 2) for x in cold_drawn]}), flush=True)
        finally:
            browser.close()


def main() -> None:
    """Build or reuse the week of demo data, then time every page."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default="/tmp/hetpool-console-bench/console.duckdb", type=Path)
    parser.add_argument("--rebuild", action="store_true", help="build the demo even when the file exists")
    parser.add_argument("--browser", type=int, nargs="?", const=3, metavar="N",
                        help="time Fleet health's first render in Chromium on a fresh console, N runs (default 3)")
    args = parser.parse_args()
    if args.rebuild or not args.db.exists():
        report("build: hetpool demo, 7 days x 160 devices", build(args.db), "s")
    if args.browser:
        browser_times(args.db, args.browser)
        return
    raw, minute, hour, mib = sizes(args.db)
    report("raw samples", raw, "rows")
    report("rollup_1m rows", minute, "rows")
    report("rollup_1h rows", hour, "rows")
    report("database size", mib, "MiB")
    worst_first = worst_cached = 0.0
    for window in WINDOWS:
        hours = 24 if window == "Last 24 hours" else 7 * 24
        base = raw_baseline(args.db, hours) * 1000
        report(f"baseline: health tiles from raw, {window}", base, "ms")
        for page in PAGES:
            first, cached = render_times(args.db, page, window)
            name = page.split("/")[1].removesuffix(".py")
            report(f"{name}, {window}: first render", first * 1000, "ms", base, "raw tiles")
            report(f"{name}, {window}: cached re-render", cached * 1000, "ms", base, "raw tiles")
            worst_first, worst_cached = max(worst_first, first), max(worst_cached, cached)
    report("worst first render (target 2000 ms)", worst_first * 1000, "ms")
    report("worst cached re-render (target 500 ms)", worst_cached * 1000, "ms")
    report("peak memory", peak_rss_mib(), "MiB")
    ok = worst_first < FIRST_S and worst_cached < CACHED_S
    print("targets met" if ok else "TARGETS MISSED", flush=True)


if __name__ == "__main__":
    main()
