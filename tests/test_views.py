"""The console's read models on a small hand-built fleet: every number checked against values worked out by hand.

Two hours of 30 s samples for h100-a (devices n1/0, n1/1, n2/0) and ascend-a (n1/0, n2/0):
- h100-a: n1/0 at utilization 0.8, clock 1.98 GHz, 500 W; n1/1 at 0.8 but stuck at 1.2 GHz, 400 W (a
  straggler, and throttled); n2/0 at 0.4, 300 W, unhealthy for minutes 60-69, a fatal XID 79 at minute 65,
  silent from minute 100;
- ascend-a: both at 0.9 and 350 W; n1/0 at 90 °C whose clock falls from 1.8 to 1.2 GHz in the second hour;
  a recoverable error event;
- a TTFT histogram (bounds 0.5, 1, 2, +Inf) and a prompt-token counter that resets at minute 60 on h100-a n1.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pool_registry import Registry
from store import Held, IngestRun, commit_run, connect, save_registry
from store.rollups import HOUR_MS, MINUTE_MS
from store.views import cost, drift, export, faults, health, reliability, status
from store.views import node as one_node
from store.views.counters import counter_increments, histogram_quantile, le_value
from store.views.window import Window, table_for

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
STEPS = 240             # 2 hours at 30 s
STEP_MS = 30_000
ALL = ["h100-a", "ascend-a"]
GIB = 1024**3


def attrs(**kv: str) -> str:
    return json.dumps(kv, sort_keys=True, separators=(",", ":"))


def fleet_rows() -> pl.DataFrame:
    rows = []
    devices = {  # (pool, node, device): (util, clock Hz, power W, temperature)
        ("h100-a", "n1", "0"): (0.8, 1.98e9, 500.0, 60.0),
        ("h100-a", "n1", "1"): (0.8, 1.2e9, 400.0, 60.0),
        ("h100-a", "n2", "0"): (0.4, 1.98e9, 300.0, 55.0),
        ("ascend-a", "n1", "0"): (0.9, 1.8e9, 350.0, 90.0),
        ("ascend-a", "n2", "0"): (0.9, 1.8e9, 350.0, 70.0),
    }
    for k in range(STEPS):
        ts = T0 + k * STEP_MS
        minute = k // 2
        for (pool, node, dev), (util, clock, power, temp) in devices.items():
            if (pool, node) == ("h100-a", "n2") and minute >= 100:
                continue
            if (pool, node) == ("ascend-a", "n1") and minute >= 60:
                clock = 1.2e9
            healthy = 0.0 if (pool, node) == ("h100-a", "n2") and 60 <= minute < 70 else 1.0
            for metric, value in (("accelerator.utilization", util), ("accelerator.clock", clock),
                                  ("accelerator.power", power), ("accelerator.temperature", temp),
                                  ("accelerator.memory.used", 40.0 * GIB), ("accelerator.memory.total", 80.0 * GIB),
                                  ("accelerator.health", healthy)):
                rows.append((ts, pool, node, dev, metric, value, "{}", True))
            # a secondary engine's utilization (a profile's `scope: component`) must not count in the pool's
            rows.append((ts, pool, node, dev, "accelerator.utilization", 0.01, attrs(engine="dram"), False))
        for le, per_step in (("0.5", 1), ("1", 3), ("2", 4), ("+Inf", 4)):
            rows.append((ts, "h100-a", "n1", "", "serving.time_to_first_token", float(per_step * k),
                         attrs(le=le, stat="bucket"), True))
        prompt = 1000.0 * k if k < 120 else 3000.0 * (k - 120)
        rows.append((ts, "h100-a", "n1", "", "serving.tokens.prompt", prompt, "{}", True))
    rows.append((T0 + 65 * MINUTE_MS, "h100-a", "n2", "0", "accelerator.errors", 1.0,
                 attrs(code="79", error_class="device_lost", severity="fatal"), True))
    rows.append((T0 + 30 * MINUTE_MS, "ascend-a", "n1", "0", "accelerator.errors", 1.0,
                 attrs(code="80E01801", error_class="application", severity="recoverable"), True))
    return pl.DataFrame(rows, schema=["ts", "pool", "node", "device", "metric", "value", "attributes", "device_wide"],
                        orient="row")


@pytest.fixture(scope="module")
def views_db(tmp_path_factory: pytest.TempPathFactory, fleet: Registry) -> Path:
    path = tmp_path_factory.mktemp("views") / "views.duckdb"
    con = connect(path)
    save_registry(con, fleet, "examples/fleet.yaml")
    raw = fleet_rows()
    run = IngestRun("file", "hand-built")
    run.add_read(raw.height)
    run.add_samples(raw)
    run.add_versions(pl.DataFrame({
        "pool": ["h100-a", "h100-a", "h100-a"], "node": ["n1", "n2", "n2"], "device": ["", "", ""],
        "component": ["driver", "driver", "driver"], "version": ["550.144.03", "550.144.03", "550.163.01"],
        "ts": [T0, T0, T0 + HOUR_MS]}))
    con.execute("INSERT INTO requests (trace, seq, arrival_ms, in_tokens, out_tokens, obs_pool) VALUES "
                "('t', 1, ?, 10, 5, 'h100-a'), ('t', 2, ?, 10, 5, 'h100-a'), ('t', 3, ?, 10, 5, 'ascend-a'), "
                "('t', 4, ?, 10, 5, 'h100-a')",
                [T0 + 1000, T0 + 2000, T0 + 3000, T0 + HOUR_MS + 5])
    commit_run(Held(con), run)
    con.close()
    return path


@pytest.fixture
def ro(views_db: Path) -> duckdb.DuckDBPyConnection:
    con = connect(views_db, read_only=True)
    yield con
    con.close()


WHOLE = Window(T0, T0 + 2 * HOUR_MS)


def test_tiles_equal_the_hand_computed_numbers(ro: duckdb.DuckDBPyConnection) -> None:
    tiles = {r["pool"]: r for r in health.pool_tiles(ro, WHOLE, ALL).iter_rows(named=True)}
    h100, ascend = tiles["h100-a"], tiles["ascend-a"]
    assert h100["reporting"] == 2 and ascend["reporting"] == 2  # n2/0 went silent at minute 100
    assert h100["utilization"] == pytest.approx((240 * 0.8 + 240 * 0.8 + 200 * 0.4) / 680)
    assert ascend["utilization"] == pytest.approx(0.9)
    assert h100["hbm_used"] == pytest.approx(0.5)
    assert h100["power_w"] == pytest.approx(1200.0) and ascend["power_w"] == pytest.approx(700.0)
    assert h100["temp_max"] == 60.0 and ascend["temp_max"] == 90.0
    # a share of devices: h100 n1/1 ran all its 120 busy minutes below 0.9 x 1.98 GHz; n1/0 never did and
    # n2/0 (at 0.4) was never busy -> 1 of 3
    assert h100["throttled"] == pytest.approx(1 / 3)
    # ascend: n1/0 spent 60 of its 120 busy minutes at 1.2 GHz < 0.9 x 1.8 GHz (at least 10 %) -> 1 of 2
    assert ascend["throttled"] == pytest.approx(0.5)
    assert h100["fatal_errors"] == 1.0 and ascend["fatal_errors"] == 0.0
    # cumulative 239 / 717 / 956 / 956 -> rank 946.44 lies in (1, 2]: 1 + (946.44 - 717) / 239
    assert h100["ttft_p99"] == pytest.approx(1 + (0.99 * 956 - 717) / 239)
    assert ascend["ttft_p99"] is None


@pytest.mark.parametrize("window", [
    Window(T0 + 30 * MINUTE_MS, T0 + 95 * MINUTE_MS),            # whole minutes: 1-minute rollup
    Window(T0 + 30 * MINUTE_MS + 15_000, T0 + 95 * MINUTE_MS),   # not aligned: raw samples
    Window(T0 + HOUR_MS, T0 + 2 * HOUR_MS),                      # whole hours: 1-hour rollup
])
def test_rollup_and_raw_paths_agree_with_an_independent_polars_computation(ro: duckdb.DuckDBPyConnection,
                                                                          window: Window) -> None:
    raw = fleet_rows().filter(pl.col("ts").is_between(window.start_ms, window.end_ms, closed="left"),
                              pl.col("attributes") == "{}")
    tiles = {r["pool"]: r for r in health.pool_tiles(ro, window, ALL).iter_rows(named=True)}
    for pool in ALL:
        mine = raw.filter(pl.col("pool") == pool)
        util = mine.filter(pl.col("metric") == "accelerator.utilization")["value"].mean()
        power = (mine.filter(pl.col("metric") == "accelerator.power").group_by("node", "device")
                 .agg(pl.col("value").mean())["value"].sum())
        assert tiles[pool]["utilization"] == pytest.approx(util)
        assert tiles[pool]["power_w"] == pytest.approx(power)


def test_whole_hours_read_from_the_fleet_rollups_equal_the_rollup_path(ro: duckdb.DuckDBPyConnection,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def views() -> list[pl.DataFrame]:
        return [health.pool_tiles(ro, WHOLE, ALL), status.device_facts(ro, WHOLE),
                health.worst_devices(ro, WHOLE, {}, 85.0), health.device_throttling(ro, WHOLE),
                health.metric_series(ro, WHOLE, HOUR_MS).drop_nulls("value")]

    fast = views()
    assert fast[1]["fatal_errors"].sum() == 1.0 and fast[3]["throttled"].sum() == 2  # the fixture's faults
    for module in (health, status):
        monkeypatch.setattr(module, "whole_hours", lambda w: False)
    real = health.table_for  # metric_series then reads raw samples: the node rollups are the only other path
    monkeypatch.setattr(health, "table_for", lambda w, step=None: ("samples", 0) if step == HOUR_MS else real(w, step))
    for got, want in zip(fast, views(), strict=True):
        assert_frame_equal(got, want, check_exact=False)


def test_table_choice_follows_the_window_alignment() -> None:
    assert table_for(WHOLE) == ("rollup_1h", HOUR_MS)
    assert table_for(WHOLE, 5 * MINUTE_MS) == ("rollup_1m", MINUTE_MS)
    assert table_for(Window(T0 + MINUTE_MS, T0 + HOUR_MS)) == ("rollup_1m", MINUTE_MS)
    assert table_for(Window(T0 + 1, T0 + HOUR_MS)) == ("samples", 0)
    with pytest.raises(ValueError, match="must be after its start"):
        Window(T0, T0)


@pytest.mark.parametrize("window", [WHOLE, Window(T0 + MINUTE_MS, T0 + 2 * HOUR_MS),
                                    Window(T0 + 1, T0 + 2 * HOUR_MS)])
def test_counter_increase_sees_the_reset(ro: duckdb.DuckDBPyConnection, window: Window) -> None:
    inc = counter_increments(ro, window, "serving.tokens.prompt")
    # 1000 per step up to minute 60, then from 0 at 3000 per step: 119 000 + 357 000 from the first sample;
    # a window starting at minute 1 has the value 1000 (the scrape at 30 s) as its baseline
    expected = {T0: 476_000.0, T0 + MINUTE_MS: 475_000.0, T0 + 1: 476_000.0}[window.start_ms]
    assert inc["inc"].sum() == pytest.approx(expected)


@pytest.mark.parametrize(("window", "expected"), [
    # after the reset: the baseline is the value just before the start, 3000 x (179 - 120) = 177 000 at minute
    # 89.5, read from the 1-hour rollup's first hour and the 1-minute rollup's minutes 60-89; the end is 357 000
    (Window(T0 + 90 * MINUTE_MS, T0 + 2 * HOUR_MS), 357_000.0 - 177_000.0),
    # not aligned: the raw sample at minute 90 itself (180 000) is the baseline
    (Window(T0 + 90 * MINUTE_MS + 1, T0 + 2 * HOUR_MS), 357_000.0 - 180_000.0),
    # the window's hour is the first: no hour before it, the baseline is minute 29.5's 59 000; then the reset
    (Window(T0 + 30 * MINUTE_MS, T0 + 2 * HOUR_MS), 119_000.0 - 59_000.0 + 357_000.0),
    (Window(T0 + HOUR_MS, T0 + 2 * HOUR_MS), 357_000.0),  # the reset bucket adds its last value
])
def test_counter_baseline_from_the_hours_before_the_window(ro: duckdb.DuckDBPyConnection, window: Window,
                                                            expected: float) -> None:
    assert counter_increments(ro, window, "serving.tokens.prompt")["inc"].sum() == pytest.approx(expected)


def test_status_facts_tiles_share_the_throttling_and_equal_the_hand_computed_numbers(
        ro: duckdb.DuckDBPyConnection) -> None:
    from app.status_read import read_facts

    tiles = read_facts(ro, WHOLE, ALL, now_ms=0).tiles
    assert tiles.equals(health.pool_tiles(ro, WHOLE, ALL))
    shares = dict(zip(tiles["pool"].to_list(), tiles["throttled"].to_list(), strict=True))
    assert shares == pytest.approx({"h100-a": 1 / 3, "ascend-a": 0.5})  # as in the hand-computed tiles above


def test_ttft_series_per_quarter_hour_by_hand(ro: duckdb.DuckDBPyConnection) -> None:
    # every step adds 1/3/4/4 to the cumulative buckets 0.5/1/2/+Inf: a quarter of 30 steps is 30/90/120/120,
    # rank 0.99 x 120 = 118.8 lies in (1, 2] at 1 + 28.8 / 30 = 1.96; the first quarter starts from zero (29 steps
    # after the first sample) and gives the same 1.96; the window from minute 90 has the 1-minute baseline
    for window, quarters in ((WHOLE, 8), (Window(T0 + 90 * MINUTE_MS, T0 + 2 * HOUR_MS), 2)):
        got = health.histogram_quantiles(ro, window, health.TTFT, 0.99, 15 * MINUTE_MS)
        assert got["t"].to_list() == [window.start_ms + i * 15 * MINUTE_MS for i in range(quarters)]
        assert got["value"].to_list() == pytest.approx([1.96] * quarters)


@pytest.mark.parametrize(("bounds", "counts", "q", "expected"), [
    ([0.5, 1.0, 2.0, float("inf")], [239, 717, 956, 956], 0.99, 1 + (0.99 * 956 - 717) / 239),
    ([0.5, 1.0, float("inf")], [10, 10, 10], 0.5, 0.25),          # inside the first bucket, from 0
    ([0.5, 1.0, float("inf")], [0, 0, 10], 0.99, 1.0),            # only +Inf: the largest finite bound
    ([0.5, 1.0, float("inf")], [0, 0, 0], 0.5, None),             # nothing observed
    ([1.0, float("inf")], [8, 6], 0.5, 0.5),                      # non-monotonic counts are repaired
])
def test_histogram_quantile(bounds: list[float], counts: list[float], q: float, expected: float | None) -> None:
    got = histogram_quantile(bounds, counts, q)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_le_values() -> None:
    assert le_value("+Inf") == float("inf") and le_value("0.25") == 0.25


def test_worst_devices_name_the_straggler_the_hot_and_the_silent(ro: duckdb.DuckDBPyConnection) -> None:
    worst = health.worst_devices(ro, WHOLE, {}, 85.0)
    found = {(r["issue"], r["pool"], r["node"], r["device"]) for r in worst.iter_rows(named=True)}
    assert found == {("stopped reporting", "h100-a", "n2", "0"), ("straggler", "h100-a", "n1", "1"),
                     ("hot", "ascend-a", "n1", "0")}
    assert worst["issue"][0] == "stopped reporting"
    hottest = worst.filter(pl.col("issue") == "hot")["value"][0]
    # a pool's own limit (its chip's) wins over the default; without either, nothing is judged hot
    assert "hot" not in health.worst_devices(ro, WHOLE, {"ascend-a": hottest + 1.0}, 85.0)["issue"].to_list()
    assert "hot" in health.worst_devices(ro, WHOLE, {"ascend-a": hottest}, None)["issue"].to_list()
    assert "hot" not in health.worst_devices(ro, WHOLE, {}, None)["issue"].to_list()


def test_series_per_pool_and_metric(ro: duckdb.DuckDBPyConnection) -> None:
    series = health.metric_series(ro, WHOLE, HOUR_MS)
    util = series.filter(pl.col("series") == "utilization", pl.col("pool") == "ascend-a")
    assert util["value"].to_list() == pytest.approx([0.9, 0.9])
    clock = series.filter(pl.col("series") == "clock (MHz)", pl.col("pool") == "ascend-a")
    assert clock["value"].to_list() == pytest.approx([1800.0, 1500.0])
    ttft = series.filter(pl.col("series") == "p99 TTFT (s)")
    assert ttft["pool"].unique().to_list() == ["h100-a"] and ttft.height == 2


def test_reliability_index(ro: duckdb.DuckDBPyConnection) -> None:
    rel = {r["pool"]: r for r in reliability.reliability(ro, WHOLE).iter_rows(named=True)}
    # 3 devices x 2 hours; n2/0's second hour had health 0 and a fatal event
    assert (rel["h100-a"]["observed"], rel["h100-a"]["healthy"]) == (6, 5)
    assert rel["h100-a"]["index"] == pytest.approx(5 / 6)
    assert rel["ascend-a"]["index"] == 1.0  # a recoverable error does not count


def test_the_reliability_index_counts_the_devices_that_never_reported(ro: duckdb.DuckDBPyConnection) -> None:
    # h100-a declares 8 devices and 3 reported: 5 are silent the whole window. 8 devices x 2 hours = 16
    # device-hours, of which the same 5 are healthy (n2/0's second hour had health 0 and a fatal event).
    rel = {r["pool"]: r for r in reliability.reliability(ro, WHOLE, {"h100-a": 8, "ascend-a": 1})
           .iter_rows(named=True)}
    h100 = rel["h100-a"]
    assert (h100["devices"], h100["reporting"], h100["silent"], h100["hours"]) == (8, 3, 5, 2)
    assert (h100["observed"], h100["healthy"], h100["reported_hours"]) == (16, 5, 6)
    assert h100["index"] == pytest.approx(5 / 16)
    # more devices reported than declared (1): the ones that reported count, none is silent
    ascend = rel["ascend-a"]
    assert (ascend["devices"], ascend["silent"], ascend["index"]) == (ascend["reporting"], 0, 1.0)
    # a pool the registry does not name counts the devices that reported
    bare = {r["pool"]: r for r in reliability.reliability(ro, WHOLE).iter_rows(named=True)}
    assert (bare["h100-a"]["devices"], bare["h100-a"]["silent"], bare["h100-a"]["index"]) == (3, 0, 5 / 6)


def test_nodes_to_drain(ro: duckdb.DuckDBPyConnection) -> None:
    drain = reliability.nodes_to_drain(ro, WHOLE)
    assert drain.select("pool", "node").rows() == [("h100-a", "n2")]
    row = drain.row(0, named=True)
    assert row["fatal_events"] == 1 and row["codes"] == "79" and row["silent_devices"] == 1
    assert row["unhealthy_devices"] == 0  # its last health reading, before it went silent, was 1
    assert row["reasons"] == "1 fatal error event (codes 79); 1 device(s) stopped reporting"


def test_fault_telemetry_by_hand(ro: duckdb.DuckDBPyConnection) -> None:
    got = {r["pool"]: r for r in faults.fault_telemetry(ro, WHOLE).iter_rows(named=True)}
    h100, ascend = got["h100-a"], got["ascend-a"]
    # h100: 3 devices x 2 hours; one fatal XID 79 and one device that went silent
    assert (h100["hours"], h100["device_hours"], h100["fatal_events"], h100["devices_lost"]) == (2, 6.0, 1.0, 1)
    # busy minutes: n1/0 and n1/1 at 0.8 (120 each), n2/0 at 0.4 never busy; n1/1 ran all 120 at 1.2 of 1.98 GHz
    assert (h100["busy_minutes"], h100["throttled_minutes"]) == (240, 120)
    assert h100["throttled_clock"] == pytest.approx(1.2 / 1.98)
    # ascend: 2 devices x 2 hours, no fatal event; n1/0 spent its second hour at 1.2 of 1.8 GHz
    assert (ascend["device_hours"], ascend["fatal_events"], ascend["devices_lost"]) == (4.0, 0.0, 0)
    assert (ascend["busy_minutes"], ascend["throttled_minutes"]) == (240, 60)
    assert ascend["throttled_clock"] == pytest.approx(1.2 / 1.8)
    # nothing stored before the window: the replay falls back to the traffic's own window
    assert faults.telemetry_for(ro, T0, T0 + 2 * HOUR_MS - 1, 7.0).equals(faults.fault_telemetry(ro, WHOLE))


def test_error_timeline_and_events(ro: duckdb.DuckDBPyConnection) -> None:
    timeline = reliability.error_timeline(ro, WHOLE, HOUR_MS)
    assert timeline.select("t", "pool", "error_class", "severity", "events").rows() == [
        (T0, "ascend-a", "application", "recoverable", 1.0), (T0 + HOUR_MS, "h100-a", "device_lost", "fatal", 1.0)]
    events = reliability.error_events(ro, Window(T0, T0 + 2 * HOUR_MS, ("h100-a",)))
    assert events.select("node", "device", "code", "error_class", "severity").rows() == [
        ("n2", "0", "79", "device_lost", "fatal")]


def test_cost_by_pool(ro: duckdb.DuckDBPyConnection, fleet: Registry) -> None:
    rows = {r["pool"]: r for r in cost.cost_by_pool(ro, fleet, WHOLE, ALL).iter_rows(named=True)}
    h100 = rows["h100-a"]
    assert h100["cost"] == pytest.approx(64 * 2 * 3.20)        # 64 declared devices x 2 h x $3.20
    assert h100["busy_cost"] == pytest.approx((1.6 + 1.6 + 0.8) * 3.20)
    assert h100["idle_cost"] == pytest.approx(64 * 2 * 3.20 - 4.0 * 3.20)
    assert h100["tokens"] == 476_000
    assert h100["cost_per_mtok"] == pytest.approx(409.6 / 476_000 * 1e6)
    assert rows["ascend-a"]["cost_per_mtok"] is None


def test_routing_mix(ro: duckdb.DuckDBPyConnection) -> None:
    mix = cost.routing_mix(ro, WHOLE, HOUR_MS)
    assert mix.rows() == [(T0, "ascend-a", 1, pytest.approx(1 / 3)), (T0, "h100-a", 2, pytest.approx(2 / 3)),
                          (T0 + HOUR_MS, "h100-a", 1, 1.0)]


def test_drift_compares_the_newest_observed_version_with_the_declared_stack(ro: duckdb.DuckDBPyConnection,
                                                                           fleet: Registry) -> None:
    got = drift.version_drift(ro, fleet, ALL)
    assert got.select("pool", "node", "component", "declared", "observed").rows() == [
        ("h100-a", "n2", "driver", "550.144.03", "550.163.01")]
    # n2 upgraded at the start of the second hour: the first hour holds no drift, the second does
    assert drift.version_drift(ro, fleet, ALL, Window(T0, T0 + 30 * MINUTE_MS)).is_empty()
    assert drift.version_drift(ro, fleet, ALL, Window(T0 + HOUR_MS, T0 + 2 * HOUR_MS))["node"].to_list() == ["n2"]


def test_export_selects_window_pools_and_metrics(ro: duckdb.DuckDBPyConnection) -> None:
    w = Window(T0, T0 + MINUTE_MS, ("ascend-a",))
    assert export.count_rows(ro, w, ["accelerator.power"]) == (2 * 2, "raw")  # 2 devices x 2 scrapes
    csv = export.export_bytes(ro, w, ["accelerator.power"], "csv").decode()
    assert csv.splitlines()[0] == "ts,pool,node,device,metric,value,attributes"
    assert len(csv.splitlines()) == 5
    back = pl.read_parquet(export.export_bytes(ro, w, ["accelerator.power", "accelerator.clock"], "parquet"))
    assert back.height == 8 and set(back["metric"]) == {"accelerator.power", "accelerator.clock"}
    assert "accelerator.errors" in export.metrics_in(ro, WHOLE)


def test_one_node_and_one_device(ro: duckdb.DuckDBPyConnection) -> None:
    dev = one_node.metric_series(ro, WHOLE, "h100-a", "n1", "1", HOUR_MS)
    value = {(r["metric"], r["t"]): r["value"] for r in dev.iter_rows(named=True)}
    assert set(dev["device"]) == {"1"}
    assert value["accelerator.utilization", T0] == pytest.approx(0.8)  # the dram engine's 0.01 is left out
    assert value["accelerator.clock", T0 + HOUR_MS] == pytest.approx(1.2e9)
    n1 = one_node.metric_series(ro, WHOLE, "h100-a", "n1", None, HOUR_MS)
    assert set(n1["device"]) == {"", "0", "1"}
    wide = {(r["metric"], r["t"]): r["value"] for r in n1.filter(pl.col("device") == "").iter_rows(named=True)}
    # increases from the hour before: the prompt counter reset to 0 and reached 3000 x 119; 4 observations a step
    assert wide == {("serving.tokens.prompt", T0 + HOUR_MS): pytest.approx(357_000.0),
                    ("serving.time_to_first_token", T0 + HOUR_MS): pytest.approx(480.0)}
    events = one_node.error_events(ro, WHOLE, "h100-a", "n2", None)
    assert events.select("ts", "device", "code", "severity").rows() == [(T0 + 65 * MINUTE_MS, "0", "79", "fatal")]
    assert one_node.error_events(ro, WHOLE, "h100-a", "n1", "0").is_empty()
    assert one_node.versions(ro, "h100-a", "n2", "0")["version"].to_list() == ["550.144.03", "550.163.01"]
    assert one_node.known_devices(ro, ("h100-a",)).rows() == [("h100-a", "n1", ""), ("h100-a", "n1", "0"),
                                                           ("h100-a", "n1", "1"), ("h100-a", "n2", "0")]
