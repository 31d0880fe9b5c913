"""`hetpool serve-feed` as a scraper sees it: exact values and labels, the bearer token, a real Prometheus."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.core import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from store import connect
from store.feed import FeedRead
from tests.conftest import REPO
from tests.promserver import PrometheusServer

T = 1_796_000_000_000  # newest sample in the store, epoch ms
MIN = 60_000
ROWS = [  # ts, pool, node, device, metric, value, attributes
    (T - 9 * MIN, "h100-a", "h100-a-01", "nvidia0", "accelerator.utilization", 0.25, "{}"),
    (T, "h100-a", "h100-a-01", "nvidia0", "accelerator.utilization", 0.75, "{}"),
    (T - MIN, "h100-a", "h100-a-01", "nvidia1", "accelerator.utilization", 0.5, "{}"),
    (T - 10 * MIN, "mi300x-a", "mi300x-a-01", "gpu0", "accelerator.utilization", 0.9, "{}"),  # stale: left out
    (T - 2 * MIN, "mi300x-a", "mi300x-a-01", "gpu0", "accelerator.memory.used", 1.5e9, '{"pool_kind": "hbm"}'),
    (T, "h100-a", "h100-a-01", "", "serving.requests", 42.0, '{"code": "200", "engine": "vllm"}'),
    (T, "lab-x", "box", "d0", "accelerator.power", 300.0, "{}"),  # a pool the registry does not know
    (T, "h100-a", "h100-a-01", "", "serving.time_to_first_token", 3.5, '{"stat": "sum"}'),  # a histogram's sum
]
TOKEN = "s3cret-feed-token-0123456789"


@pytest.fixture
def feed_db(fleet_db: Path) -> Path:
    con = connect(fleet_db)
    con.executemany("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", ROWS)
    con.close()
    return fleet_db


class Feed:
    """A `hetpool serve-feed` process on a free loopback port."""

    def __init__(self, db: Path, token: str | None = None):
        env = {k: v for k, v in os.environ.items() if k != "HETPOOL_FEED_TOKEN"}
        if token is not None:
            env["HETPOOL_FEED_TOKEN"] = token
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(db), "serve-feed", "--port", "0"],
                                     cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        first = self.proc.stderr.readline()
        assert " on http://127.0.0.1:" in first, first
        self.first = first
        self.url = first.split(" on ", 1)[1].split()[0].removesuffix(";")
        self.host_port = self.url.removeprefix("http://").removesuffix("/metrics")

    def get(self, headers: dict[str, str] | None = None) -> tuple[int, str]:
        req = urllib.request.Request(self.url, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit code and everything else the server wrote on stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=20)
        return self.proc.returncode, self.first + err


@pytest.fixture
def feed(feed_db: Path) -> Iterator[Feed]:
    f = Feed(feed_db)
    yield f
    f.stop()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


def test_latest_values_with_names_units_and_labels(feed: Feed) -> None:
    code, text = feed.get()
    assert code == 200
    assert samples(text) == {
        key("accelerator_utilization_ratio", pool="h100-a", node="h100-a-01", device="nvidia0", vendor="nvidia"): 0.75,
        key("accelerator_utilization_ratio", pool="h100-a", node="h100-a-01", device="nvidia1", vendor="nvidia"): 0.5,
        key("accelerator_memory_used_bytes", pool="mi300x-a", node="mi300x-a-01", device="gpu0", vendor="amd",
            pool_kind="hbm"): 1.5e9,
        key("serving_requests_total", pool="h100-a", node="h100-a-01", device="", vendor="nvidia", code="200",
            engine="vllm"): 42.0,
        key("accelerator_power_watts", pool="lab-x", node="box", device="d0", vendor=""): 300.0,
        key("serving_time_to_first_token_seconds_sum", pool="h100-a", node="h100-a-01", device="", vendor="nvidia"):
            3.5,
        key("hetpool_feed_series"): 6.0, key("hetpool_feed_series_dropped"): 0.0,  # the feed's own two gauges
    }
    assert "# TYPE serving_requests_total counter" in text and "# TYPE accelerator_power_watts gauge" in text


def test_openmetrics_when_asked(feed: Feed) -> None:
    code, text = feed.get({"Accept": "application/openmetrics-text; version=1.0.0"})
    assert code == 200 and text.endswith("# EOF\n")
    assert 'accelerator_utilization_ratio{device="nvidia0",node="h100-a-01",pool="h100-a",vendor="nvidia"} 0.75' \
        in text


def test_a_wider_window_brings_back_a_stale_series(feed_db: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "app.cli", "--db", str(feed_db), "serve-feed", "--window", "bogus"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    from app.serve.feed import FeedCollector, store_reader
    from store import Store
    read = store_reader(Store(feed_db), 15 * MIN)(None)
    got = {(r.node, r.metric, r.value) for r in read.rows}
    assert ("mi300x-a-01", "accelerator.utilization", 0.9) in got and read.total == len(read.rows) == 7
    assert len(list(FeedCollector(read).collect())) == 5 + 2  # and the feed's own two gauges


def test_bearer_token(feed_db: Path) -> None:
    f = Feed(feed_db, TOKEN)
    try:
        assert f.get()[0] == 401
        assert f.get({"Authorization": "Bearer wrong-token"})[0] == 401
        assert f.get({"Authorization": f"Basic {TOKEN}"})[0] == 401
        assert f.get({"Authorization": f"Bearer {TOKEN}x"})[0] == 401
        code, text = f.get({"Authorization": f"Bearer {TOKEN}"})
        assert code == 200 and "accelerator_utilization_ratio" in text
    finally:
        code, err = f.stop()
    assert code == 0
    assert "stopping" in err and "HETPOOL_FEED_TOKEN" in err
    assert TOKEN not in err and "wrong-token" not in err


def test_taken_port_and_missing_database_are_one_line_exit_2(feed: Feed, feed_db: Path, tmp_path: Path) -> None:
    port = feed.host_port.rsplit(":", 1)[1]
    for db, port_arg in ((str(feed_db), port), (str(tmp_path / "none.duckdb"), "0")):
        proc = subprocess.run([sys.executable, "-m", "app.cli", "--db", db, "serve-feed", "--port", port_arg],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("hetpool: error: ")


@pytest.mark.prometheus
def test_prometheus_scrapes_the_stored_values(feed: Feed, tmp_path: Path) -> None:
    prom = PrometheusServer(tmp_path, None, targets=(feed.host_port,), interval="1s").start()
    try:
        query = 'accelerator_utilization_ratio{node="h100-a-01",device="nvidia0"}'
        url = f"{prom.url}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
        deadline = time.monotonic() + 60
        result: list[dict[str, object]] = []
        while time.monotonic() < deadline and not result:
            with urllib.request.urlopen(url, timeout=5) as r:
                result = json.load(r)["data"]["result"]
            time.sleep(0.5)
        assert len(result) == 1, result
        assert result[0]["value"][1] == "0.75"  # type: ignore[index]
        assert result[0]["metric"]["vendor"] == "nvidia" and result[0]["metric"]["pool"] == "h100-a"  # type: ignore[index]
    finally:
        prom.stop()


# -- what one bad source or a crowd of clients can cost the feed ----------------------------------------------

def many_series(db: Path, n: int) -> None:
    con = connect(db)
    con.executemany("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) VALUES (?, ?, ?, ?, ?, "
                    "?, ?)", [(T, "h100-a", f"h100-a-{i:05d}", "0", "accelerator.power", float(i), "{}")
                              for i in range(n)])
    con.close()


def scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return str(r.read().decode())


def test_the_series_served_are_capped_and_the_dropped_ones_counted(feed_db: Path) -> None:
    from app.serve.feed import FeedServer, store_reader
    from store import Store
    many_series(feed_db, 200)
    server = FeedServer("127.0.0.1", 0, store_reader(Store(feed_db)), max_series=50).start()
    try:
        got = samples(scrape(server.url))
    finally:
        server.stop()
    assert got[key("hetpool_feed_series")] == 50
    assert got[key("hetpool_feed_series_dropped")] == 206 - 50  # 200 planted and the 6 fresh series of the fixture
    assert len([k for k in got if not k[0].startswith("hetpool_feed")]) == 50


def test_scrapes_close_together_share_one_read() -> None:
    import threading

    from app.serve.feed import Snapshot
    now = [0.0]
    calls = []

    def read(limit: int | None) -> FeedRead:
        calls.append(limit)
        time.sleep(0.2)  # a slow store: the other scrapes wait for this read rather than start their own
        return FeedRead([], [], 0)

    snap = Snapshot(read, max_series=7, refresh_s=5.0, clock=lambda: now[0])
    threads = [threading.Thread(target=snap.body, args=("",)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert calls == [7]
    snap.body("application/openmetrics-text; version=1.0.0")  # another format renders the same read
    assert calls == [7]
    now[0] = 5.0
    snap.body("")
    assert calls == [7, 7]


def test_slow_and_surplus_clients_are_dropped(feed_db: Path) -> None:
    import socket

    from app.serve.feed import FeedServer, store_reader
    from store import Store
    server = FeedServer("127.0.0.1", 0, store_reader(Store(feed_db)), timeout_s=1.0, max_connections=3).start()
    host, port = server.httpd.server_address[:2]
    idle = []
    try:
        for _ in range(4):  # more clients than workers send half a request and stall: they hold no worker
            s = socket.create_connection((str(host), int(port)), timeout=10)
            s.sendall(b"GET /metr")
            idle.append(s)
        time.sleep(0.2)
        assert "hetpool_feed_series" in scrape(server.url)  # so a whole request is served meanwhile
        for s in idle:  # the stalled ones are closed after the timeout
            started = time.monotonic()
            data = s.recv(1024)  # the server's close (or its 408 answer, then the close)
            assert data == b"" or (data.startswith(b"HTTP/1.") and s.recv(1024) == b"")
            assert time.monotonic() - started < 5.0
        assert "hetpool_feed_series" in scrape(server.url)  # and the feed serves again
    finally:
        for s in idle:
            s.close()
        server.stop()


# -- error events, histograms and versions ---------------------------------------------------------------------

H = 3_600_000
XID79 = '{"code":"79","error_class":"device_lost","severity":"fatal"}'
XID79_MIG = '{"code":"79","error_class":"device_lost","mig_instance":"2","severity":"fatal"}'
DBE = '{"code":"ecc_dbe_volatile","error_class":"memory_uncorrectable","severity":"fatal"}'
EVENTS = [  # ts, pool, node, device, metric, value (events at that instant), attributes: as the normalizer stores them
    (T - 48 * H, "h100-a", "h100-a-01", "nvidia0", "accelerator.errors", 1.0, XID79),  # long before the window
    (T - 30 * MIN, "h100-a", "h100-a-01", "nvidia0", "accelerator.errors", 1.0, XID79),
    (T - MIN, "h100-a", "h100-a-01", "nvidia0", "accelerator.errors", 1.0, XID79),
    (T - H, "h100-a", "h100-a-01", "nvidia0", "accelerator.errors", 5.0, DBE),           # a counter rose by 5
    (T, "h100-a", "h100-a-01", "nvidia0", "accelerator.errors", 2.0, DBE),               # ... then by 2
    (T - 2 * H, "h100-a", "h100-a-01", "nvidia1", "accelerator.errors", 1.0, XID79_MIG),
]
HIST = [  # the buckets, sum and count of one histogram series at two scrapes, and one stale series
    *((ts, "h100-a", "h100-a-01", "", "serving.time_to_first_token", v,
       f'{{"engine":"vllm","le":"{le}","stat":"bucket"}}')
      for ts, le, v in ((T - MIN, "0.1", 1.0), (T, "0.1", 4.0), (T, "0.5", 7.0), (T, "+Inf", 9.0))),
    (T, "h100-a", "h100-a-01", "", "serving.time_to_first_token", 3.25, '{"engine":"vllm","stat":"sum"}'),
    (T, "h100-a", "h100-a-01", "", "serving.time_to_first_token", 9.0, '{"engine":"vllm","stat":"count"}'),
    (T - 20 * MIN, "h100-a", "h100-a-02", "", "serving.time_to_first_token", 1.0, '{"engine":"vllm","stat":"count"}'),
    (T, "h100-a", "h100-a-01", "nvidia0", "accelerator.power", 300.0, "{}"),
]
VERSIONS = [  # pool, node, device, component, version, first_seen, last_seen
    ("h100-a", "h100-a-01", "", "driver", "535.129.03", T - 48 * H, T - H),  # upgraded an hour ago: not served
    ("h100-a", "h100-a-01", "", "driver", "550.144.03", T - H, T),
    ("h100-a", "h100-a-01", "nvidia0", "vbios", "96.00.74.00.01", T - 48 * H, T - 4 * MIN),
    ("mi300x-a", "mi300x-a-01", "", "driver", "6.12.12", T - H, T - 6 * MIN),  # last seen before the window
]


@pytest.fixture
def events_db(fleet_db: Path) -> Path:
    con = connect(fleet_db)
    con.executemany("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", EVENTS + HIST)
    con.executemany("INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?, ?)", VERSIONS)
    con.close()
    return fleet_db


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def served_families(db: Path, max_series: int = 1000) -> tuple[dict[str, str], Samples]:
    """One scrape of a feed server on loopback over the store: family types and samples."""
    from app.serve.feed import FeedServer, store_reader
    from store import Store
    server = FeedServer("127.0.0.1", 0, store_reader(Store(db)), refresh_s=0.0, max_series=max_series).start()
    try:
        text = scrape(server.url)
    finally:
        server.stop()
    return {f.name: f.type for f in text_string_to_metric_families(text)}, samples(text)


NV = {"pool": "h100-a", "node": "h100-a-01", "vendor": "nvidia"}


def test_error_events_histograms_and_versions_are_served(events_db: Path) -> None:
    types, got = served_families(events_db)
    fatal = {"error_class": "device_lost", "severity": "fatal", "code": "79"}
    assert got == {
        # every stored event counts, however old: 1 + 1 + 1, 5 + 2, and one on a MIG instance
        key("accelerator_errors_total", **NV, device="nvidia0", **fatal): 3.0,
        key("accelerator_errors_total", **NV, device="nvidia0", error_class="memory_uncorrectable", severity="fatal",
            code="ecc_dbe_volatile"): 7.0,
        key("accelerator_errors_total", **NV, device="nvidia1", mig_instance="2", **fatal): 1.0,
        # the newest value of each part; the series of h100-a-02 is stale
        key("serving_time_to_first_token_seconds_bucket", **NV, device="", engine="vllm", le="0.1"): 4.0,
        key("serving_time_to_first_token_seconds_bucket", **NV, device="", engine="vllm", le="0.5"): 7.0,
        key("serving_time_to_first_token_seconds_bucket", **NV, device="", engine="vllm", le="+Inf"): 9.0,
        key("serving_time_to_first_token_seconds_sum", **NV, device="", engine="vllm"): 3.25,
        key("serving_time_to_first_token_seconds_count", **NV, device="", engine="vllm"): 9.0,
        key("accelerator_power_watts", **NV, device="nvidia0"): 300.0,
        # the versions last seen within 5 minutes of the newest sample
        key("hetpool_software_version_info", **NV, device="", component="driver", version="550.144.03"): 1.0,
        key("hetpool_software_version_info", **NV, device="nvidia0", component="vbios", version="96.00.74.00.01"): 1.0,
        key("hetpool_feed_series"): 11.0, key("hetpool_feed_series_dropped"): 0.0,
    }
    assert types["accelerator_errors"] == "counter" and types["serving_time_to_first_token_seconds"] == "histogram"
    assert types["hetpool_software_version_info"] == "gauge"  # the 0.0.4 text format has no info type


def test_the_error_total_grows_with_new_events_and_openmetrics_types(events_db: Path) -> None:
    con = connect(events_db)
    con.execute("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [T + MIN, "h100-a", "h100-a-01", "nvidia0", "accelerator.errors", 4.0, DBE])
    con.close()
    _, got = served_families(events_db)
    assert got[key("accelerator_errors_total", **NV, device="nvidia0", error_class="memory_uncorrectable",
                   severity="fatal", code="ecc_dbe_volatile")] == 11.0
    from app.serve.feed import FeedCollector, store_reader
    from store import Store
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FeedCollector(store_reader(Store(events_db))(None)))
    text = openmetrics_latest(registry).decode()
    assert "# TYPE accelerator_errors counter\n" in text and "# TYPE hetpool_software_version info\n" in text
    assert "# TYPE serving_time_to_first_token_seconds histogram\n" in text
    families = {f.name: f for f in openmetrics_families(text)}
    assert {s.labels["le"]: s.value for s in families["serving_time_to_first_token_seconds"].samples
            if s.name.endswith("_bucket")} == {"0.1": 4.0, "0.5": 7.0, "+Inf": 9.0}


def test_the_cap_counts_versions_and_error_totals(events_db: Path) -> None:
    _, got = served_families(events_db, max_series=4)
    # in metric order the three error totals come first, then the power; the versions are dropped
    assert got[key("hetpool_feed_series")] == 4 and got[key("hetpool_feed_series_dropped")] == 11 - 4
    assert sorted(k[0] for k in got if not k[0].startswith("hetpool_feed")) == [
        "accelerator_errors_total"] * 3 + ["accelerator_power_watts"]


@pytest.mark.slow  # a real Prometheus scraping for a few seconds
@pytest.mark.prometheus
def test_prometheus_takes_the_error_totals_histograms_and_versions(events_db: Path, tmp_path: Path) -> None:
    """A real Prometheus scrapes the feed as OpenMetrics (its first choice) and keeps every new family."""
    f = Feed(events_db)
    prom = PrometheusServer(tmp_path, None, targets=(f.host_port,), interval="1s").start()
    try:
        query = ('{__name__=~"accelerator_errors_total|hetpool_software_version_info|'
                 'serving_time_to_first_token_seconds_(bucket|sum|count)"}')
        url = f"{prom.url}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
        deadline = time.monotonic() + 60
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline and len(result) < 10:
            with urllib.request.urlopen(url, timeout=5) as r:
                result = json.load(r)["data"]["result"]
            time.sleep(0.5)
    finally:
        prom.stop()
        f.stop()
    got = {(m["metric"]["__name__"], m["metric"].get("device", ""),
            m["metric"].get("code") or m["metric"].get("le") or m["metric"].get("version")): float(m["value"][1])
           for m in result}
    bucket, errors = "serving_time_to_first_token_seconds_bucket", "accelerator_errors_total"
    assert got == {(errors, "nvidia0", "79"): 3.0, (errors, "nvidia1", "79"): 1.0,
                   (errors, "nvidia0", "ecc_dbe_volatile"): 7.0,
                   (bucket, "", "0.1"): 4.0, (bucket, "", "0.5"): 7.0, (bucket, "", "+Inf"): 9.0,
                   ("serving_time_to_first_token_seconds_sum", "", None): 3.25,
                   ("serving_time_to_first_token_seconds_count", "", None): 9.0,
                   ("hetpool_software_version_info", "", "550.144.03"): 1.0,
                   ("hetpool_software_version_info", "nvidia0", "96.00.74.00.01"): 1.0}, result


def timed(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float | None]:
    """One scrape of exactly `url`: each sample's timestamp in epoch ms (None without one)."""
    with urllib.request.urlopen(url, timeout=30) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): (None if s.timestamp is None else round(s.timestamp * 1000))
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_timestamps_on_request_are_when_each_sample_was_taken(events_db: Path) -> None:
    from app.serve.feed import FeedServer, store_reader
    from store import Store
    server = FeedServer("127.0.0.1", 0, store_reader(Store(events_db)), refresh_s=60.0).start()
    try:
        plain, stamped = timed(server.url + "/metrics"), timed(server.url + "/metrics?timestamps=1")
        assert timed(server.url + "/metrics?timestamps=0") == plain  # one read, rendered both ways
        assert server.snapshot.reads == 1
    finally:
        server.stop()
    assert set(plain) == set(stamped) and set(plain.values()) == {None}
    dbe = key("accelerator_errors_total", **NV, device="nvidia0", error_class="memory_uncorrectable",
              severity="fatal", code="ecc_dbe_volatile")
    assert stamped[key("accelerator_power_watts", **NV, device="nvidia0")] == T
    # a part's own newest time; a running total and a version are as of the newest sample of all (T), not of
    # their last event (T - 2 h for the MIG instance's) or last sighting (T - 4 min)
    assert stamped[key("serving_time_to_first_token_seconds_bucket", **NV, device="", engine="vllm",
                       le="0.1")] == T
    assert stamped[dbe] == T
    assert stamped[key("accelerator_errors_total", **NV, device="nvidia1", mig_instance="2",
                       error_class="device_lost", severity="fatal", code="79")] == T
    assert stamped[key("hetpool_software_version_info", **NV, device="nvidia0", component="vbios",
                       version="96.00.74.00.01")] == T
