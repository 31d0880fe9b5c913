"""Two regions, one console: each region's hetpool serves its feed, a third one pulls both back.

East and west (tests/regions.py) each hold their own registry, DuckDB file and raw exporter scrape with a fatal
error, and serve `hetpool serve-feed`'s endpoint on loopback. A third hetpool, whose registry holds both
regions' pools, reads the two feeds back with `--canonical`: once through a real Prometheus scraping both
(`ingest prometheus`), once scraping them itself (`ingest scrape`). Its store must then hold every series of
both regions with the newest value each region holds, and each region's fatal error events with their class,
severity, code and count; its console's Fleet health and Errors and reliability pages must show them.
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.console.tables import plain
from canonical.metrics import ERRORS_METRIC
from store import ENV_DB
from tests.cli import run
from tests.conftest import REPO
from tests.promserver import PrometheusServer
from tests.regions import (
    AT_MS,
    EAST_NODE,
    MIB,
    WEST_NODE,
    Region,
    events,
    fleet_file,
    hetpool,
    iso,
    latest,
    query,
    start_region,
    versions,
)

pytestmark = [pytest.mark.slow]

MAIN = str(REPO / "app" / "console" / "main.py")
EAST, WEST = "east-h100-a", "west-mi300x-a"
# The fatal events each region holds after its ingest: east's XID 79 on GPU 0 (one event), west's two
# uncorrectable ECC errors on GPU 0 (one reading of a counter at 2, two events)
FATAL = {(EAST, EAST_NODE, "0", "device_lost", "fatal", "79"): (1, 1.0),
         (WEST, WEST_NODE, "0", "memory_uncorrectable", "fatal", "ecc_uncorrect"): (1, 2.0)}
# What each feed serves: east 12 gauges (utilization, memory used and total, power, temperature and clock of two
# GPUs), one error total and one version; west 10 gauges (no clock), one error total and one version
GAUGES = {"east": 12, "west": 10}
STEPS = 10  # the Prometheus pull: ten steps of one second


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Region]]:
    work = tmp_path_factory.mktemp("regions")
    started: dict[str, Region] = {}
    try:
        for name in ("east", "west"):
            started[name] = start_region(work, name)
        yield started
    finally:
        for region in started.values():
            region.feed.stop()


def console_db(tmp_path: Path) -> Path:
    """The third hetpool's store: a registry holding both regions' pools, no samples yet."""
    db = tmp_path / "console.duckdb"
    assert hetpool("--db", str(db), "registry", "load", str(fleet_file(tmp_path, ("east", "west")))) == 0
    return db


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """One hetpool command with --json, its exit code checked, its output parsed."""
    capsys.readouterr()
    code, out, err = run(capsys, *args)
    assert code == 0, err
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_each_region_holds_its_own_fatal_error(regions: dict[str, Region]) -> None:
    """The starting point, by hand: the raw scrapes' values in canonical units, one fatal error per region."""
    east, west = latest(regions["east"].db), latest(regions["west"].db)
    assert east[(EAST, EAST_NODE, "0", "accelerator.power", "{}")] == 612.4
    assert east[(EAST, EAST_NODE, "0", "accelerator.memory.used", "{}")] == 71_234 * MIB
    assert east[(EAST, EAST_NODE, "1", "accelerator.utilization", "{}")] == 0.91
    assert west[(WEST, WEST_NODE, "0", "accelerator.memory.used", "{}")] == 150_000 * MIB
    assert west[(WEST, WEST_NODE, "1", "accelerator.power", "{}")] == 640.0
    assert (len(east), len(west)) == (GAUGES["east"], GAUGES["west"])
    assert {**events(regions["east"].db), **events(regions["west"].db)} == FATAL


def both(regions: dict[str, Region]) -> dict[Any, float]:
    """The newest values of both regions' stores together (their pools are disjoint)."""
    east, west = latest(regions["east"].db), latest(regions["west"].db)
    assert not set(east) & set(west)
    return {**east, **west}


