"""The demo tells one story: calibrating on it finds the planted coefficients, and replaying its traffic with
them reproduces each pool's observed TTFT and the console's busy utilization."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml

from app.cli import main
from app.demo.story import PLANTED
from replay import Candidate, calibrate, calibrated_candidate, load_candidate_text, run_replay
from replay.costmodel import step_model
from replay.fitting import apply
from replay.fleet import PoolSpec, pools_by_id
from store import connect, require_registry
from store.requests import read_requests
from store.views.cost import busy_device_hours, paid_hours
from store.views.window import Window, data_span

HOUR_MS = 3_600_000


def lone_decode_pass(spec: PoolSpec, eff: float | None, overhead_ms: float | None) -> float:
    """Seconds of one pass of a single sequence decoding at a context of 1,000 tokens."""
    return step_model(apply(spec, {"mem_bw_eff": eff, "step_overhead_ms": overhead_ms})).pass_seconds(1, 1, 1000.0)


@pytest.fixture(scope="module")
def demo8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six hours of the demo at its default size (8 devices per pool), where every pool holds its model."""
    path = tmp_path_factory.mktemp("demo8") / "demo.duckdb"
    assert main(["--db", str(path), "demo", "--days", "0.25", "--devices-per-pool", "8",
                 "--end", "2026-11-29T08:00:00Z"]) == 0
    return path


@pytest.mark.slow
def test_calibration_finds_the_planted_coefficients_and_the_replay_reproduces_the_demo(demo8: Path) -> None:
    con = connect(demo8, read_only=True)
    try:
        registry, requests = require_registry(con), read_requests(con)
        span = data_span(con)
        assert span is not None
        window = Window(span[0] - span[0] % HOUR_MS, span[1] - span[1] % HOUR_MS + HOUR_MS)
        busy = dict(busy_device_hours(con, window).rows())
        hours = paid_hours(con, window)
    finally:
        con.close()
    fits, unknown = calibrate(requests, registry)
    specs = pools_by_id(registry, Candidate(name="registry"))
    assert unknown == {} and {f.pool for f in fits} == set(PLANTED)
    unsplit: list[str] = []
    for f in fits:
        mfu, eff, overhead = PLANTED[f.pool]
        assert f.mfu == pytest.approx(mfu, rel=0.05), f.pool
        # A trace pins the decode pass that the bandwidth and the overhead make together; how it splits into the
        # two shows only in how passes change with batch and context (tests/test_calibrate.py: within about 20 %
        # and 40 %). With the models' shapes the all-reduces and the attention over the context grow with both as
        # well, which pins the split tighter here: within 10 % (bandwidth) and 40 % (overhead).
        assert lone_decode_pass(specs[f.pool], f.mem_bw_eff, f.step_overhead_ms) == pytest.approx(
            lone_decode_pass(specs[f.pool], eff, overhead), rel=0.01), f.pool
        report = {c.name: c for c in f.coefficients}
        # In the night's quiet hours most passes are of a sequence or two: a pool's evidence may then pin only the
        # lone pass that bandwidth and overhead make together (above), and the fit must say so rather than split it.
        if report["mem_bw_eff"].status == "fitted":
            assert f.mem_bw_eff == pytest.approx(eff, rel=0.1), f.pool
            assert f.step_overhead_ms == pytest.approx(overhead, rel=0.4), f.pool
        else:
            assert report["mem_bw_eff"].status == "not identifiable", f.pool
            unsplit.append(f.pool)
        # one TP degree a chip and engine: a hop's latency would add to every pass what the overhead adds, so the
        # link's declared figure is kept (3.2 us on Infinity Fabric; the others declare none and keep 0). The two H100
        # pools run TP4 (h100-a) and TP1 (h100-vl, no collectives), which tells the hop from the overhead: it is
        # fitted, and the planted figure is NVLink's declared 2.13 us.
        declared = registry.chip_of(registry.pool(f.pool)).interconnect.latency_us
        if f.pool in ("h100-a", "h100-vl"):
            assert report["collective_us"].status == "fitted", f.pool
            assert f.collective_us == pytest.approx(declared, rel=0.1), f.pool
        else:
            assert report["collective_us"].status == "not identifiable" and f.collective_us == declared, f.pool
    assert len(unsplit) <= 1, unsplit  # at seed 7, ascend-a's night: bandwidth 0.6 (the registry's) beside 8.5 ms
    candidate = load_candidate_text(yaml.safe_dump(calibrated_candidate(fits)), registry)
    result = run_replay(candidate, requests, registry, 0)
    observed = requests.sort("arrival_ms", "trace", "seq", maintain_order=True)
    rows = result.requests.with_columns(observed["obs_ttft_s"].alias("obs_ttft"),
                                        observed["outcome"].alias("obs_outcome"))
    for f in fits:
        ok = rows.filter((pl.col("pool") == f.pool) & (pl.col("obs_outcome") == "ok"))
        for q in (0.5, 0.99):
            assert ok["ttft_s"].quantile(q) == pytest.approx(ok["obs_ttft"].quantile(q), rel=0.10), (f.pool, q)
        devices = registry.pool(f.pool).devices
        console = busy[f.pool] / (devices * hours)
        model = result.summary.pools[f.pool].busy_s / (registry.pool(f.pool).serving.replicas * hours * 3600)  # type: ignore[union-attr]
        assert model == pytest.approx(console, rel=0.10), f.pool
