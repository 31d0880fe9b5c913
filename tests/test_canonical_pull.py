"""The round trip: raw exporter history -> Prometheus -> `hetpool rules` -> `ingest prometheus --canonical`.

Two hours of raw exporter samples (the example DCGM scrape and the corpus' vLLM scrape, their values moving
step by step) are backfilled into a real Prometheus with `promtool tsdb create-blocks-from openmetrics`; the
rules `hetpool rules` compiles are evaluated over that history with `promtool tsdb create-blocks-from rules`
(the registry group first, since every canonical rule joins on its pool info) and loaded too. A canonical pull
of the recorded series must store what hetpool's own normalization stores from the same raw text, at the
pull's step: the gauges, counters and histograms, the error events of a sticky XID and of an ECC counter that
restarts, and the versions. The pull is also killed with SIGKILL half-way and run again: it ends with the
rows of one pull.

A rule records at its group's evaluations, each at an offset within the step, from the newest raw sample at
or before it; `reads` is that lag, measured from the first recorded sample, so the comparison stays exact.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from app.cli import main
from canonical.metrics import ERRORS_METRIC, METRICS
from collectors.pipeline import IngestOptions, ingest_exposition
from collectors.prometheus import CANONICAL_KEY, PullOptions, chunks, pull
from collectors.promhttp import PromClient
from normalizers import ExpositionParser, load_profiles
from normalizers.exposition import family_type
from pool_registry import load_registry
from store import Store, connect, save_registry
from tests.conftest import FLEET, REPO
from tests.promserver import PrometheusServer
from tests.proxies import FaultProxy

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]  # promtool backfills, two Prometheus starts, pulls

T0_S = 1_793_491_200  # 2026-11-01T00:00:00Z, a whole minute
STEP_S = 15
STEPS = 2 * 3600 // STEP_S  # two hours of raw samples
END_S = T0_S + (STEPS - 1) * STEP_S
NODE = "h100-a-01"  # the DCGM scrape's Hostname; the vLLM engine runs there too (its instance)
ERROR_NAMES = {name for p in load_profiles().profiles.values() for name in p.errors}
XID, ECC = "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
XID_FROM = ((20, 48), (40, 0), (60, 79), (100, 48), (120, 0))  # (step, code): GPU 0's last XID from that step on


def xid_at(k: int) -> float:
    """GPU 0's sticky XID: 48 (an event), cleared, 79 (an event), straight to 48 (an event), cleared."""
    return float(next((code for start, code in reversed(XID_FROM) if k >= start), 0))


