"""The Replay what-if page under Streamlit's AppTest, on a copy of the small demo database.

Numbers the page shows are checked against the engine run here on the same inputs, the candidate YAML it
offers against `hetpool replay run`, a saved run against its re-opened form, and bad edits against the
candidate loader's own messages.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from streamlit.testing.v1 import AppTest

from app.cli import main
from app.console.whatif.results import RESULT_KEY, Outcome
from collectors.pipeline import IngestOptions, ingest_exposition
from pool_registry import Registry
from replay import Candidate, PoolOverride, SlaTier, closed_loop, default_requests, load_candidate_text, run_replay
from replay.calibrate import FITTED
from replay.calibrate.notes import UNSAID_STATISTIC
from replay.fleet import PoolSpec, pools_by_id, resolve_pools
from replay.summary import Summary
from store import ENV_DB, Held, connect, require_registry
from store.replay_runs import get_replay_run
from store.requests import read_history, read_requests
from store.views.faults import telemetry_for
from tests.conftest import REPO

MAIN = str(REPO / "app" / "console" / "main.py")
PAGE = "screens/replay.py"
TIERS = {"standard": SlaTier(2.0, 60.0), "premium": SlaTier(0.5, 20.0), "batch": SlaTier(None, 600.0)}


@pytest.fixture
def db(demo_db: Path, tmp_path: Path) -> Path:
    """A private copy of the demo database, so saving runs leaves the shared one as it was."""
    copy = tmp_path / "demo.duckdb"
    shutil.copyfile(demo_db, copy)
    return copy


# a calibration is the page's longest run: a benchmark table's takes about 45 s alone, past 120 s on two cores
# shared with other suites
CALIBRATE_S = 600


def open_page(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=120).run()
    at = at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def registry_of(db: Path) -> Registry:
    con = connect(db, read_only=True)
    try:
        return require_registry(con)
    finally:
        con.close()


def last_hour(db: Path) -> tuple[int, int, pl.DataFrame]:
    """The page's default window: the hour up to the newest stored request (to the second), and its requests."""
    con = connect(db, read_only=True)
    try:
        last = con.execute("SELECT max(arrival_ms) FROM requests").fetchall()[0][0]
        end = (last // 1000 + 1) * 1000
        return end - 3_600_000, end, read_requests(con, start_ms=end - 3_600_000, end_ms=end)
    finally:
        con.close()


def telemetry_of(db: Path, traffic: pl.DataFrame) -> pl.DataFrame:
    """The fault telemetry a replay of these stored requests reads (the week before them)."""
    con = connect(db, read_only=True)
    try:
        return telemetry_for(con, int(traffic["arrival_ms"].min()), int(traffic["arrival_ms"].max()),  # type: ignore[arg-type]
                             7.0)
    finally:
        con.close()


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def edit_and_run(at: AppTest) -> AppTest:
    """A lead's what-if: cost-min routing and a slower H100 pool, against the registry under sla_cost."""
    at.selectbox(key="wi.policy").set_value("cost_min").run()
    at.number_input(key="wi.h100-a.mfu").set_value(0.3).run()
    at.button(key="wi.run").click().run()
    assert not at.exception, at.exception
    return at


def money(v: float | None, places: int = 2) -> str:
    return "–" if v is None else f"${v:,.{places}f}"


def tiles(s: Summary) -> dict[str, str]:
    return {"Busy cost": money(s.busy_cost_usd), "Provisioned cost": money(s.provisioned_cost_usd),
            "Busy cost / M tokens": money(s.cost_per_mtok, 4), "p99 TTFT": f"{s.ttft_p99:.3f} s",
            "p99 e2e": f"{s.e2e_p99:.3f} s", "SLA violation rate": f"{s.sla_violation_rate:.2%}"}


def table_values(s: Summary) -> list[str]:
    lat = [f"{getattr(s, f'{m}_p{q}') * (1000 if m == 'tpot' else 1):.{1 if m == 'tpot' else 3}f}"
           f"{' ms' if m == 'tpot' else ' s'}" for m in ("ttft", "tpot", "e2e") for q in (50, 95, 99)]
    return [f"{s.requests:,}", f"{s.served:,}", money(s.provisioned_cost_usd), money(s.busy_cost_usd),
            money(s.cost_per_mtok, 4), *lat, f"{s.sla_violation_rate:.2%}",
            f"{s.overflow['queue']:,}", f"{s.overflow['degrade']:,}", f"{s.rejected:,}"]


def test_a_run_shows_the_engines_numbers_beside_the_baseline(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = edit_and_run(open_page(db, monkeypatch))
    start, end, traffic = last_hour(db)
    reg = registry_of(db)
    pools = {p.id: p for p in reg.pools}
    cand = Candidate(name="candidate", policy="cost_min", sla_tiers=TIERS, pools={
        "h100-a": PoolOverride(mfu=0.3)})
    assert pools["h100-a"].cost_model.mfu != 0.3
    base = Candidate(name="registry", policy="sla_cost", sla_tiers=TIERS)
    faults = telemetry_of(db, traffic)
    assert faults.height > 0 and float(faults["throttled_minutes"].sum()) > 0  # the demo throttles ascend-a
    # the routers start from what a gateway knew before the window: the page replays with that history
    con = connect(db, read_only=True)
    try:
        known = read_history(con, before_ms=start)
    finally:
        con.close()
    assert known.height > 0
    expected = run_replay(cand, traffic, reg, 0, known, telemetry=faults).summary
    expected_base = run_replay(base, traffic, reg, 0, known, telemetry=faults).summary
    assert expected != run_replay(cand, traffic, reg, 0).summary  # the page replays the telemetry's throttling
    shown = {m.label: m.value for m in at.metric}
    assert shown == tiles(expected)
    table = at.dataframe[0].value
    assert list(table["candidate"]) == table_values(expected)
    assert list(table["baseline"]) == table_values(expected_base)
    assert at.status and at.status[0].label == f"Replayed {traffic.height:,} requests in " + \
        at.status[0].label.split(" in ")[1]
    outcome: Outcome = at.session_state[RESULT_KEY]
    arrivals = traffic["arrival_ms"]
    first, last = (dt.datetime.fromtimestamp(int(ms) / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")  # type: ignore[arg-type]
                   for ms in (arrivals.min(), arrivals.max()))
    assert outcome.whatif.traffic == (f"stored requests of trace 'hetpool-demo' from {iso(start)} until {iso(end)} "
                                      f"({traffic.height:,} requests arriving {first} to {last} UTC)")
    assert outcome.whatif.verdict is not None
    banner = (at.success if outcome.whatif.verdict.passed else at.error)[0].value
    assert banner.startswith("**Gate passed**" if outcome.whatif.verdict.passed else "**Gate failed**")
    assert all(c.message in banner for c in outcome.whatif.verdict.checks)
    assert at.get("download_button") and len(at.get("download_button")) >= 2


def test_the_candidate_yaml_round_trips_through_the_cli(db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    at = edit_and_run(open_page(db, monkeypatch))
    outcome: Outcome = at.session_state[RESULT_KEY]
    path = tmp_path / "from-the-page.yaml"
    path.write_text(outcome.candidate_yaml)  # what the "Download candidate YAML" button serves
    spec = outcome.whatif.traffic_spec
    capsys.readouterr()
    code = main(["--db", str(db), "--json", "replay", "run", "--candidate", str(path), "--start",
                 iso(spec["start_ms"]), "--end", iso(spec["end_ms"])])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["traffic"] == outcome.whatif.traffic
    assert data["candidate"] == outcome.whatif.summary.to_dict()


def test_a_saved_run_reopens_with_the_same_numbers(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = edit_and_run(open_page(db, monkeypatch))
    shown = at.dataframe[0].value
    at.text_input(key="wi.save_name").set_value("cheaper h100s").run()
    at.text_input(key="wi.save_note").set_value("cost_min with mfu 0.3").run()
    at.button(key="wi.save").click().run()
    saved = [s.value for s in at.success if s.value.startswith("Saved as run ")]
    assert saved, [s.value for s in at.success]
    run_id = int(saved[0].split()[3].rstrip("."))
    con = connect(db, read_only=True)
    try:
        row = get_replay_run(con, run_id)
    finally:
        con.close()
    assert row is not None and (row["name"], row["note"]) == ("cheaper h100s", "cost_min with mfu 0.3")
    assert row["traffic_spec"]["kind"] == "stored" and row["gate"]["max_cost_increase_pct"] == 5.0
    fresh = AppTest.from_file(MAIN, default_timeout=120).run().switch_page(PAGE).run()  # a new session
    fresh.selectbox(key="wi.open").set_value(run_id).run()
    assert not fresh.exception
    opened = next(d.value for d in fresh.dataframe if list(d.value.columns) == ["measure", "candidate", "baseline"])
    assert opened.equals(shown)
    assert any(f"Run {run_id}: cheaper h100s" in m.value for m in fresh.markdown)
    fresh.button(key="wi.edit_opened").click().run()
    assert fresh.session_state["wi.policy"] == "cost_min" and fresh.session_state["wi.h100-a.mfu"] == 0.3


@pytest.mark.parametrize(("edits", "message"), [
    ({"wi.h100-a.mfu": 1.5}, "pools.h100-a.mfu: must be <= 1, got 1.5"),
    ({"wi.gaudi3-a.mem_bw_eff": 0.0}, "pools.gaudi3-a.mem_bw_eff: must be > 0, got 0.0"),
    ({"wi.ascend-a.replicas": 0}, "pools.ascend-a.replicas: must be >= 1, got 0"),
    ({"wi.mi300x-a.hourly_cost_per_device": -2.5}, "pools.mi300x-a.hourly_cost_per_device: must be > 0, got -2.5"),
    ({"wi.h100-a.step_overhead_ms": -1.0}, "pools.h100-a.step_overhead_ms: must be >= 0, got -1.0"),
    ({"wi.tier.batch.e2e_s": None}, "sla_tiers.batch: expected ttft_s and/or e2e_s"),
    ({"wi.tier.standard.ttft_s": -1.0}, "sla_tiers.standard.ttft_s: must be > 0, got -1.0"),
    ({"wi.h100-a.max_num_batched_tokens": 8}, "pool h100-a: max_num_batched_tokens 8 is below max_concurrency 64"),
    ({"wi.gate.max_cost_increase_pct": None, "wi.gate.max_ttft_p99_increase_pct": None,
      "wi.gate.max_sla_violation_increase_pts": None}, "gate:1: no tolerance given; expected any of: max_cost"),
])
def test_invalid_edits_are_refused_inline_and_start_no_run(demo_db: Path, monkeypatch: pytest.MonkeyPatch,
                                                           edits: dict[str, Any], message: str) -> None:
    at = open_page(demo_db, monkeypatch)
    for k, v in edits.items():
        at.number_input(key=k).set_value(v)
    at.run()
    errors = [e.value for e in at.error]
    assert any(message in e for e in errors), errors
    assert at.button(key="wi.run").disabled  # a browser cannot click it, and AppTest refuses to
    at.run()
    assert RESULT_KEY not in at.session_state and not at.status and not at.metric


def test_the_loaders_message_is_the_pages(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch)
    at.number_input(key="wi.h100-a.mfu").set_value(1.5).run()
    page = next(e.value for e in at.error if "mfu" in e.value)
    text = next(c.value for c in at.code)
    with pytest.raises(Exception) as exc:
        load_candidate_text(text, registry_of(demo_db), "candidate")
    assert str(exc.value) == page


def test_an_uploaded_trace_names_bad_lines_and_replays_the_rest(demo_db: Path, monkeypatch: pytest.MonkeyPatch,
                                                                corpus: Path) -> None:
    at = open_page(demo_db, monkeypatch)
    at.radio(key="wi.source").set_value("Upload a trace").run()
    body = (corpus / "traces" / "azure_AzureLLMInferenceTrace_conv.csv").read_bytes()
    lines = body.splitlines(keepends=True)
    broken = b"".join([*lines[:3], b"2023-11-16 18:16:00.0000000,-5,10\n", *lines[3:2000]])
    at.file_uploader(key="wi.upload").set_value(("conv.csv", broken, "text/csv")).run()
    assert any("line 4: negative in_tokens -5" in e.value for e in at.error), [e.value for e in at.error]
    at.button(key="wi.run").click().run()
    outcome: Outcome = at.session_state[RESULT_KEY]
    assert outcome.whatif.traffic == "file conv.csv (azure, 1999 requests)"
    at.file_uploader(key="wi.upload").set_value(("noise.bin", b"\x00\x01 not a trace", "application/octet-stream"))
    at.run()
    assert any("noise.bin: cannot tell the traffic format" in e.value for e in at.error)


def test_capacity_and_sweep_panels(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(db, monkeypatch)
    at.multiselect(key="wi.bench_pools").set_value(["h100-a"]).run()
    at.text_input(key="wi.bench_concurrency").set_value("1, 4, 16").run()
    at.button(key="wi.bench_run").click().run()
    bench = at.session_state["wi.bench"]
    spec = next(s for s in resolve_pools(registry_of(db), Candidate(name="r")) if s.id == "h100-a")
    assert bench["tpot_ms_p50"].to_list() == [closed_loop(spec, c, 1024, 128, default_requests(c)).tpot_ms_p50
                                              for c in (1, 4, 16)]
    at.multiselect(key="wi.sweep_policies").set_value(["sla_cost", "cost_min"]).run()
    at.selectbox(key="wi.sweep_pool").set_value("gaudi3-a").run()
    at.selectbox(key="wi.sweep_field").set_value("replicas").run()
    at.text_input(key="wi.sweep_values").set_value("1, 2").run()
    at.button(key="wi.sweep_run").click().run()
    assert not at.exception
    table, _ = at.session_state["wi.sweep"]
    front = table.filter(pl.col("pareto")).sort("busy_cost_usd")
    assert table.height == 4 and at.selectbox(key="wi.sweep_chosen").value == front["label"][0]
    at.button(key="wi.sweep_use").click().run()
    assert at.session_state["wi.gaudi3-a.replicas"] == int(front["label"][0].split("replicas=")[1])


def test_calibration_fills_the_candidate(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(db, monkeypatch)
    at.button(key="wi.calibrate").click().run(timeout=CALIBRATE_S)
    assert not at.exception and not [e.value for e in at.error if "calibrat" in e.value.lower()]
    fits, scatter, _ = at.session_state["wi.calib"]
    assert fits and scatter.height and set(scatter["pool"]) <= {f.pool for f in fits}
    at.button(key="wi.use_fitted").click().run()
    fit = next(f for f in fits if f.mfu is not None)
    assert at.session_state[f"wi.{fit.pool}.mfu"] == float(f"{fit.mfu:.4g}")


def test_the_sidebars_pools_narrow_the_calibration(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(db, monkeypatch)
    at.sidebar.multiselect(key="pools").set_value(["gaudi3-a"]).run()
    assert any(c.value.startswith("Fits gaudi3-a alone, from its own evidence: the pool picked") for c in at.caption)
    at.sidebar.multiselect(key="pools").set_value(["gaudi3-a", "mi300x-a"]).run()
    assert any(c.value.startswith(("Fits gaudi3-a, mi300x-a alone, from their own evidence: the pools picked",
                                   "Fits mi300x-a, gaudi3-a alone, from their own evidence: the pools picked"))
               for c in at.caption), [c.value for c in at.caption]
    at.sidebar.multiselect(key="pools").set_value(["gaudi3-a"]).run()
    at.button(key="wi.calibrate").click().run(timeout=CALIBRATE_S)
    assert not at.exception, at.exception
    fits, scatter, _ = at.session_state["wi.calib"]
    _, _, traffic = last_hour(db)
    served = traffic.filter((pl.col("obs_pool") == "gaudi3-a") & (pl.col("outcome") == "ok")).height
    assert [f.pool for f in fits] == ["gaudi3-a"] and 0.9 * served <= fits[0].n_ttft <= served
    # an hour of ~300 requests is enough to find the demo's planted mfu again (0.36)
    assert fits[0].mfu == pytest.approx(0.36, rel=0.05)
    assert scatter.height and set(scatter["pool"]) == {"gaudi3-a"}
    assert any(s.label == "Fitted 1 pool" for s in at.status)


def test_a_pool_whose_requests_all_failed_is_not_fitted_and_says_why(db: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # in the demo's last hour every request h100-a takes fails (its planted fault)
    _, _, traffic = last_hour(db)
    h100 = traffic.filter(pl.col("obs_pool") == "h100-a")
    assert h100.height and (h100["outcome"] != "ok").all()
    at = open_page(db, monkeypatch)
    at.sidebar.multiselect(key="pools").set_value(["h100-a"]).run()
    at.button(key="wi.calibrate").click().run(timeout=CALIBRATE_S)
    fits, _, _ = at.session_state["wi.calib"]
    assert [(f.pool, f.mfu, f.values()) for f in fits] == [("h100-a", None, {})]
    assert any(s.label == "Fitted 0 pools; 1 not fitted (no usable request)" for s in at.status)
    (warning,) = [w.value for w in at.warning if "h100-a" in w.value]
    assert warning == (f"**h100-a** was not fitted: none of the {h100.height} observed requests of h100-a can be "
                       f"fitted ({h100.height} failed, 0 without a TTFT): pick a window where the pool served "
                       "requests")


def bench_text(spec: PoolSpec, concurrencies: tuple[int, ...]) -> str:
    """A benchmark table of the pool's own model at these concurrencies, prompts of 256 and 2048 tokens."""
    lines = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms"]
    for isl in (256, 2048):
        for c in concurrencies:
            p = closed_loop(spec, c, isl, 128, default_requests(c))
            lines.append(f"{spec.id},{isl},128,{c},{p.ttft_ms_p50:.4f},{p.tpot_ms_p50:.4f}")
    return "\n".join(lines) + "\n"


def calibrate_on_bench(db: Path, monkeypatch: pytest.MonkeyPatch, spec: PoolSpec,
                       concurrencies: tuple[int, ...]) -> AppTest:
    """The page after fitting a benchmark table of the pool's own model at these concurrencies (no traffic)."""
    at = open_page(db, monkeypatch)
    at.file_uploader(key="wi.calib_bench").set_value(("bench.csv", bench_text(spec, concurrencies).encode(),
                                                      "text/csv"))
    at.run()
    at.checkbox(key="wi.calib_traffic").uncheck().run()
    at.button(key="wi.calibrate").click().run(timeout=CALIBRATE_S)
    assert not at.exception, at.exception
    return at


def test_calibration_from_a_benchmark_table_shows_each_coefficients_status(db: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    reg = registry_of(db)
    planted = Candidate(name="p", pools={"gaudi3-a": PoolOverride(mfu=0.33, mem_bw_eff=0.55, step_overhead_ms=6.0)})
    spec = next(s for s in resolve_pools(reg, planted) if s.id == "gaudi3-a")
    at = calibrate_on_bench(db, monkeypatch, spec, (1, 4, 16, 32))
    fits, _, _ = at.session_state["wi.calib"]
    (fit,) = [f for f in fits if f.pool == "gaudi3-a"]
    assert fit.n_ttft == 0 and fit.n_bench == 8 and len(fit.checks) == 8
    assert fit.mfu == pytest.approx(0.33, rel=0.05)
    shown = [d.value for d in at.dataframe if "coefficient" in d.value.columns]
    assert len(shown) == 1
    table = shown[0].set_index("coefficient")
    assert list(table.index) == list(FITTED)
    # rows planted from the roofline's full overlap: the evidence asks for no serial share
    assert table.loc["serial_share", "status"] == "at bound" and table.loc["serial_share", "fitted"] == 0.0
    assert table.loc["mfu", "status"] == "fitted"
    assert table.loc["collective_us", "status"] == "not identifiable"  # no hop latency declared, none to see
    assert "no effect" in table.loc["collective_us", "what it means"] or \
        "not identifiable" in table.loc["collective_us", "what it means"]
    # a benchmark table the loader refuses is the loader's message on the page
    at.file_uploader(key="wi.calib_bench").set_value(("bad.csv", b"pool,isl\nx,1\n", "text/csv")).run()
    at.button(key="wi.calibrate").click().run(timeout=CALIBRATE_S)
    assert any("bad.csv:1: missing column osl" in e.value for e in at.error), [e.value for e in at.error]


@pytest.mark.slow  # a calibration of lockstep rows with drawn lengths
def test_rows_that_may_be_means_read_as_medians_are_a_warning_on_the_page(db: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # rows as InferenceMAX's client measures (every client at once, lengths drawn up to 0.8 of them) that give
    # the means and do not say so: the fit reads them as medians, and the page says that this may be wrong
    reg = registry_of(db)
    spec = next(s for s in resolve_pools(reg, Candidate(name="p")) if s.id == "gaudi3-a")
    lines = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms,arrivals,range_ratio,range_style,num_prompts"]
    for c in (4, 16, 32):
        p = closed_loop(spec, c, 1024, 64, 10 * c, arrivals="lockstep", range_ratio=0.8, range_style="up_to")
        lines.append(f"gaudi3-a,1024,64,{c},{p.ttft_ms_mean:.4f},{p.tpot_ms_mean:.4f},lockstep,0.8,up_to,{10 * c}")
    at = open_page(db, monkeypatch)
    at.file_uploader(key="wi.calib_bench").set_value(("means.csv", ("\n".join(lines) + "\n").encode(), "text/csv"))
    at.run()
    at.checkbox(key="wi.calib_traffic").uncheck().run()
    at.button(key="wi.calibrate").click().run(timeout=CALIBRATE_S)
    assert not at.exception, at.exception
    (warning,) = [w.value for w in at.warning if UNSAID_STATISTIC in w.value]
    assert warning.startswith("**gaudi3-a**: 3 of 3 benchmark rows of gaudi3-a do not say which figure")


@pytest.mark.slow  # two calibrations of a benchmark table, about 90 s: the longest test of the quick tier
def test_use_fitted_writes_the_candidate_that_calibrate_out_writes(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    # decode tokens planted at a share of peak of their own, so the fit has an mfu_decode to carry
    reg = registry_of(db)
    planted = Candidate(name="p", pools={"gaudi3-a": PoolOverride(mfu=0.33, mem_bw_eff=0.55, step_overhead_ms=6.0,
                                                                  mfu_decode=0.08)})
    spec = next(s for s in resolve_pools(reg, planted) if s.id == "gaudi3-a")
    concurrencies = (1, 8, 32, 64)
    table, out = tmp_path / "bench.csv", tmp_path / "calibrated.yaml"
    table.write_text(bench_text(spec, concurrencies))
    assert main(["--db", str(db), "replay", "calibrate", "--no-requests", "--bench", str(table), "--out",
                 str(out)]) == 0
    at = calibrate_on_bench(db, monkeypatch, spec, concurrencies)
    at.button(key="wi.use_fitted").click().run()
    assert not at.exception, at.exception
    page = load_candidate_text(next(c.value for c in at.code if "pools:" in c.value), reg, "page")
    written = load_candidate_text(out.read_text(), reg, str(out))
    fitted, wrote = (pools_by_id(reg, c)["gaudi3-a"] for c in (page, written))
    assert written.pools["gaudi3-a"].mfu_decode is not None  # the coefficient the page once left behind

    def effective(spec: PoolSpec) -> dict[str, float | None]:  # a hop latency left to the link's is the link's
        return {k: getattr(spec, k) for k in FITTED} | {"collective_us": spec.link(False)[1] * 1e6}

    assert effective(fitted) == effective(wrote)


def test_a_pool_without_evidence_takes_its_chips_fit_and_says_so(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    # a second Gaudi 3 pool at TP8 beside gaudi3-a's TP4: only TP4 is benchmarked
    fleet = (REPO / "examples" / "fleet.yaml").read_text()
    extra = """  - id: gaudi3-b
    chip: gaudi3
    devices: 16
    devices_per_node: 8
    hourly_cost_per_device: 2.10
    exporter: gaudi
    assign: {node_pattern: "gaudi3-b-*"}
    serving: {model: llama-3.1-70b, engine: vllm, replicas: 2, devices_per_replica: 8, max_concurrency: 48}
    cost_model: {mfu: 0.40, mem_bw_eff: 0.70}
"""
    at_gaudi = fleet.index("  - id: mlu370-a")
    path = tmp_path / "fleet.yaml"
    path.write_text(fleet[:at_gaudi] + extra + fleet[at_gaudi:])
    shutil.copytree(REPO / "examples" / "onboarding", tmp_path / "onboarding")  # the evidence files it names
    assert main(["--db", str(db), "registry", "load", str(path)]) == 0
    reg = registry_of(db)
    spec = next(s for s in resolve_pools(reg, Candidate(name="r")) if s.id == "gaudi3-a")
    at = calibrate_on_bench(db, monkeypatch, spec, (1, 16))
    fits, _, _ = at.session_state["wi.calib"]
    got = {f.pool: f for f in fits}
    assert set(got) == {"gaudi3-a", "gaudi3-b"} and got["gaudi3-b"].carried_from == "gaudi3-a"
    assert got["gaudi3-b"].values() == got["gaudi3-a"].values()
    assert any(s.label == "Fitted 1 pool; 1 more without evidence took its chip's fit" for s in at.status)
    (info,) = [i.value for i in at.info if "gaudi3-b" in i.value]
    assert info.startswith("**gaudi3-b** has no evidence of its own: carried from gaudi3-a (the fit of gaudi3 on "
                           "this engine at TP4) to TP8")
    assert "check it with one benchmark row at TP8" in info
    assert info.endswith("gaudi3's interconnect declares no latency per hop (interconnect.latency_us), so TP8's "
                         "all-reduces cost their bytes alone")
    at.button(key="wi.use_fitted").click().run()
    assert at.session_state["wi.gaudi3-b.mfu"] == float(f"{got['gaudi3-a'].mfu:.4g}")


ORACLE_NOTE = "oracle: an upper bound, not achievable by a router"


def test_the_predictor_its_error_and_the_oracle_gap(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(db, monkeypatch)
    assert at.session_state["wi.predictor"] == "online"
    assert "predictor: online" in next(c.value for c in at.code)
    at.checkbox(key="wi.oracle_gap").check().run()
    at.button(key="wi.run").click().run()
    assert not at.exception, at.exception
    outcome: Outcome = at.session_state[RESULT_KEY]
    w = outcome.whatif
    assert w.history > 0 and w.oracle_summary is not None  # started from the requests stored before the hour
    assert any(ORACLE_NOTE in x.value and "the oracle gap" in x.value for x in at.warning)
    gap = next(d.value for d in at.dataframe if "with the oracle" in d.value.columns)
    assert list(gap.columns) == ["measure", "with online", "with the oracle", "change"]
    assert list(gap["measure"]) == ["busy cost", "p99 TTFT", "SLA violation rate"]
    assert list(gap["with the oracle"]) == [money(w.oracle_summary.busy_cost_usd), f"{w.oracle_summary.ttft_p99:.3f} s",
                                         f"{w.oracle_summary.sla_violation_rate:.2%}"]
    shown = " ".join(c.value for c in at.caption)
    s = w.summary
    assert (f"Output-length predictor, candidate: online: off by {s.predictor_err_tokens_p50:,.0f} output tokens at "
            f"the median and {s.predictor_err_tokens_p90:,.0f} at p90; predicted / true") in shown
    # the oracle itself: the form says what it is, and so does the result
    at.selectbox(key="wi.predictor").set_value("oracle").run()
    assert "predictor: oracle" in next(c.value for c in at.code)
    assert any(x.value.startswith(ORACLE_NOTE) for x in at.warning)
    at.checkbox(key="wi.oracle_gap").uncheck().run()
    at.button(key="wi.run").click().run()
    outcome = at.session_state[RESULT_KEY]
    assert outcome.whatif.summary.predictor == "oracle"
    assert any(x.value.startswith(f"**{ORACLE_NOTE}.** The numbers of candidate come from") for x in at.warning)
    verdict = outcome.whatif.verdict
    assert verdict is not None and verdict.checks[0].name == "predictor"  # the baseline predicts: unlike runs


@pytest.mark.parametrize(("choice", "edits", "message"), [
    ("fixed", {"wi.predictor.tokens": 0}, "predictor.tokens: must be >= 1, got 0"),
    ("online", {"wi.predictor.quantile": 1.5}, "predictor.quantile: must be > 0 and < 1 (0.5 is the median), "
                                               "got 1.5"),
])
def test_a_bad_predictor_option_gets_the_loaders_message(demo_db: Path, monkeypatch: pytest.MonkeyPatch,
                                                         choice: str, edits: dict[str, Any], message: str) -> None:
    at = open_page(demo_db, monkeypatch)
    at.selectbox(key="wi.predictor").set_value(choice).run()
    for k, v in edits.items():
        at.number_input(key=k).set_value(v)
    at.run()
    errors = [e.value for e in at.error]
    assert any(message in e for e in errors), errors
    assert at.button(key="wi.run").disabled


def test_a_table_predictor_round_trips_through_the_form(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch)
    at.selectbox(key="wi.predictor").set_value("table").run()
    at.number_input(key="wi.predictor.tier.premium").set_value(120)
    at.number_input(key="wi.predictor.default").set_value(300).run()
    text = next(c.value for c in at.code)
    body = yaml.safe_load(text)
    assert body["predictor"] == {"name": "table", "tiers": {"premium": 120}, "default": 300}
    assert not [e.value for e in at.error]


def test_the_pool_table_sets_observed_reuse_beside_the_replayed(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The h100-a engines reported 300 of 1,200 prompt tokens found in their prefix cache while the traffic arrived:
    the page shows 0.25 beside what the replay gives (the demo trace has no blocks: its recorded reuse, and it says
    so)."""
    start, end, _ = last_hour(db)
    at_ms = start + 600_000
    text = (f'vllm:prefix_cache_hits_total{{model_name="m",engine="0"}} 300 {at_ms}\n'
            f'vllm:prefix_cache_queries_total{{model_name="m",engine="0"}} 1200 {at_ms}\n').encode()
    con = connect(db)
    try:
        report = ingest_exposition(Held(con), iter([text]), kind="file", source="engine.prom",
                                   options=IngestOptions(pool="h100-a", node="h100-a-engine"), clock=lambda: end / 1000)
    finally:
        con.close()
    assert report.counts.stored == 2
    at = edit_and_run(open_page(db, monkeypatch))
    outcome: Outcome = at.session_state[RESULT_KEY]
    assert outcome.observed_reuse == {"h100-a": 0.25}
    pools = at.dataframe[1].value
    mine = pools[(pools["run"] == "candidate")]
    s = outcome.whatif.summary
    shown = dict(zip(mine["pool"], mine["prefix reuse"], strict=True))
    assert {k: None if pd_isna(v) else v for k, v in shown.items()} == {k: p.reuse for k, p in s.pools.items()}
    observed = dict(zip(mine["pool"], mine["observed reuse"], strict=True))
    assert observed["h100-a"] == 0.25 and all(pd_isna(v) for k, v in observed.items() if k != "h100-a")
    assert s.reuse_source == "recorded"
    assert any("taken as the trace recorded it" in c.value for c in at.caption)


def pd_isna(value: object) -> bool:
    return value is None or value != value
