"""Fleet health: per-pool tiles, time series per metric and pool, the worst devices and software drift."""

from __future__ import annotations

import math
import time

import polars as pl
import streamlit as st

from app.console import acks, charts, data, deltas, filters, levels, links, page, tables, timecharts
from app.console.safe import md
from app.console.whatif.runway import runway_said
from canonical.timeunits import HOUR_MS
from status.evaluate import Status
from status.rules import load_rules
from status.verdict import pool_status, verdict

STATUS_COLUMNS = ("level", "scope", "pool", "node", "device", "reason", "acknowledged")  # a collector's in node
TILES = ("Devices reporting", "Utilization", "HBM used", "Power", "Max temperature", "Throttled",
         "Fatal errors", "p99 TTFT")
TILES_PER_ROW = 4
DEFINITIONS = """
- **Devices reporting**: devices with a sample in the last 5 minutes of the window, against the devices the
  registry declares for the pool.
- **Utilization**: mean of the pool's utilization samples in the window.
- **HBM used**: bytes used over bytes total, summed over the pool's samples.
- **Power**: sum over the pool's devices of each device's mean draw.
- **Max temperature**: the hottest sample of the window.
- **Throttled**: the share of the pool's devices that were throttled: at least 10 % of their busy minutes
  (utilization at least 50 %) ran more than 10 % below the pool's reference clock (its highest device-minute
  clock in the window), so one power-capped device of eight reads 12.5 %.
- **Fatal errors**: error events of severity *fatal* (for example XID 79, uncorrectable ECC).
- **p99 TTFT**: 99th percentile of time to first token, from the serving engines' histogram buckets.
- **Straggler**: a device whose mean clock is more than 15 % below its pool's median device.
  **Hot**: a device that reached its warning temperature: its chip's own limit where the registry declares one,
  else the status rules' ({hot}). **Stopped reporting**: samples in the window, none in its last 5 minutes.
- **Status**: the rules of `status/rules.yaml`, overridden by the site file `$HETPOOL_RULES` (the same rules
  `hetpool alerts` evaluates). A device is judged on its temperature against its chip's limits, fatal errors,
  health, HBM use, throttling and whether it still reports; a node takes its worst device; a pool is judged on
  devices reporting, fatal errors, the share of devices throttled and p99 TTFT against its SLA tier, and is at
  least a warning when one of its nodes is not ok.
- **Change**: each tile against the previous window of the same length.
"""
# tile kind, and whether a rise is good (normal), bad (inverse) or neither (off)
DELTA = (("int", "normal"), ("pct", "off"), ("pct", "off"), ("kw", "off"), ("c", "inverse"), ("pct", "inverse"),
         ("int", "inverse"), ("s", "inverse"))
COLUMNS = ("reporting", "utilization", "hbm_used", "power_w", "temp_max", "throttled", "fatal_errors", "ttft_p99")


def changes(row: dict[str, object], before: dict[str, object] | None) -> list[str | None]:
    """Each tile's change against the previous window, as text (None where either side has no data)."""
    out: list[str | None] = []
    for col, (kind, _) in zip(COLUMNS, DELTA, strict=True):
        now, then = row.get(col), before.get(col) if before else None
        if not isinstance(now, int | float) or not isinstance(then, int | float) or math.isnan(now) \
                or math.isnan(then):
            out.append(None)
            continue
        d = float(now) - float(then)
        out.append({"pct": f"{d * 100:+.1f} pp", "kw": f"{d / 1000:+,.1f} kW", "c": f"{d:+.0f} °C",
                    "int": f"{d:+,.0f}", "s": f"{d:+.2f} s"}[kind])
    return out


def statuses_now(path: str, view: filters.View) -> tuple[Status, ...]:
    """The status rules on the view (the collectors' lag measured against the clock now)."""
    return acks.statuses_now(path, view)


