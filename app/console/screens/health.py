"""Fleet health: per-pool tiles, time series per metric and pool, the worst devices and software drift."""

from __future__ import annotations

import math

import polars as pl
import streamlit as st

from app.console import charts, data, filters

TILES = ("Devices reporting", "Utilization", "HBM used", "Power", "Max temperature", "Throttled",
         "Fatal errors", "p99 TTFT")
DEFINITIONS = """
- **Devices reporting**: devices with a sample in the last 5 minutes of the window, against the devices the
  registry declares for the pool.
- **Utilization**: mean of the pool's utilization samples in the window.
- **HBM used**: bytes used over bytes total, summed over the pool's samples.
- **Power**: sum over the pool's devices of each device's mean draw.
- **Max temperature**: the hottest sample of the window.
- **Throttled**: of the busy device-minutes (utilization at least 50 %), the share whose clock ran more than
  10 % below the pool's reference clock (its highest device-minute clock in the window).
- **Fatal errors**: error events of severity *fatal* (for example XID 79, uncorrectable ECC).
- **p99 TTFT**: 99th percentile of time to first token, from the serving engines' histogram buckets.
- **Straggler**: a device whose mean clock is more than 15 % below its pool's median device.
  **Hot**: a device that reached 85 °C. **Stopped reporting**: samples in the window, none in its last 5 minutes.
"""


def fmt(value: object, kind: str) -> str:
    """A tile value as text; a dash when there is no data."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    v = float(value)  # type: ignore[arg-type]
    return {"pct": f"{v:.1%}", "kw": f"{v / 1000:,.1f} kW", "c": f"{v:.1f} °C", "int": f"{v:,.0f}",
            "s": f"{v:.2f} s"}[kind]


def tile_values(row: dict[str, object], expected: int) -> list[str]:
    """The eight tile texts of one pool, in TILES order."""
    return [f"{row['reporting']} / {expected}", fmt(row["utilization"], "pct"), fmt(row["hbm_used"], "pct"),
            fmt(row["power_w"], "kw"), fmt(row["temp_max"], "c"), fmt(row["throttled"], "pct"),
            fmt(row["fatal_errors"], "int"), fmt(row["ttft_p99"], "s")]


def render() -> None:
    """Draw the page for the sidebar's window and pools."""
    st.title("Fleet health")
    view = filters.current()
    if view is None:
        return
    path = data.db_path()
    reg = data.registry(path)
    assert reg is not None
    st.caption(view.label())
    tiles = data.tiles(path, view.start_ms, view.end_ms, view.pools)
    if tiles["utilization"].is_null().all() and int(tiles["reporting"].sum()) == 0:
        filters.empty_window("device metrics")
        return
    for row in tiles.iter_rows(named=True):
        pool = reg.pool(row["pool"])
        chip = reg.chip_of(pool)
        with st.container(border=True):
            st.markdown(f"**{pool.id}** · {chip.name} · {pool.onboarding.stage}")
            for col, label, value in zip(st.columns(len(TILES)), TILES, tile_values(row, pool.devices), strict=True):
                col.metric(label, value)
    st.subheader("Time series")
    series = data.series(path, view.start_ms, view.end_ms, view.pools, view.step_ms())
    fmts = {"utilization": "%", "HBM used": "%", "power per device (W)": ",.0f", "temperature (°C)": ".0f",
            "clock (MHz)": ",.0f", "p99 TTFT (s)": ".2f"}
    cols = st.columns(2)
    for i, (name, fmt_) in enumerate(fmts.items()):
        part = series.filter(pl.col("series") == name)
        with cols[i % 2]:
            if part.is_empty():
                st.caption(f"{name}: no data in this window")
            else:
                charts.show(charts.lines_by_pool(part, name, fmt_, list(view.all_pools)))
    st.subheader("Worst devices")
    worst = data.worst_devices(path, view.start_ms, view.end_ms, view.pools)
    if worst.is_empty():
        st.success("No straggler, hot or silent device in this window.")
    else:
        st.dataframe(worst, hide_index=True, width="stretch",
                     column_config={"value": st.column_config.NumberColumn(format="%.1f")})
    st.subheader("Software drift")
    drift = data.version_drift(path, view.pools)
    if drift.is_empty():
        st.success("Every node runs the versions its pool declares.")
    else:
        st.caption("Nodes whose newest observed version differs from the pool's declared stack.")
        st.dataframe(drift.select("pool", "node", "component", "declared", "observed",
                                  pl.from_epoch("last_seen", time_unit="ms")), hide_index=True, width="stretch")
    with st.expander("Definitions"):
        st.markdown(DEFINITIONS)


if __name__ == "__main__":
    render()
