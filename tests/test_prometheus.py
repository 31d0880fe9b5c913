"""Pulls from a real Prometheus holding 24 h of backfilled history: exact, incremental, and fault-tolerant."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import duckdb
import polars as pl
import pytest

from collectors.prometheus import PullOptions, follow, pull
from collectors.promhttp import ChunkFailed, PromClient, RetryPolicy
from pool_registry import load_registry
from store import Held, connect, save_registry
from tests.conftest import FLEET
from tests.promserver import STEP_S, T0_S, FixtureFleet, PrometheusServer, Series
from tests.proxies import AuthProxy, FaultProxy, TlsProxy, self_signed

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]  # a real Prometheus per test, pulls of hours of data

HOUR_MS = 3_600_000
START = T0_S * 1000 - 1  # exclusive: the first sample is at T0
FLEET_HISTORY = FixtureFleet(hours=24)
END = FLEET_HISTORY.end_s * 1000
MIB = 2**20
FAST = RetryPolicy(attempts=3, backoff_s=0.01, timeout_s=1.0)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), FLEET_HISTORY).start()
    yield server
    server.stop()


def fresh_db(path: Path) -> duckdb.DuckDBPyConnection:
    con = connect(path)
    save_registry(con, load_registry(FLEET), str(FLEET))
    return con


def digest(con: duckdb.DuckDBPyConnection) -> tuple[int, str]:
    """Row count and a hash of every stored row in a fixed order."""
    rows = con.execute("SELECT ts, pool, node, device, metric, value, attributes FROM samples "
                       "ORDER BY ALL").fetchall()
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.fixture(scope="module")
def clean(prom: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    """The digest of one uninterrupted pull of the whole history."""
    con = fresh_db(tmp_path_factory.mktemp("clean") / "clean.duckdb")
    report = pull(Held(con), PromClient(prom.url), PullOptions(url=prom.url, start_ms=START, end_ms=END))
    assert report.missing == []
    result = digest(con)
    con.close()
    return result


def full(url: str, **kw: object) -> PullOptions:
    """The whole history, unless kw narrows it."""
    return replace(PullOptions(url=url, start_ms=START, end_ms=END), **kw)


def series(family: str, **labels: str) -> Series:
    return next(s for s in FLEET_HISTORY.series if s.family == family
                and all(s.labels.get(k) == v for k, v in labels.items()))


def value_at(con: duckdb.DuckDBPyConnection, metric: str, node: str, device: str, k: int,
             attributes: str = "{}") -> float:
    rows = con.execute("SELECT value FROM samples WHERE metric = ? AND node = ? AND device = ? AND ts = ? "
                       "AND attributes = ?", [metric, node, device, (T0_S + k * STEP_S) * 1000, attributes]).fetchall()
    assert len(rows) == 1, (metric, node, device, k, rows)
    return float(rows[0][0])


def test_pull_stores_what_was_loaded(prom: PrometheusServer, tmp_path: Path) -> None:
    con = fresh_db(tmp_path / "a.duckdb")
    report = pull(Held(con), PromClient(prom.url), full(prom.url))
    loaded = len(FLEET_HISTORY.series) * FLEET_HISTORY.steps  # 38 series x 5760 steps
    assert report.totals() == {"read": loaded, "stored": loaded, "rejected": 0, "duplicates": 0, "ignored": 0}
    counts = dict(con.execute("SELECT metric, count(*) FROM samples GROUP BY 1").fetchall())
    steps = FLEET_HISTORY.steps
    assert counts == {
        "accelerator.utilization": 8 * steps, "accelerator.memory.used": 8 * steps, "accelerator.power": 8 * steps,
        "accelerator.temperature": 8 * steps, "serving.requests.running": steps, "serving.tokens.prompt": steps,
        "serving.time_to_first_token": 4 * steps,
    }
    k = 1234
    fb = series("DCGM_FI_DEV_FB_USED", Hostname="h100-a-02", gpu="1")
    assert value_at(con, "accelerator.memory.used", "h100-a-02", "1", k) == fb.value(k) * MIB  # MiB -> bytes
    util = series("gpu_gfx_activity", gpu_id="0")
    assert value_at(con, "accelerator.utilization", "mi300x-a-01", "0", k) == pytest.approx(util.value(k) / 100)
    hbm = series("npu_chip_info_hbm_used_memory", id="1")  # node from Prometheus' instance label
    assert value_at(con, "accelerator.memory.used", "ascend-a-01", "1", k) == hbm.value(k) * MIB
    assert value_at(con, "serving.time_to_first_token", "h100-a-01", "", k,
                    '{"le":"0.5","model":"llama-3.1-70b","stat":"bucket"}') == 3 * k
    pools = dict(con.execute("SELECT node, any_value(pool) FROM samples GROUP BY 1").fetchall())
    assert pools == {"h100-a-01": "h100-a", "h100-a-02": "h100-a", "mi300x-a-01": "mi300x-a",
                     "ascend-a-01": "ascend-a"}
    assert report.watermarks == {"amd": END, "ascend": END, "dcgm": END, "vllm": END}
    versions = con.execute("SELECT DISTINCT node, component, version FROM versions ORDER BY 1").fetchall()
    assert ("h100-a-01", "driver", "550.144.03") in versions


def test_rollups_equal_raw_after_a_pull(prom: PrometheusServer, tmp_path: Path) -> None:
    con = fresh_db(tmp_path / "r.duckdb")
    pull(Held(con), PromClient(prom.url), full(prom.url, profiles=("dcgm",), end_ms=START + 3 * HOUR_MS + 1))
    raw = con.sql("SELECT * FROM samples").pl()
    want = (raw.with_columns((pl.col("ts") // 60_000 * 60_000).alias("bucket")).sort("ts")
            .group_by("bucket", "node", "device", "metric").agg(
                pl.len().alias("count"), pl.col("value").mean().alias("avg"), pl.col("value").min().alias("min"),
                pl.col("value").max().alias("max"), pl.col("value").last().alias("last")))
    got = con.sql("SELECT bucket, node, device, metric, count, avg, min, max, last FROM rollup_1m").pl()
    key = ["bucket", "node", "device", "metric"]
    joined = want.join(got, on=key, how="full", suffix="_got", coalesce=True)
    assert joined.height == want.height == got.height
    for col in ("count", "min", "max", "last"):
        assert (joined[col] == joined[f"{col}_got"]).all(), col
    assert ((joined["avg"] - joined["avg_got"]).abs() < 1e-6 * joined["avg"].abs().max()).all()
    hours = con.execute("SELECT count(DISTINCT bucket) FROM rollup_1h").fetchone()
    assert hours == (4,)  # T0-1ms .. T0+3h: the last hour holds one sample per series


def test_half_then_rest_equals_one_pull(prom: PrometheusServer, tmp_path: Path, clean: tuple[int, str]) -> None:
    con = fresh_db(tmp_path / "h.duckdb")
    client = PromClient(prom.url)
    mid = START + 11 * HOUR_MS + 7 * 60_000 + 1  # not on a chunk edge
    first = pull(Held(con), client, full(prom.url, end_ms=mid))
    assert set(first.watermarks.values()) == {mid}
    rest = pull(Held(con), client, PullOptions(url=prom.url, end_ms=END))  # continues from each watermark
    assert rest.totals()["duplicates"] == 0
    assert digest(con) == clean


def test_follow_polls_from_the_watermark(prom: PrometheusServer, tmp_path: Path, clean: tuple[int, str]) -> None:
    con = fresh_db(tmp_path / "f.duckdb")
    clock_s = iter([START / 1000 + 6 * 3600 + STEP_S, (END + STEP_S * 1000) / 1000 + STEP_S])
    sleeps: list[float] = []
    polls = follow(Held(con), PromClient(prom.url), full(prom.url, end_ms=None), clock=lambda: next(clock_s),
                   sleep=sleeps.append, polls=2)
    assert polls == 2 and sleeps == [STEP_S]
    assert digest(con) == clean


def test_retries_heal_500s_timeouts_and_drops(prom: PrometheusServer, tmp_path: Path,
                                              clean: tuple[int, str]) -> None:
    attempts: dict[str, int] = {}
    first_tries = ("500", "drop", "warn", "ok", "ok", "500", "ok")

    def plan(n: int, path: str) -> str:
        # by query, not by arrival order, so two fetchers interleaving cannot stack three faults on one query
        if "/api/v1/query" not in path or "query=" not in path:
            return "ok"
        k = attempts.get(path, 0)
        attempts[path] = k + 1
        q = len(attempts)
        if k == 0:
            return "slow" if q % 60 == 1 else first_tries[q % len(first_tries)]  # a timeout costs a second
        return "500" if k == 1 and q % 5 == 0 else "ok"  # some queries fail twice before they heal

    con = fresh_db(tmp_path / "x.duckdb")
    with FaultProxy(prom.url, plan, slow_s=2.0) as proxy:
        report = pull(Held(con), PromClient(proxy.url, retry=FAST), full(proxy.url))
    actions = [a for _, a in proxy.requests]
    assert {"500", "slow", "drop", "warn"} <= set(actions)
    assert report.missing == []
    assert digest(con) == clean
    warned = con.execute("SELECT count(*) FROM ingest_runs WHERE status = 'warnings' AND warnings LIKE "
                         "'%partial response: store 2 of 3 unavailable%'").fetchone()
    assert warned is not None and warned[0] >= 1


def test_an_answer_that_trickles_is_cut_at_its_deadline_and_retried(
        prom: PrometheusServer, tmp_path: Path, clean: tuple[int, str]) -> None:
    # every read returns within the read timeout, so only the whole answer's deadline can end the first attempts
    tried: set[str] = set()

    def plan(n: int, path: str) -> str:
        if "/api/v1/query" in path and "query=" in path and path not in tried and len(tried) < 3:
            tried.add(path)
            return "trickle"
        return "ok"

    con = fresh_db(tmp_path / "t.duckdb")
    with FaultProxy(prom.url, plan, slow_s=30.0) as proxy:
        report = pull(Held(con), PromClient(proxy.url, retry=replace(FAST, deadline_s=0.5)), full(proxy.url))
    assert [a for _, a in proxy.requests].count("trickle") == 3
    assert report.missing == []
    assert digest(con) == clean
    # a query that trickles at every attempt is reported with why
    with FaultProxy(prom.url, lambda n, path: "trickle", slow_s=30.0) as proxy:
        client = PromClient(proxy.url, retry=replace(FAST, deadline_s=0.3), sleep=lambda s: None)
        with pytest.raises(ChunkFailed, match=r"failed after 3 attempts: no whole answer within 0\.3 s"):
            client.range_vector("DCGM_FI_DEV_GPU_UTIL", T0_S * 1000, T0_S * 1000 + 60_000)


def test_an_answer_over_the_cap_fails_its_chunk_at_once_and_keeps_the_rest(
        prom: PrometheusServer, tmp_path: Path) -> None:
    asked: list[str] = []

    def plan(n: int, path: str) -> str:
        asked.append(path)
        return "ok"

    con = fresh_db(tmp_path / "c.duckdb")
    small = replace(FAST, max_body_bytes=2048)  # the fixture's hour of one exporter's metrics is larger
    with FaultProxy(prom.url, plan) as proxy:
        client = PromClient(proxy.url, retry=small)
        with pytest.raises(ChunkFailed, match=r"answered more than 2048 bytes once decompressed; pull shorter "
                                              r"chunks \(--chunk\)"):
            client.range_vector('{__name__=~"DCGM.*"}', T0_S * 1000, T0_S * 1000 + 3_600_000)
        assert len(asked) == 1  # no retry: a later attempt would get the same answer
        report = pull(Held(con), client, full(proxy.url))
    assert report.missing and all(lo < hi for _, lo, hi in report.missing)
    failed = con.execute("SELECT count(*) FROM ingest_runs WHERE status = 'failed' AND warnings LIKE "
                         "'%answered more than 2048 bytes%'").fetchone()
    assert failed is not None and failed[0] == len(report.missing)


def _chunk_hour(path: str) -> float:
    query = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)
    return (float(query["time"][0]) - T0_S) / 3600 if "time" in query else -1.0


def test_a_chunk_that_keeps_failing_is_reported_and_healed_by_a_rerun(
        prom: PrometheusServer, tmp_path: Path, clean: tuple[int, str]) -> None:
    broken = True

    def plan(n: int, path: str) -> str:
        # every query of the dcgm chunk ending at T0+5h fails while `broken`
        return "500" if broken and _chunk_hour(path) == 5.0 and "DCGM" in path else "ok"

    con = fresh_db(tmp_path / "m.duckdb")
    with FaultProxy(prom.url, plan) as proxy:
        report = pull(Held(con), PromClient(proxy.url, retry=FAST), full(proxy.url))
        assert report.missing == [("dcgm", T0_S * 1000 + 4 * HOUR_MS, T0_S * 1000 + 5 * HOUR_MS)]
        assert report.watermarks["dcgm"] == T0_S * 1000 + 4 * HOUR_MS  # stays at the last good chunk
        assert report.watermarks["amd"] == END
        failed = con.execute("SELECT status, window_start, window_end, warnings FROM ingest_runs "
                             "WHERE status = 'failed'").fetchall()
        assert len(failed) == 1 and failed[0][1:3] == (T0_S * 1000 + 4 * HOUR_MS + 1, T0_S * 1000 + 5 * HOUR_MS)
        assert "HTTP 500" in failed[0][3]
        assert digest(con) != clean
        broken = False
        healed = pull(Held(con), PromClient(proxy.url, retry=FAST), PullOptions(url=proxy.url, end_ms=END))
    assert healed.missing == []
    assert digest(con) == clean


def hetpool(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def test_kill_9_mid_pull_then_restart_equals_one_pull(prom: PrometheusServer, tmp_path: Path,
                                                      clean: tuple[int, str]) -> None:
    hang = {"on": True}

    def plan(n: int, path: str) -> str:
        return "slow" if hang["on"] and n == 120 else "ok"  # hangs long after several chunks committed

    db = tmp_path / "k.duckdb"
    fresh_db(db).close()
    args = ["--db", str(db), "--json", "ingest", "prometheus", "--start", "2026-10-31T23:59:59.999Z",
            "--end", "2026-11-01T23:59:45Z", "--timeout", "60s"]
    with FaultProxy(prom.url, plan, slow_s=30.0) as proxy:
        proc = hetpool(*args, "--url", proxy.url)
        deadline = time.monotonic() + 60
        while len(proxy.requests) <= 120 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(proxy.requests) > 120, "the pull did not get far enough"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        con = connect(db)
        partial = con.execute("SELECT count(*) FROM samples").fetchone()
        marks = con.execute("SELECT count(*) FROM collector_watermarks").fetchone()
        con.close()
        assert partial is not None and 0 < partial[0] < clean[0]
        assert marks is not None and marks[0] >= 1
        hang["on"] = False
        rerun = hetpool(*args, "--url", proxy.url)  # the same command again
        out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    result = json.loads(out)
    assert result["missing"] == []
    # it resumed at each profile's watermark: only what was missing is read, nothing twice
    assert (result["stored"], result["duplicates"]) == (clean[0] - partial[0], 0)
    con = connect(db)
    assert digest(con) == clean
    con.close()


def test_wrong_token_is_refused_without_leaking_it(prom: PrometheusServer, tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    fresh_db(db).close()
    secret = "s3cr3t-token-do-not-print"
    with AuthProxy(prom.url, "Bearer the-right-one") as proxy:
        proc = hetpool("--db", str(db), "ingest", "prometheus", "--url", proxy.url, "--since", "1h",
                       env={"HETPOOL_PROM_TOKEN": secret})
        out, err = proc.communicate(timeout=120)
        assert proxy.seen_authorization and all(a == f"Bearer {secret}" for a in proxy.seen_authorization)
        ok = hetpool("--db", str(db), "--json", "ingest", "prometheus", "--url", proxy.url, "--start",
                     "2026-11-01T00:00:00Z", "--end", "2026-11-01T00:10:00Z",
                     env={"HETPOOL_PROM_TOKEN": "the-right-one"})
        ok_out, ok_err = ok.communicate(timeout=120)
    assert proc.returncode == 2 and out == ""
    assert err.strip().splitlines() == [
        f"hetpool: error: Prometheus at {proxy.url} refused the credentials (HTTP 401); check HETPOOL_PROM_TOKEN "
        "or HETPOOL_PROM_USER/HETPOOL_PROM_PASSWORD"]
    assert ok.returncode == 0, ok_err
    assert json.loads(ok_out)["stored"] > 0
    for text in (out, err, ok_out, ok_err, db.read_bytes().decode("latin-1")):
        assert secret not in text and "the-right-one" not in text


@pytest.mark.parametrize(("url", "message"), [
    ("http://127.0.0.1:1", "cannot reach Prometheus at http://127.0.0.1:1: connection refused"),
    ("prometheus:9090", "bad Prometheus URL 'prometheus:9090'; expected http(s)://host:port"),
    ("http://admin:hunter2@127.0.0.1:1", "credentials in the URL are not accepted"),
])
def test_unusable_server_is_one_line_and_writes_nothing(tmp_path: Path, url: str, message: str) -> None:
    db = tmp_path / "u.duckdb"
    fresh_db(db).close()
    proc = hetpool("--db", str(db), "ingest", "prometheus", "--url", url)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and "hunter2" not in err
    con = connect(db)
    assert con.execute("SELECT count(*) FROM ingest_runs").fetchone() == (0,)
    con.close()


def test_tls_is_verified_unless_told_otherwise(prom: PrometheusServer, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    db = tmp_path / "tls.duckdb"
    fresh_db(db).close()
    window = ["--start", "2026-11-01T00:00:00Z", "--end", "2026-11-01T00:05:00Z", "--profile", "dcgm"]
    with TlsProxy(prom.url, tls=(cert, key)) as proxy:
        assert proxy.url.startswith("https://")
        refused = hetpool("--db", str(db), "ingest", "prometheus", "--url", proxy.url, *window)
        _, refused_err = refused.communicate(timeout=120)
        trusted = hetpool("--db", str(db), "--json", "ingest", "prometheus", "--url", proxy.url, *window,
                          env={"HETPOOL_PROM_CA_BUNDLE": str(cert)})
        trusted_out, trusted_err = trusted.communicate(timeout=120)
        later = ["--start", "2026-11-01T00:05:00Z", "--end", "2026-11-01T00:10:00Z", "--profile", "dcgm"]
        insecure = hetpool("--db", str(db), "--json", "ingest", "prometheus", "--url", proxy.url, *later,
                           "--insecure")
        insecure_out, _ = insecure.communicate(timeout=120)
    assert refused.returncode == 2
    assert refused_err.strip() == (f"hetpool: error: cannot reach Prometheus at {proxy.url}: certificate verify "
                                   "failed; set HETPOOL_PROM_CA_BUNDLE to the server's CA file (or pass --insecure)")
    assert trusted.returncode == 0, trusted_out + trusted_err
    assert json.loads(trusted_out)["stored"] == 20 * 16  # 20 scrapes in (00:00, 00:05] x 16 DCGM series
    assert insecure.returncode == 0 and json.loads(insecure_out)["stored"] == 20 * 16