def ecc_at(k: int) -> float:
    """GPU 1's double-bit ECC counter: +2 every 40 steps, a restart to 0 at step 200, then +1 every 40 steps."""
    return float(2 * (k // 40) if k < 200 else (k - 200) // 40)
Row = tuple[int, str, str, str, str, str]  # ts, pool, node, device, metric, attributes


@dataclass(frozen=True)
class RawSeries:
    """One exporter series of the source scrapes: how it is written, its first value, and its type."""

    name: str
    labels: dict[str, str]
    value: float
    kind: str | None

    def at(self, k: int) -> float:
        """Its value at step k: counts grow (buckets in proportion, so a histogram stays one), gauges move a
        little within their range, error signals follow their schedules or hold still."""
        if self.name == XID and self.labels.get("gpu") == "0":
            return xid_at(k)
        if self.name == ECC:
            return ecc_at(k)
        if self.name in ERROR_NAMES:
            return self.value
        if self.kind == "counter" or self.name.endswith(("_total", "_count", "_sum", "_bucket")):
            return self.value * (1 + k)
        return self.value * (1 - 0.002 * (k % 5))


def raw_series(path: Path, extra: dict[str, str]) -> list[RawSeries]:
    """Every series of an exporter file once, with `extra` labels (a scrape target's instance)."""
    parser = ExpositionParser()
    out: dict[str, RawSeries] = {}
    for batch in (parser.feed(path.read_bytes()), parser.finish()):
        for key, value in batch.samples.select("key", "value").iter_rows():
            name, labels = batch.series[str(key)]
            if math.isfinite(value):
                out.setdefault(str(key), RawSeries(name, {**labels, **extra}, value, family_type(name, batch.types)))
    return list(out.values())


def history(series: list[RawSeries]) -> str:
    """The whole history as OpenMetrics text without metadata (promtool reads it as untyped series)."""
    lines: list[str] = []
    for s in series:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        lines.extend(f"{s.name}{{{labels}}} {s.at(k)!r} {T0_S + k * STEP_S}\n" for k in range(STEPS))
    return "".join(lines) + "# EOF\n"


def promtool(*args: str) -> None:
    done = subprocess.run(["promtool", "tsdb", "create-blocks-from", *args], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def backfill_rules(prom: PrometheusServer, rules: dict[str, Any], work: Path, name: str) -> None:
    """Evaluate recording rules over the history through `prom` and write their blocks beside its own."""
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    out = work / f"{name}-blocks"
    promtool("rules", f"--url={prom.url}", f"--start={T0_S}", f"--end={END_S}", f"--eval-interval={STEP_S}s",
             f"--output-dir={out}", str(path))
    for block in out.iterdir():
        shutil.move(str(block), work / "tsdb" / block.name)


def restart(prom: PrometheusServer, work: Path) -> PrometheusServer:
    """Prometheus reads new blocks when it starts."""
    prom.stop()
    return PrometheusServer(work, None).start()


def fresh_db(path: Path) -> Path:
    with connect(path) as con:
        save_registry(con, load_registry(FLEET), str(FLEET))
    return path


@dataclass
class Trip:
    """The Prometheus holding raw and recorded history, and the store of the same raw text ingested directly."""

    prom: PrometheusServer
    direct: Path
    work: Path


@pytest.fixture(scope="module")
def trip(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Iterator[Trip]:
    work = tmp_path_factory.mktemp("canonical")
    series = raw_series(REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom", {})
    gpu1 = next(s for s in series if s.name == XID and s.labels["gpu"] == "1")
    series.append(RawSeries(ECC, gpu1.labels, 0.0, "counter"))
    series += raw_series(corpus / "serving" / "vllm" / "real_world_exposition_samples.prom",
                         {"instance": f"{NODE}:8000", "job": "vllm"})
    text = history(series)
    (work / "history.om").write_text(text)
    promtool("openmetrics", str(work / "history.om"), str(work / "tsdb"))
    direct = fresh_db(work / "direct.duckdb")
    report = ingest_exposition(Store(direct), [text.encode()], kind="file", source="history.om",
                               options=IngestOptions(node=NODE))
    assert report.counts.stored > 0 and report.counts.balanced
    assert main(["--db", str(direct), "rules", "--no-status", "--out", str(work / "rules.yaml")]) == 0
    groups = yaml.safe_load((work / "rules.yaml").read_text())["groups"]
    by_name = {g["name"]: g for g in groups}
    prom = PrometheusServer(work, None).start()
    try:
        backfill_rules(prom, {"groups": [by_name["hetpool_registry"]]}, work, "registry")
        prom = restart(prom, work)
        backfill_rules(prom, {"groups": [by_name["hetpool_canonical"]]}, work, "canonical")
        prom = restart(prom, work)
        yield Trip(prom, direct, work)
    finally:
        prom.stop()


def stored(db: Path, *, every_ms: int = 1) -> dict[Row, float]:
    """Gauge, counter and histogram rows (not error events) at the timestamps that are multiples of `every_ms`."""
    kinds = [m for m, c in METRICS.items() if c.kind in ("gauge", "counter", "histogram")]
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(f"SELECT ts, pool, node, device, metric, attributes, value FROM samples WHERE metric IN "
                           f"({', '.join('?' for _ in kinds)}) AND ts % ? = 0", [*kinds, every_ms]).fetchall()
    finally:
        con.close()
    return {(int(ts), pool, node, device, metric, attrs): float(v) for ts, pool, node, device, metric, attrs, v in rows}


def differences(got: dict[Row, float], want: dict[Row, float]) -> dict[str, Any]:
    """What differs, briefly: keys on one side only and values that are not equal."""
    return {"only pulled": sorted(map(str, set(got) - set(want)))[:10],
            "only direct": sorted(map(str, set(want) - set(got)))[:10],
            "values": [(str(k), got[k], want[k]) for k in sorted(set(got) & set(want))
                       if not math.isclose(got[k], want[k], rel_tol=1e-9)][:10]}


def canonical_pull(url: str, db: Path, step_s: int) -> dict[str, int]:
    report = pull(Store(db), PromClient(url), PullOptions(url=url, start_ms=T0_S * 1000 - 1, end_ms=END_S * 1000,
                                                          step_ms=step_s * 1000, canonical=True))
    assert report.missing == [] and list(report.watermarks) == [CANONICAL_KEY]
    return report.totals()


def first_evaluation_ms(url: str) -> int:
    """When the rules first recorded a canonical series: promtool evaluates a group at an offset within the step
    of its own (as a running Prometheus does), and the canonical rules record nothing before the first
    evaluation of the pool info they join on."""
    vector = PromClient(url).range_vector('{__name__="accelerator_power_watts"}', T0_S * 1000 - 1,
                                          T0_S * 1000 + 3 * STEP_S * 1000)
    first = vector.points.get_column("ts_ms").min()
    assert isinstance(first, int)
    return first


def reads(step_ms: int, first_ms: int) -> dict[int, int]:
    """What a pull at `step_ms` reads at each step t: the newest rule evaluation at or before t, which holds the
    newest raw sample at or before that evaluation (pulled time -> raw sample time)."""
    raw_ms, t0 = STEP_S * 1000, T0_S * 1000
    out = {}
    for t in range(t0, END_S * 1000 + 1, step_ms):
        if t >= first_ms:  # before it nothing is recorded
            evaluated = t - (t - first_ms) % raw_ms
            out[t] = evaluated - (evaluated - t0) % raw_ms
    return out


def expected(direct: dict[Row, float], step_ms: int, first_ms: int) -> dict[Row, float]:
    """The direct rows as a pull at `step_ms` reads them back."""
    by_ts: dict[int, list[tuple[Row, float]]] = {}
    for key, value in direct.items():
        by_ts.setdefault(key[0], []).append((key, value))
    return {(t, *key[1:]): value for t, sample in reads(step_ms, first_ms).items()
            for key, value in by_ts.get(sample, [])}


@pytest.mark.parametrize("step_s", [STEP_S, 60])
def test_the_canonical_pull_stores_what_direct_ingest_stores(trip: Trip, tmp_path: Path, step_s: int) -> None:
    db = fresh_db(tmp_path / "pulled.duckdb")
    totals = canonical_pull(trip.prom.url, db, step_s)
    assert totals["rejected"] == 0, totals
    direct = stored(trip.direct)
    metrics = {key[4] for key in direct}
    assert {"accelerator.power", "accelerator.memory.total", "serving.tokens.generated", "serving.time_to_first_token",
            "serving.requests.running"} <= metrics, metrics
    want = expected(direct, step_s * 1000, first_evaluation_ms(trip.prom.url))
    got = stored(db)
    assert len(want) >= 3000 and {key[0] % (step_s * 1000) for key in got} == {0}
    assert got == pytest.approx(want, rel=1e-9), differences(got, want)


Event = tuple[int, str, str, str, str]  # ts, pool, node, device, attributes


def events(db: Path) -> dict[Event, float]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT ts, pool, node, device, attributes, value FROM samples WHERE metric = ?",
                           [ERRORS_METRIC]).fetchall()
    finally:
        con.close()
    return {(int(ts), pool, node, device, attrs): float(v) for ts, pool, node, device, attrs, v in rows}


def versions(db: Path) -> dict[tuple[str, str, str, str, str], tuple[int, int]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT pool, node, device, component, version, first_seen, last_seen FROM versions"
                           ).fetchall()
    finally:
        con.close()
    return {(r[0], r[1], r[2], r[3], r[4]): (int(r[5]), int(r[6])) for r in rows}


def per_series(found: dict[Event, float]) -> dict[tuple[str, ...], tuple[int, float]]:
    """Events and their summed count per device and attributes."""
    out: dict[tuple[str, ...], tuple[int, float]] = {}
    for (_, *key), value in found.items():
        n, total = out.get(tuple(key), (0, 0.0))
        out[tuple(key)] = (n + 1, total + value)
    return out


@pytest.mark.parametrize("step_s", [STEP_S, 60])
def test_error_events_and_versions_come_back(trip: Trip, tmp_path: Path, step_s: int) -> None:
    db = fresh_db(tmp_path / "pulled.duckdb")
    canonical_pull(trip.prom.url, db, step_s)
    direct = events(trip.direct)
    # GPU 0: XID 48, 79 and 48 again (the clears are no events); GPU 1: the ECC counter's four +2, then after
    # its restart six +1 (the drop itself is no event)
    assert sorted(per_series(direct).values()) == [(1, 1.0), (2, 2.0), (10, 14.0)], per_series(direct)
    got = events(db)
    read = reads(step_s * 1000, first_evaluation_ms(trip.prom.url))
    if step_s == STEP_S:  # every raw sample is read once: each event comes back at the step that read it
        first_read = {sample: t for t, sample in sorted(read.items(), reverse=True)}
        assert got == {(first_read[ts], *key): v for (ts, *key), v in direct.items()}
    else:  # a minute reads every fourth sample: the same events, each counter increase summed into its minute
        assert per_series(got) == per_series(direct)
        assert {ts % 60_000 for ts, *_ in got} == {0}
    pulled, want = versions(db), versions(trip.direct)
    assert set(pulled) == set(want) and ("h100-a", NODE, "", "driver", "550.144.03") in want
    assert set(pulled.values()) == {(min(read), max(read))}


def digest(db: Path) -> tuple[int, str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT ts, pool, node, device, metric, value, attributes FROM samples ORDER BY ALL"
                           ).fetchall()
    finally:
        con.close()
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


def hetpool(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ))


def test_kill_9_mid_canonical_pull_then_restart_equals_one_pull(trip: Trip, tmp_path: Path) -> None:
    clean = fresh_db(tmp_path / "clean.duckdb")
    options = PullOptions(url=trip.prom.url, start_ms=T0_S * 1000 - 1, end_ms=END_S * 1000, step_ms=60_000,
                          chunk_ms=600_000, canonical=True)
    report = pull(Store(clean), PromClient(trip.prom.url), options)
    windows = list(chunks(T0_S * 1000 - 1, END_S * 1000, 60_000, 600_000))
    assert len(report.reports) == len(windows) > 10
    want = digest(clean)
    hang = {"on": True}

    def plan(n: int, path: str) -> str:
        return "slow" if hang["on"] and n == 80 else "ok"  # hangs after several chunks committed

    db = fresh_db(tmp_path / "k.duckdb")
    args = ["--db", str(db), "--json", "ingest", "prometheus", "--canonical", "--step", "1m", "--chunk", "10m",
            "--start", "2026-10-31T23:59:59.999Z", "--end", "2026-11-01T01:59:45Z", "--timeout", "60s"]
    with FaultProxy(trip.prom.url, plan, slow_s=30.0) as proxy:
        proc = hetpool(*args, "--url", proxy.url)
        deadline = time.monotonic() + 60
        while len(proxy.requests) <= 80 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(proxy.requests) > 80, "the pull did not get far enough"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        con = connect(db)
        partial = con.execute("SELECT count(*) FROM samples").fetchone()
        marks = con.execute("SELECT profile, watermark FROM collector_watermarks").fetchall()
        con.close()
        assert partial is not None and 0 < partial[0] < want[0]
        assert [profile for profile, _ in marks] == [CANONICAL_KEY]
        hang["on"] = False
        rerun = hetpool(*args, "--url", proxy.url)
        out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    result = json.loads(out)
    assert result["missing"] == []
    # it resumed at the watermark: it read exactly the chunks after it, as the clean pull read them (the
    # duplicates are error states repeating at 0, folded), and stored nothing twice
    rest = [r.as_dict() for r, (lo, _) in zip(report.reports, windows, strict=True) if lo >= marks[0][1]]
    assert 0 < len(rest) < len(windows)
    assert {k: result[k] for k in ("read", "stored", "duplicates")} == {
        k: sum(r[k] for r in rest) for k in ("read", "stored", "duplicates")}
    assert result["stored"] == want[0] - partial[0]
    assert digest(db) == want


def test_an_error_state_between_two_steps_is_one_event_at_the_next_step(tmp_path: Path) -> None:
    """A 0/1 state raised for one 15 s sample inside a minute is pulled at --step 1m as one event at the minute
    after it (the state's maximum over the step), as at 15 s; a state held for two minutes is one event too."""
    state = {"pool": "h100-a", "node": NODE, "device": "nvidia0", "error_class": "device_lost", "severity": "fatal"}
    blip, held = {**state, "code": "79"}, {**state, "device": "nvidia1", "code": "48"}
    lines = []
    for labels, up in ((blip, {13}), (held, set(range(21, 29)))):  # 195 s; 315 s up to 420 s
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines += [f"accelerator_error_state{{{text}}} {float(k in up)!r} {T0_S + k * STEP_S}\n" for k in range(40)]
    (tmp_path / "states.om").write_text("".join(lines) + "# EOF\n")
    promtool("openmetrics", str(tmp_path / "states.om"), str(tmp_path / "tsdb"))
    prom = PrometheusServer(tmp_path, None).start()
    try:
        for step_s, at in ((60, {"79": T0_S + 240, "48": T0_S + 360}), (STEP_S, {"79": T0_S + 195, "48": T0_S + 315})):
            db = fresh_db(tmp_path / f"pulled-{step_s}.duckdb")
            report = pull(Store(db), PromClient(prom.url), PullOptions(
                url=prom.url, start_ms=T0_S * 1000 - 1, end_ms=(T0_S + 39 * STEP_S) * 1000, step_ms=step_s * 1000,
                canonical=True))
            assert report.missing == [] and report.totals()["rejected"] == 0, report.totals()
            got = {json.loads(attrs)["code"]: (ts, value) for (ts, _, _, _, attrs), value in events(db).items()}
            assert got == {code: (t * 1000, 1.0) for code, t in at.items()}, (step_s, got)
    finally:
        prom.stop()