def fmt(value: object, kind: str) -> str:
    """A tile value as text; a dash when there is no data."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    v = float(value)  # type: ignore[arg-type]
    return {"pct": f"{v:.1%}", "kw": f"{v / 1000:,.1f} kW", "c": f"{v:.0f} °C", "int": f"{v:,.0f}",
            "s": f"{v:.2f} s"}[kind]


def tile_values(row: dict[str, object], expected: int) -> list[str]:
    """The eight tile texts of one pool, in TILES order."""
    return [f"{row['reporting']} / {expected}", fmt(row["utilization"], "pct"), fmt(row["hbm_used"], "pct"),
            fmt(row["power_w"], "kw"), fmt(row["temp_max"], "c"), fmt(row["throttled"], "pct"),
            fmt(row["fatal_errors"], "int"), fmt(row["ttft_p99"], "s")]


def render() -> None:
    """Draw the page for the sidebar's window and pools."""
    opened = page.begin("Fleet health")
    if opened is None:
        return
    path, view, reg = opened.path, opened.view, opened.registry
    # the status rules read the same tiles with the device states: one cached read serves both
    tiles = data.status_facts(path, view.start_ms, view.end_ms, view.pools).tiles
    if tiles["utilization"].is_null().all() and int(tiles["reporting"].sum()) == 0:
        filters.empty_window("device metrics")
        return
    statuses = statuses_now(path, view)
    level, sentence = verdict(statuses, view.pools)
    st.markdown(f"### {levels.coloured(level, md(sentence))}")
    acked = acks.acknowledged(path, statuses)
    acks.unreachable_note()
    if acked:
        st.caption(f"{len(acked)} of {len(statuses)} statuses that are not ok are acknowledged (silenced in "
                   "Alertmanager); see the table below.")
    length = view.end_ms - view.start_ms
    before = {r["pool"]: r for r in data.tiles(path, view.start_ms - length, view.start_ms, view.pools)
              .iter_rows(named=True) if r["reporting"] or r["utilization"] is not None}  # a pool unseen then: no change
    st.caption(f"Changes are against the previous {length / HOUR_MS:,.0f} hours "
               f"({filters.fmt_time(view.start_ms - length)} to {filters.fmt_time(view.start_ms)} UTC).")
    runways = {r["pool"]: r for r in data.latest_runways(path).iter_rows(named=True)}
    now_ms = int(time.time() * 1000)
    for row in tiles.iter_rows(named=True):
        pool = reg.pool(row["pool"])
        chip = reg.chip_of(pool)
        lvl, reason = pool_status(statuses, pool.id)
        silence = next((v for k, v in acked.items() if k.scope == "pool" and k.pool == pool.id), None)
        if silence is not None:
            reason = f"{reason} ({silence.text()})"
        with st.container(border=True):
            st.markdown(f"**{md(pool.id)}** · {md(chip.name)} · {pool.onboarding.stage} · "
                        f"{levels.badge(lvl)} {md(reason)}")
            moved = changes(row, before.get(pool.id))
            # two rows of four: eight tiles in one row cut their values ("48.…") on a laptop screen
            tiles_at = [c for _ in range(len(TILES) // TILES_PER_ROW) for c in st.columns(TILES_PER_ROW)]
            for col, label, value, change, (_, tone) in zip(tiles_at, TILES, tile_values(row, pool.devices), moved,
                                                            DELTA, strict=True):
                deltas.metric(col, label, value, change, tone)  # type: ignore[arg-type]
            if pool.id in runways:
                st.caption(runway_said(runways[pool.id], now_ms))
    if statuses:
        with st.expander(f"Every status that is not ok ({len(statuses)})"):
            table, config = links.linked(pl.DataFrame(
                [{"level": s.level, "scope": s.scope, "pool": s.pool, "node": s.node, "device": s.device,
                  "reason": s.reason, "acknowledged": acked[s].text() if s in acked else ""} for s in statuses],
                schema=dict.fromkeys(STATUS_COLUMNS, pl.String)))
            st.caption(tables.CUT)
            st.dataframe(table.to_pandas().style.map(lambda v: levels.CELL.get(str(v), ""), subset=["level"]),
                         hide_index=True, width="stretch", column_config=config)
    st.subheader("Time series")
    series = data.series(path, view.start_ms, view.end_ms, view.pools, view.step_ms())
    tl = view.timeline()
    marks = timecharts.Marks(data.severe_events(path, view.start_ms, view.end_ms, view.pools, view.step_ms()),
                             data.version_changes(path, view.start_ms, view.end_ms, view.pools))
    rules = load_rules()
    sla = {p: rules.ttft_target(p) for p in view.pools}
    st.caption(f"One point per {filters.fmt_step(tl.step_ms)}; a gap is a bucket without data.")
    fmts = {"utilization": "%", "HBM used": "%", "power per device (W)": ",.0f", "temperature (°C)": ".0f",
            "clock (MHz)": ",.0f", "p99 TTFT (s)": ".2f"}
    cols = st.columns(2)
    for i, (name, fmt_) in enumerate(fmts.items()):
        part = series.filter(pl.col("series") == name)
        with cols[i % 2]:
            if part.is_empty():
                st.caption(f"{name}: no data in this window")
            else:
                charts.show(timecharts.lines_by_pool(part, name, fmt_, list(view.pools), list(view.all_pools), tl,
                                                     marks, sla if name == "p99 TTFT (s)" else None))
    st.subheader("Worst devices")
    worst = data.worst_devices(path, view.start_ms, view.end_ms, view.pools)
    if worst.is_empty():
        st.success("No straggler, hot or silent device in this window.")
    else:
        table, config = links.linked(worst)
        st.dataframe(table, hide_index=True, width="stretch",
                     column_config={**config, "value": st.column_config.NumberColumn(format="%.1f")})
    st.subheader("Software drift")
    drift = data.version_drift(path, view.start_ms, view.end_ms, view.pools)
    if drift.is_empty():
        st.success("Every node runs the versions its pool declares.")
    else:
        st.caption("Nodes whose newest observed version differs from the pool's declared stack.")
        table, config = links.linked(drift.select("pool", "node", "component", "declared", "observed",
                                                  pl.from_epoch("last_seen", time_unit="ms")))
        st.dataframe(table, hide_index=True, width="stretch", column_config=config)
    with st.expander("Definitions"):
        warning = load_rules().temperature.warning
        st.markdown(DEFINITIONS.format(hot="none set" if warning is None else f"{warning:g} °C"))


if __name__ == "__main__":
    render()
