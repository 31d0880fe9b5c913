"""Fleet registry page: the pools of the loaded registry, as declared."""

from __future__ import annotations

import streamlit as st

from app.console import cache, data


def render() -> None:
    """List pools with chip, devices, cost per hour and declared stack."""
    st.title("Fleet registry")
    path = cache.db_path()
    fleet = data.fleet_overview(path)
    if fleet.is_empty():
        st.info("No registry loaded yet. Load one with `hetpool registry load examples/fleet.yaml`.")
        return
    cols = st.columns(4)
    cols[0].metric("Pools", fleet.height)
    cols[1].metric("Devices", int(fleet["devices"].sum()))
    cols[2].metric("Cost per hour", f"${fleet['cost_per_hour'].sum():,.2f}")
    cols[3].metric("Vendors", fleet["vendor"].n_unique())
    st.dataframe(
        fleet, hide_index=True, width="stretch",
        column_config={"cost_per_hour": st.column_config.NumberColumn("cost per hour", format="$%.2f")},
    )


if __name__ == "__main__":
    render()