def assert_same_as_the_regions(db: Path, regions: dict[str, Region]) -> None:
    """The third store: every series of both regions with the same newest value, the same fatal events and
    versions, and nothing else."""
    assert latest(db) == both(regions)
    assert events(db) == FATAL
    assert versions(db) == versions(regions["east"].db) | versions(regions["west"].db) == {
        (EAST, EAST_NODE, "", "driver", "550.144.03"), (WEST, WEST_NODE, "", "driver", "6.10.5")}


def assert_console_shows_both(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fleet health has both regions' pools with their devices and fatal errors; the Errors page lists both."""
    monkeypatch.setenv(ENV_DB, str(db))
    health = AppTest.from_file(MAIN, default_timeout=60).run().switch_page("screens/health.py").run()
    assert not health.exception and not health.error, (health.exception, health.error)
    tiles = [m.value for m in health.metric]
    # by hand from the regions' scrapes. East's two H100s: 87 and 91 % busy; HBM (71,234 + 69,880) MiB used of
    # 2 x 81,336 MiB (used + free + reserved) = 86.7 %; 612.4 + 598.1 W; 71 and 74 degrees C; one fatal event.
    # West's two MI300Xs: 55 and 60 %; (150,000 + 120,000) of 2 x 196,592 MiB = 68.7 %; 650 + 640 W; 70 and 68
    # degrees C; two fatal events. No serving engine (no TTFT), no throttling; the other pools report nothing.
    silent = ["–"] * 7
    assert tiles == ["2 / 64", "89.0%", "86.7%", "1.2 kW", "74 °C", "0.0%", "1", "–", "0 / 64", *silent,
                     "2 / 32", "57.5%", "68.7%", "1.3 kW", "70 °C", "0.0%", "2", "–", "0 / 32", *silent], tiles
    text = "\n".join(str(e.value) for e in health.markdown)
    assert "**east-h100-a** · NVIDIA H100 SXM5 80GB" in text and "**west-mi300x-a** · AMD Instinct MI300X" in text
    assert "device 0: 1 fatal error event (codes 79)" in text, text
    assert "device 0: 2 fatal error events (codes ecc\\_uncorrect)" in text, text
    errors = AppTest.from_file(MAIN, default_timeout=60).run().switch_page("screens/reliability.py").run()
    assert not errors.exception and not errors.error, (errors.exception, errors.error)
    drain, by_vendor, found = (d.value for d in errors.dataframe)
    # each region's failing node is to be drained, and each pool has one healthy device of the two that report, of
    # the 64 and 32 its registry declares: the others never reported, so R is 1/64 and 1/32
    assert sorted(zip(drain["pool"], drain["codes"], drain["fatal_events"], strict=True)) == [
        (EAST, "79", 1.0), (WEST, "ecc_uncorrect", 2.0)]
    rel = errors.table[0].value.map(plain)
    assert sorted(zip(rel["pool"], rel["R"], rel["devices"], rel["silent (never reported)"], strict=True)) == [
        (EAST, "1.6%", "64", "62"), (WEST, "3.1%", "32", "30")]
    assert sorted(zip(by_vendor["vendor"], by_vendor["error_class"], by_vendor["events"], strict=True)) == [
        ("amd", "memory_uncorrectable", 2.0), ("nvidia", "device_lost", 1.0)]
    columns = ("pool", "vendor", "code", "error_class", "severity", "count")
    assert sorted(zip(*(found[c] for c in columns), strict=True)) == [
        (EAST, "nvidia", "79", "device_lost", "fatal", 1.0),
        (WEST, "amd", "ecc_uncorrect", "memory_uncorrectable", "fatal", 2.0)]


@pytest.mark.prometheus
def test_a_prometheus_between_brings_both_regions_back(regions: dict[str, Region], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    east, west = regions["east"], regions["west"]
    # honor_labels: true, so the labels the feed serves are the labels stored. Without it a target label of the
    # same name wins and the feed's is renamed exported_<name>: a `node` label that service discovery puts on
    # every target (Kubernetes does) would place every series of a region on the Prometheus' view of the host,
    # and a `job` or `instance` attribute would be stored as exported_job/exported_instance.
    prom = PrometheusServer(tmp_path, None, targets=(east.host_port, west.host_port), interval="1s",
                            honor_labels=True).start()
    try:
        served = sum(GAUGES.values()) + 2 + 2  # every gauge, an error total and a version per region
        names = '{__name__=~"accelerator_.*|hetpool_software_version_info"}'
        url = f"{prom.url}/api/v1/query?{urllib.parse.urlencode({'query': f'count({names})'})}"
        deadline, count = time.monotonic() + 60, 0
        while count < served and time.monotonic() < deadline:
            time.sleep(0.5)
            with urllib.request.urlopen(url, timeout=5) as r:
                result = json.load(r)["data"]["result"]
            count = int(result[0]["value"][1]) if result else 0
        assert count == served
        # every step after now finds every series (within the 5-minute lookback): the window is exact
        start = math.ceil(time.time())
        end = start + STEPS
        while time.time() < end + 1:
            time.sleep(0.2)
        db = console_db(tmp_path)
        args = ("--db", str(db), "--json", "ingest", "prometheus", "--url", prom.url, "--canonical", "--step", "1s",
                "--start", iso(start), "--end", iso(end))
        first = run_json(capsys, *args)
        again = run_json(capsys, *args)
    finally:
        prom.stop()
    # per step, every series of both feeds is read once: the gauges stored, the versions recorded (their
    # samples ignored), each error total stored as its events at the first step and folded as a repeat after
    gauges, totals = sum(GAUGES.values()), len(FATAL)
    assert {k: first[k] for k in ("read", "stored", "rejected", "duplicates", "ignored", "missing")} == {
        "read": STEPS * (gauges + totals + 2), "stored": STEPS * gauges + totals, "rejected": 0,
        "duplicates": STEPS * totals - totals, "ignored": STEPS * 2, "missing": []}
    assert first["read"] == first["stored"] + first["rejected"] + first["duplicates"] + first["ignored"]
    # the second pull resumes at the watermark, the end of the window: nothing read, nothing stored
    assert (again["read"], again["stored"]) == (0, 0)
    assert_same_as_the_regions(db, regions)
    assert_console_shows_both(db, monkeypatch)


def test_scraping_both_feeds_directly_brings_both_regions_back(regions: dict[str, Region], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    db = console_db(tmp_path)
    scrape = ("--db", str(db), "--json", "ingest", "scrape", "--canonical")
    # ?timestamps=1: each sample as of when its region took it, as a hetpool reading a feed directly asks
    feeds = {name: f"{region.feed.url}/metrics?timestamps=1" for name, region in regions.items()}
    runs = {name: run_json(capsys, *scrape, url) for name, url in feeds.items()}
    again = {name: run_json(capsys, *scrape, url) for name, url in feeds.items()}
    counts = ("read", "stored", "rejected", "duplicates", "ignored")
    # one scrape of each feed reads every series it serves once: its gauges and error total stored (the total
    # as its events), its version and the feed's own two gauges counted as ignored
    for name in regions:
        assert {k: runs[name][k] for k in counts} == {"read": GAUGES[name] + 1 + 3, "stored": GAUGES[name] + 1,
                                                      "rejected": 0, "duplicates": 0, "ignored": 3}, runs[name]
    assert_same_as_the_regions(db, regions)
    # a second scrape of the unchanged feeds: every sample is one already stored, at its region's time, so nothing
    # is stored twice; the versions are seen again
    for name in regions:
        assert {k: again[name][k] for k in counts} == {"read": GAUGES[name] + 1 + 3, "stored": 0, "rejected": 0,
                                                       "duplicates": GAUGES[name] + 1, "ignored": 3}, again[name]
    per_series = query(db, "SELECT count(*), min(ts) FROM samples WHERE metric <> ? GROUP BY pool, node, device, "
                           "metric, attributes", [ERRORS_METRIC])
    assert len(per_series) == sum(GAUGES.values()) and set(per_series) == {(1, AT_MS)}
    assert_same_as_the_regions(db, regions)
    assert_console_shows_both(db, monkeypatch)
