"""Cost: money per pool and per million tokens, money spent on idle devices, and the routing mix over time."""

from __future__ import annotations

import polars as pl
import streamlit as st

from app.console import charts, data, filters, page, timecharts

DEFINITIONS = """
- **Cost** = devices declared for the pool × hours of the window that hold data × hourly cost per device
  (a device is paid for whether it works, idles or stays silent).
- **Busy cost** = Σ over device-hours of mean utilization × hourly cost per device; **idle cost** = cost − busy cost.
- **Tokens** = prompt + generated tokens counted by the pool's serving engines in the window;
  **cost per million tokens** = cost / tokens × 10⁶.
- **Routing mix** = share of the observed requests served by each pool, per time bucket.
"""


def render() -> None:
    """Draw the page for the sidebar's window and pools."""
    opened = page.begin("Cost")
    if opened is None:
        return
    path, view = opened.path, opened.view
    costs = data.cost_by_pool(path, view.start_ms, view.end_ms, view.pools)
    total = float(costs["cost"].sum())
    if total <= 0:
        filters.empty_window("paid device-hours")
        return
    idle = float(costs["idle_cost"].sum())
    tokens = float(costs["tokens"].sum())
    cols = st.columns(4)
    whole = set(view.pools) == set(view.all_pools)
    label = "Fleet cost per hour" if whole else "Pool cost per hour" if len(view.pools) == 1 else \
        f"Cost per hour of {len(view.pools)} pools"
    cols[0].metric(label, f"${costs['cost_per_hour'].sum():,.2f}")
    cols[1].metric("Cost in window", f"${total:,.0f}")
    cols[2].metric("Spent on idle devices", f"${idle:,.0f}", f"{idle / total:.0%} of cost", delta_color="off",
                   delta_arrow="off")
    cols[3].metric("Cost per million tokens", f"${total / tokens * 1e6:,.2f}" if tokens else "–")
    st.dataframe(
        costs.select("pool", "devices", "cost_per_hour", "cost", "busy_cost", "idle_cost", "idle_share", "tokens",
                     # as text, so a pool without tokens reads "–" like every other missing value
                     pl.col("cost_per_mtok").map_elements(lambda v: f"${v:,.2f}", return_dtype=pl.String)
                     .fill_null("–")),
        hide_index=True, width="stretch",
        column_config={
            "cost_per_hour": st.column_config.NumberColumn("$/hour", format="$%.2f"),
            "cost": st.column_config.NumberColumn("cost", format="$%.0f"),
            "busy_cost": st.column_config.NumberColumn("busy", format="$%.0f"),
            "idle_cost": st.column_config.NumberColumn("idle", format="$%.0f"),
            "idle_share": st.column_config.NumberColumn("idle share", format="percent"),
            "tokens": st.column_config.NumberColumn("tokens", format="localized"),
            "cost_per_mtok": st.column_config.TextColumn("$ per M tokens"),
        })
    charts.show(charts.cost_split(costs, list(view.all_pools)))
    mix = data.routing_mix(path, view.start_ms, view.end_ms, view.pools, view.step_ms())
    if mix.is_empty():
        filters.empty_window("request traffic")
    else:
        charts.show(timecharts.routing_mix(mix, list(view.all_pools), view.timeline()))
    with st.expander("Definitions"):
        st.markdown(DEFINITIONS)


if __name__ == "__main__":
    render()
