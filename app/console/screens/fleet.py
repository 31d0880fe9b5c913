"""Fleet registry page: the pools of the loaded registry, as declared (those picked in the sidebar)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from app.console import cache, data, filters, tables


def render() -> None:
    """List pools with chip, devices, cost per hour and declared stack."""
    st.title("Fleet registry")
    path = cache.db_path()
    fleet = data.fleet_overview(path)
    if fleet.is_empty():
        st.info("No registry loaded yet. Load one with `hetpool registry load examples/fleet.yaml`.")
        return
    picked = filters.narrowed()
    if picked is not None:
        st.caption(f"The pools picked in the sidebar: {len(picked)} of the registry's {fleet.height}.")
        fleet = fleet.filter(pl.col("pool").is_in(list(picked)))
    cols = st.columns(4)
    cols[0].metric("Pools", fleet.height)
    cols[1].metric("Devices", int(fleet["devices"].sum()))
    cols[2].metric("Cost per hour", f"${fleet['cost_per_hour'].sum():,.2f}")
    cols[3].metric("Vendors", fleet["vendor"].n_unique())
    tables.wrapped(fleet.with_columns(pl.col("cost_per_hour").map_elements(lambda v: f"${v:,.2f}",
                                                                            return_dtype=pl.String))
                   .rename({"cost_per_hour": "cost per hour"}))


if __name__ == "__main__":
    render()
